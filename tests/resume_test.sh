#!/usr/bin/env bash
# Kill and resume (issue 17, item 3): a run that dies mid-way and is resumed from its last
# checkpoint must end exactly where an uninterrupted run ends, bitwise.
#   resume_test.sh SHARDSIM [MPIEXEC]
# With MPIEXEC, 2 ranks (dp=2, ZeRO-1, bf16: sharded master weights and moments): A runs 6
# steps saving every 2; B is the same run with rank 1 killed (SIGKILL) at step 5, after the
# step-4 checkpoint; C resumes B's checkpoint and finishes. C's losses of steps 4-5 must equal
# A's, and C's step-6 state files (weights, master, moments, Adam step count) must equal A's
# byte for byte. Without MPIEXEC, one rank: B stops after 3 steps (its last step is always
# saved) instead of being killed. With MPIEXEC, five more layouts' states resume bitwise.
set -uo pipefail
shardsim=$1 mpiexec=${2:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -n "$mpiexec" ]; then
  launch=("$mpiexec" -np 2 --oversubscribe --allow-run-as-root "$shardsim")
  layout="dp=2,zero=1,mbs=1,gbs=4,dtype=bf16"
  interrupt=(--kill-rank-at-step 1:5)
  ranks=2 resumed_at=4
else
  launch=("$shardsim")
  layout="mbs=2,gbs=4,dtype=bf16"
  interrupt=()
  ranks=1 resumed_at=3
fi
common=(run --layout "$layout" --hardware dgx-h100 --save-every 2 --lr 0.003)
fail() { echo "FAIL: $*"; exit 1; }

"${launch[@]}" "${common[@]}" --steps 6 --save "$work/A" --out "$work/a.json" > "$work/a.log" 2>&1 ||
  { cat "$work/a.log"; fail "the uninterrupted run"; }
if [ -n "$mpiexec" ]; then
  "${launch[@]}" "${common[@]}" --steps 6 --save "$work/B" "${interrupt[@]}" > "$work/b.log" 2>&1 &&
    fail "the run with a killed rank ended well"
else
  "${launch[@]}" "${common[@]}" --steps 3 --save "$work/B" > "$work/b.log" 2>&1 ||
    { cat "$work/b.log"; fail "the first half"; }
fi
[ "$(cat "$work/B/latest")" = "step-$resumed_at" ] || fail "B/latest is '$(cat "$work/B/latest")', not step-$resumed_at"
"${launch[@]}" "${common[@]}" --steps 6 --resume "$work/B" --save "$work/C" --out "$work/c.json" > "$work/c.log" 2>&1 ||
  { cat "$work/c.log"; fail "the resumed run"; }
python3 - "$work/a.json" "$work/c.json" "$resumed_at" <<'PY' || fail "losses differ"
import json, sys
a, c, k = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
print("uninterrupted losses of steps %d-5: %s" % (k, a["losses"][k:]))
print("resumed losses:                 %s (first_step %d)" % (c["losses"], c["first_step"]))
sys.exit(0 if c["first_step"] == k and c["losses"] == a["losses"][k:] else 1)
PY
for r in $(seq 0 $((ranks - 1))); do
  cmp "$work/A/step-6/rank-$r.bin" "$work/C/step-6/rank-$r.bin" || fail "rank $r's state after 6 steps differs"
done
# Another model cannot resume it: a clear error, no work (another layout is re-sharded:
# resume_reshard_test.sh).
if "${launch[@]}" run --model tiny-moe --layout "$layout" --hardware dgx-h100 --steps 6 --resume "$work/B" > "$work/d.log" 2>&1 ||
   ! grep -q "the checkpoint cannot be resumed by this run (saved with model 'tiny', now 'tiny-moe')" "$work/d.log"; then
  cat "$work/d.log"; fail "resuming another model was not refused with its reason"
fi
echo "rank state files after 6 steps identical ($ranks ranks, $(stat -c %s "$work/A/step-6/rank-0.bin") bytes on rank 0)"
# Every other kind of state a layout keeps resumes bitwise too: PowerSGD's error feedback and
# warm-started Q (compress=8), the zero-bubble schedule, MoE experts over EP, CP, ZeRO-3 with
# offload: 6 steps, against 4 steps saved and resumed.
if [ -n "$mpiexec" ]; then
  for case in "tiny dp=2,zero=0,mbs=1,gbs=4,compress=8" "tiny pp=2,schedule=zero-bubble,mbs=1,gbs=4" \
              "tiny-moe ep=2,mbs=1,gbs=4" "tiny cp=2,mbs=1,gbs=4" "tiny dp=2,zero=3,offload=optimizer,mbs=1,gbs=4"; do
    m=${case%% *} l=${case#* }
    rm -rf "$work/E" "$work/F" "$work/G"
    for args in "--steps 6 --save $work/E" "--steps 4 --save $work/F" "--steps 6 --resume $work/F --save $work/G"; do
      # shellcheck disable=SC2086
      "${launch[@]}" run --model "$m" --layout "$l" --hardware dgx-h100 --lr 0.003 $args > "$work/e.log" 2>&1 ||
        { cat "$work/e.log"; fail "$m $l: $args"; }
    done
    for r in 0 1; do
      cmp "$work/E/step-6/rank-$r.bin" "$work/G/step-6/rank-$r.bin" || fail "$m $l: rank $r's state after 6 steps differs"
    done
    echo "ok: $m $l resumed bitwise"
  done
fi
echo PASS
