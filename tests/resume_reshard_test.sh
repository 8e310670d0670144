#!/usr/bin/env bash
# Resume under another layout (issue 17 item 3's stretch goal; runtime/exec/reshard.h).
#   resume_reshard_test.sh SHARDSIM [MPIEXEC]
# With MPIEXEC (2 ranks), on `tiny` in fp32, S = dp=2,zero=1: A runs 6 steps, B 3 steps (saved).
# 1. Re-sharded into a layout that sums in S's order (dp=2,zero=0: the same two-operand sums;
#    offload: the same AdamW on the host), the resumed steps and final weights equal A's bitwise.
# 2. Into layouts that sum in another order (tp=2 with SP, interleaved pp=2 x vpp=2, one rank),
#    A's losses within 1e-5 relative and its final weights within 1e-5 relative L2: the
#    equivalence bound of tests/mpi/exec_equivalence_main.cc (~100 fp32 ulps, far below what a
#    misplaced tensor moves: O(1)).
# 3. Round trips: B re-sharded into R with no steps (--steps 3), then back into S, gives B's
#    state files byte for byte (master weights and moments copied, working weights cast from
#    them): for R over tp, pp, cp, ZeRO-3, bf16; and MoE (tiny-moe, ep=2 <-> dp=2) and a tied
#    table on two stages (tiny-gpt, pp=2 <-> tp=2).
# 4. Refused with the reason: another gbs; a rank's map missing (one error line, not one per
#    rank); converting into --resume's folder.
# Without MPIEXEC: one rank, mbs=2 <-> mbs=1 (tolerance) and a bf16 round trip.
# The checkpoints are read by tests/reshard_assemble.py, a second reader of the map format.
set -uo pipefail
shardsim=$1 mpiexec=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
if [ -n "$mpiexec" ]; then
  launch=("$mpiexec" -np 2 --oversubscribe --allow-run-as-root "$shardsim")
  S="dp=2,zero=1,mbs=1,gbs=4,dtype=fp32"
  bitwise=("dp=2,zero=0,mbs=1,gbs=4,dtype=fp32" "dp=2,zero=1,offload=optimizer,mbs=1,gbs=4,dtype=fp32")
  close=("tp=2,sp=on,mbs=1,gbs=4,dtype=fp32" "pp=2,vpp=2,schedule=interleaved,mbs=1,gbs=4,dtype=fp32")
  trips=("tiny tp=2,mbs=1,gbs=4" "tiny pp=2,mbs=1,gbs=4,dtype=bf16" "tiny cp=2,mbs=1,gbs=4"
         "tiny dp=2,zero=3,mbs=1,gbs=4,dtype=bf16")
else
  launch=("$shardsim")
  S="mbs=2,gbs=4,dtype=fp32"
  bitwise=()
  close=("mbs=1,gbs=4,dtype=fp32")
  trips=("tiny mbs=1,gbs=4,dtype=bf16")
fi
run() { "${launch[@]}" run --hardware dgx-h100 --lr 0.003 "$@"; }
single() { "$shardsim" run --hardware dgx-h100 --lr 0.003 "$@"; }
compare() {  # compare A_DIR C_DIR A_JSON C_JSON FROM bitwise|close
  python3 "$here/reshard_assemble.py" compare "$@"
}

run --layout "$S" --steps 6 --save "$work/A" --out "$work/a.json" > "$work/a.log" 2>&1 || { cat "$work/a.log"; fail "A"; }
run --layout "$S" --steps 3 --save "$work/B" > "$work/b.log" 2>&1 || { cat "$work/b.log"; fail "B"; }
i=0
for kind in bitwise close; do
  eval "layouts=(\"\${${kind}[@]}\")"
  for R in "${layouts[@]}"; do
    i=$((i + 1))
    run --layout "$R" --steps 6 --resume "$work/B" --save "$work/C$i" --out "$work/c$i.json" > "$work/c$i.log" 2>&1 ||
      { cat "$work/c$i.log"; fail "resuming under $R"; }
    grep -q "re-sharded to this layout" "$work/c$i.log" || { cat "$work/c$i.log"; fail "$R: no re-sharding notice"; }
    compare "$work/A/step-6" "$work/C$i/step-6" "$work/a.json" "$work/c$i.json" 3 "$kind" ||
      fail "resumed under $R: not $kind to the uninterrupted run"
    echo "ok: S -> $R ($kind)"
  done
