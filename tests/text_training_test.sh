#!/usr/bin/env bash
# `shardsim run --data` learns real text: the tiny model on byte-level tokens of the licence
# texts (scripts/make-token-file.sh), 100 steps with warm-up and cosine decay. The mean loss of
# the last 10 steps must fall below the text's byte-frequency (unigram) entropy, computed here
# from the same file: the best loss any model can reach without looking at context. It starts
# near ln 512 = 6.24 (uniform over the vocabulary); on this text it ends about 2.85 against an
# entropy of 3.21 nats (237,320 bytes on Debian 12).
#   text_training_test.sh SHARDSIM
set -euo pipefail
shardsim=$1
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bash "$here/../scripts/make-token-file.sh" "$work/text.u16"
"$shardsim" run --model tiny --data "$work/text.u16" --layout mbs=4,gbs=8,dtype=fp32 --steps 100 \
  --lr 0.01 --lr-schedule cosine --warmup-steps 10 --min-lr 0.001 --out "$work/run.json" > /dev/null
python3 - "$work/text.u16" "$work/run.json" <<'PY'
import array, collections, json, math, sys
ids = array.array("H")
with open(sys.argv[1], "rb") as f:
    ids.frombytes(f.read())
counts, n = collections.Counter(ids), len(ids)
entropy = -sum(c / n * math.log(c / n) for c in counts.values())
run = json.load(open(sys.argv[2]))
losses = run["losses"]
last = sum(losses[-10:]) / 10
print("text: %d tokens, unigram entropy %.4f nats; loss %.4f -> mean of the last 10 steps %.4f" %
      (n, entropy, losses[0], last))
rates = run["learning_rates"]
assert rates[0] == 0 and abs(rates[10] - 0.01) < 1e-15, rates[:11]  # warm-up from 0 to the peak at step 10
sys.exit(0 if last < entropy else 1)
PY
echo PASS
