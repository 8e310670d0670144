#!/usr/bin/env bash
# The PyTorch reference test (issue 17, item 2): shardsim's training math against PyTorch's.
#   reference_test.sh SHARDSIM DUMP_TOOL OUT_MD [MPIEXEC]
# 1. The single-process reference (tests/torch/reference_dump_main.cc) on three model styles,
#    fp32: step 0's logits and every gradient, then 5 steps' losses and parameters.
# 2. `shardsim run --dump` under several layouts, fp32 and bf16 (PyTorch's autocast), on one
#    rank and, with MPIEXEC, on two: the losses of every step and the parameters they reach.
# tests/torch/reference.py does each comparison; the table goes to OUT_MD. Exits 77 (skipped)
# where no Python has PyTorch and NumPy (scripts/install-deps.sh installs python3-torch).
set -uo pipefail
shardsim=$1 dump_tool=$2 out_md=$3 mpiexec=${4:-}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

python=""
for p in /usr/bin/python3 python3; do
  if "$p" -c "import torch, numpy" 2>/dev/null; then python=$p; break; fi
done
if [ -z "$python" ]; then
  echo "SKIPPED: no Python with PyTorch and NumPy (apt-get install python3-torch)"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rows="$work/rows.md"
: > "$rows"
status=0

compare() {  # DIR LABEL
  if ! "$python" "$here/reference.py" "$1" --label "$2" >> "$rows"; then status=1; fi
}
dump_reference() {  # MODEL NAME
  if ! "$dump_tool" "$1" "$work/$2" 4 5 1234 0.003 > /dev/null; then
    echo "FAIL: the single-process reference on $1"; status=1; return
  fi
  compare "$work/$2" "single-process reference, $2, fp32"
}
run_dump() {  # RANKS MODEL LAYOUT NAME [RUN FLAGS...]
  local cmd=("$shardsim" run --model "$2" --layout "$3" --steps 5 --seed 1234 --lr 0.003 --dump "$work/$4" "${@:5}")
  # bf16 needs a description whose devices have a bf16 rate (cpu-host has none); the hardware
  # changes nothing else the runtime does.
  case $3 in *dtype=bf16*) cmd+=(--hardware dgx-h100) ;; esac
  if [ "$1" -gt 1 ]; then
    [ -n "$mpiexec" ] || return 0
    cmd=("$mpiexec" -np "$1" --oversubscribe --allow-run-as-root "${cmd[@]}")
  fi
  if ! "${cmd[@]}" > "$work/$4.log" 2>&1; then
    echo "FAIL: ${cmd[*]}"; cat "$work/$4.log"; status=1; return
  fi
  local extra="${*:5}"
  compare "$work/$4" "shardsim run, $(basename "$2" .yaml), $1 rank(s), \`$3\`${extra:+ \`${extra//$work\//}\`}"
}

cd "$root"
dump_reference models/tiny.yaml tiny
dump_reference tests/data/models/tiny-gpt.yaml tiny-gpt
dump_reference tests/data/models/tiny-qwen.yaml tiny-qwen
run_dump 1 tiny mbs=2,gbs=4,dtype=fp32 run-tiny-fp32
# A token file of text (byte-level) and a cosine schedule with warm-up, against PyTorch's replay
# of the same rule written from Megatron-LM's get_lr.
bash "$root/scripts/make-token-file.sh" "$work/text.u16" > /dev/null
run_dump 1 tiny mbs=2,gbs=4,dtype=fp32 run-tiny-text-cosine --data "$work/text.u16" --lr-schedule cosine \
  --warmup-steps 2 --min-lr 0.0003
run_dump 1 tiny mbs=2,gbs=4,dtype=bf16 run-tiny-bf16
run_dump 1 tests/data/models/tiny-gpt.yaml mbs=1,gbs=4,dtype=bf16,attention=flash run-gpt-bf16
run_dump 1 tests/data/models/tiny-qwen.yaml mbs=4,gbs=4,dtype=fp32,recompute=full run-qwen-fp32
run_dump 2 tiny tp=2,sp=on,mbs=2,gbs=4,dtype=fp32 run-tiny-tp2
run_dump 2 tests/data/models/tiny-qwen.yaml dp=2,zero=3,mbs=1,gbs=4,dtype=bf16 run-qwen-zero3
run_dump 2 tests/data/models/tiny-qwen.yaml pp=2,schedule=1f1b,mbs=1,gbs=4,dtype=fp32 run-qwen-pp2
run_dump 2 tests/data/models/tiny-gpt.yaml tp=2,sp=on,mbs=2,gbs=4,dtype=bf16 run-gpt-tp2-bf16

{
  echo "| run | check | measured | bound | |"
  echo "|---|---|---:|---:|---|"
  cat "$rows"
} > "$work/table.md"
cat "$work/table.md"
cp "$work/table.md" "$out_md.tmp" && mv "$out_md.tmp" "$out_md"
if [ "$status" -ne 0 ]; then echo "FAIL"; exit 1; fi
echo "PASS"