done
if [ -n "$mpiexec" ]; then  # and from two ranks into one
  i=$((i + 1))
  single --layout "mbs=2,gbs=4,dtype=fp32" --steps 6 --resume "$work/B" --save "$work/C$i" --out "$work/c$i.json" \
    > "$work/c$i.log" 2>&1 || { cat "$work/c$i.log"; fail "resuming on one rank"; }
  compare "$work/A/step-6" "$work/C$i/step-6" "$work/a.json" "$work/c$i.json" 3 close || fail "2 ranks -> 1 rank"
  echo "ok: S (2 ranks) -> mbs=2 (1 rank) (close)"
fi

roundtrip() {  # roundtrip MODEL SAVED_LAYOUT OTHER_LAYOUT
  local m=$1 s=$2 r=$3 d="$work/trip"
  rm -rf "$d"
  run --model "$m" --layout "$s" --steps 2 --save "$d/B" > "$d.log" 2>&1 || { cat "$d.log"; fail "$m $s"; }
  run --model "$m" --layout "$r" --steps 2 --resume "$d/B" --save "$d/C" > "$d.log" 2>&1 ||
    { cat "$d.log"; fail "re-sharding $m $s into $r"; }
  grep -q "re-sharded checkpoint written" "$d.log" || { cat "$d.log"; fail "no conversion notice"; }
  run --model "$m" --layout "$s" --steps 2 --resume "$d/C" --save "$d/D" > "$d.log" 2>&1 ||
    { cat "$d.log"; fail "re-sharding $m $r back into $s"; }
  for f in "$d"/B/step-2/rank-*.bin; do
    cmp "$f" "$d/D/step-2/$(basename "$f")" || fail "$m: $s -> $r -> $s changed $(basename "$f")"
  done
  python3 "$here/reshard_assemble.py" same "$d/B/step-2" "$d/C/step-2" || fail "$m: $s and $r hold other states"
  echo "ok: $m $s -> $r -> back, bitwise"
}
if [ -n "$mpiexec" ]; then
  for t in "${trips[@]}"; do roundtrip ${t%% *} "dp=2,zero=1,mbs=1,gbs=4" "${t#* }"; done
  roundtrip tiny-moe "ep=2,mbs=1,gbs=4" "dp=2,zero=1,mbs=1,gbs=4,dtype=fp32"
  roundtrip tests/data/models/tiny-gpt.yaml "pp=2,mbs=1,gbs=4" "tp=2,mbs=1,gbs=4"
else
  for t in "${trips[@]}"; do roundtrip ${t%% *} "mbs=2,gbs=4" "${t#* }"; done
fi

# Refusals, each with its reason and before any step.
other=${S/gbs=4/gbs=8}
run --layout "$other" --steps 6 --resume "$work/B" > "$work/e.log" 2>&1 &&
  fail "a resume with another gbs ran"
grep -q "saved with gbs=4, this run's is 8" "$work/e.log" || { cat "$work/e.log"; fail "no gbs reason"; }
run --layout "${close[0]}" --steps 3 --resume "$work/B" --save "$work/B" > "$work/e.log" 2>&1 &&
  fail "re-sharding into the folder it reads ran"
grep -q "writes it to another folder than --resume's" "$work/e.log" || { cat "$work/e.log"; fail "no folder reason"; }
rm "$work/B/step-3/rank-0.map"
run --layout "${close[0]}" --steps 6 --resume "$work/B" > "$work/e.log" 2>&1 && fail "a checkpoint without its map was re-sharded"
grep -q "rank-0.map" "$work/e.log" || { cat "$work/e.log"; fail "the missing map is not named"; }
# Every rank reads every map, and fails alike: one prints.
[ "$(grep -c "shardsim run: error" "$work/e.log")" = 1 ] || { cat "$work/e.log"; fail "not one error line"; }
echo PASS
