#!/usr/bin/env bash
# Writes docs/validation/gradient-compression.md: what gradient compression (compress=R,
# PowerSGD with error feedback: src/cost/grad_compression.h, runtime/exec/powersgd.h) does to
# the training loss and to the bytes the DP reduction sends. `shardsim run` trains models/tiny
# on byte-level text (scripts/make-token-file.sh) with dp=2 for STEPS steps at each ratio, the
# same seed, data and learning-rate schedule; the bytes per step are the plan's
# (`shardsim estimate --json`, whose DP calls equal the runtime's byte for byte:
# RuntimePricedCollectivesTest.GradientCompression). Needs a build with MPI (scripts/build.sh).
#   scripts/compression-loss.sh [STEPS]   (default 300; about 4 minutes on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-300}
bin=build/shardsim
mpirun=$(command -v mpirun) || { echo "compression-loss.sh: no mpirun" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bash scripts/make-token-file.sh "$work/text.bin" >/dev/null
layout_base="dp=2,mbs=4,gbs=16,dtype=fp32"
ratios="1 2 4 16 64"
for r in $ratios; do
  "$mpirun" -np 2 --oversubscribe --allow-run-as-root "$bin" run --model tiny --layout "$layout_base,compress=$r" \
    --steps "$steps" --data "$work/text.bin" --lr 3e-3 --lr-schedule cosine --warmup-steps 20 --min-lr 3e-4 \
    --out "$work/run-$r.json" >/dev/null 2>"$work/run-$r.err" || { cat "$work/run-$r.err" >&2; exit 1; }
  "$bin" estimate --model tiny --hardware cpu-host --gpus 2 --layout "$layout_base,compress=$r" --json \
    >"$work/estimate-$r.json" 2>/dev/null
done
out=docs/validation/gradient-compression.md
tmp=$(mktemp "$out.XXXXXX")
python3 - "$work" "$steps" "$layout_base" $ratios >"$tmp" <<'PY'
import json, sys
work, steps, base, ratios = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
def mean(xs):
    return sum(xs) / len(xs)
print("# Gradient compression: its effect on the loss")
print()
print("Written by `scripts/compression-loss.sh " + str(steps) + "`. `shardsim run` trains `models/tiny` "
      "(4 layers, hidden 64, GQA 4/2, 0.3 M parameters) on byte-level tokens of the licence texts under "
      "/usr/share/common-licenses (`scripts/make-token-file.sh`), layout `" + base + "` on 2 ranks (CPU "
      "backend), AdamW at 3e-3 with 20 warm-up steps and cosine decay to 3e-4, seed 1234, " + str(steps) +
      " steps of 16 sequences x 64 tokens, at each `compress` ratio. `compress=R` runs PowerSGD with error "
      "feedback and warm start (`runtime/exec/powersgd.h`): each gradient matrix is sent as rank-r factors, "
      "r = floor(n m / (R (n + m))), vectors whole. Bytes per step are the DP all-reduces of the plan "
      "(`shardsim estimate --json`), which the runtime issues byte for byte.")
print()
print("| compress | DP bytes per step | sent vs uncompressed | loss, first 10 steps | loss, last 20 steps | vs compress=1 |")
print("|---:|---:|---:|---:|---:|---:|")
base_loss = None
base_bytes = None
for r in ratios:
    run = json.load(open(f"{work}/run-{r}.json"))
    est = json.load(open(f"{work}/estimate-{r}.json"))
    sent = sum(c["bytes"] * c["count"] for c in est["collectives"] if c["group"] == "dp")
    losses = run["losses"]
    first, last = mean(losses[:10]), mean(losses[-20:])
    if base_loss is None:
        base_loss, base_bytes = last, sent
    print(f"| {r} | {sent:,.0f} | {sent / base_bytes:.3f} | {first:.4f} | {last:.4f} | {100 * (last - base_loss) / base_loss:+.2f} % |")
print()
print("The fraction sent is about 1/R, not exactly: r is rounded down (a little less is sent), while "
      "vectors (norm gains) and matrices whose factors would not be smaller are sent whole and r is at "
      "least 1 (more is sent): the tiny model's 64 x 64 matrices reach rank 1 (128 elements of 4,096) at "
      "compress=32 and stay there above it.")
PY
mv "$tmp" "$out"
echo "wrote $out"
