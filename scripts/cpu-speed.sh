#!/usr/bin/env bash
# Writes docs/validation/cpu-speed.md: the CPU runtime's training step time against PyTorch's
# on the same CPU, the same architecture and sizes, the same thread count (issue 17 item 4).
# shardsim: `shardsim run` (its median step time, run.json iteration_time_s); PyTorch:
# bench/torch_step.py (Debian's python3-torch on OpenBLAS), its median over the timed steps.
# Threads: OPENBLAS_NUM_THREADS and torch.set_num_threads for PyTorch, --threads for shardsim
# (both sides' matrix products are OpenBLAS's; PyTorch's own kernels use its intra-op threads).
# Attention is unfused on both sides (PyTorch 1.13 has no fused attention on a CPU).
# Needs a build with OpenBLAS and MPI (scripts/build.sh) and python3-torch.
#   scripts/cpu-speed.sh [STEPS]   (default 5 timed steps a row; about 5 minutes on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-5}
bin=build/shardsim
py=/usr/bin/python3
mpirun=$(command -v mpirun) || { echo "cpu-speed.sh: no mpirun" >&2; exit 1; }
$py -c "import torch" 2>/dev/null || { echo "cpu-speed.sh: no PyTorch for $py" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# model  torch shape flags
declare -A shape=(
  [small-17m]="--layers 4 --hidden 512 --heads 8 --kv-heads 4 --ffn 1536 --vocab 4096 --seq 256"
  [tiny]="--layers 4 --hidden 64 --heads 4 --kv-heads 2 --ffn 256 --vocab 512 --seq 64"
)
declare -A batch=([small-17m]="4 8" [tiny]="2 8")  # mbs gbs

shardsim_step() {  # model dtype threads ranks -> median step seconds
  local model=$1 dtype=$2 threads=$3 ranks=$4 mbs gbs
  read -r mbs gbs <<<"${batch[$model]}"
  local layout="mbs=$mbs,gbs=$gbs,dtype=$dtype,attention=unfused" hw=cpu-host
  [ "$dtype" = bf16 ] && hw=dgx-h100  # a description with a bf16 rate (cpu-host has none)
  [ "$ranks" -gt 1 ] && layout="dp=$ranks,$layout"
  OPENBLAS_NUM_THREADS=$threads "$mpirun" -np "$ranks" --bind-to none --oversubscribe --allow-run-as-root "$bin" run \
    --model "$model" --hardware "$hw" --layout "$layout" --steps $((steps + 1)) --threads "$threads" \
    --out "$work/run.json" >/dev/null 2>"$work/run.err" || { cat "$work/run.err" >&2; exit 1; }
  $py -c "import json; print(json.load(open('$work/run.json'))['iteration_time_s'])"
}

torch_step() {  # model dtype threads ranks -> median step seconds
  local model=$1 dtype=$2 threads=$3 ranks=$4 mbs gbs
  read -r mbs gbs <<<"${batch[$model]}"
  local args="${shape[$model]} --mbs $mbs --gbs $gbs --steps $steps --warmup 1 --threads $threads --dtype $dtype --attention unfused"
  if [ "$ranks" -eq 1 ]; then
    OPENBLAS_NUM_THREADS=$threads $py bench/torch_step.py $args >"$work/torch.json"
  else
    local pids=() r
    for r in $(seq 0 $((ranks - 1))); do
      OPENBLAS_NUM_THREADS=$threads RANK=$r WORLD_SIZE=$ranks MASTER_ADDR=127.0.0.1 MASTER_PORT=29517 \
        $py bench/torch_step.py $args --ddp >"$work/torch-$r.json" &
      pids+=($!)
    done
    for r in "${pids[@]}"; do wait "$r"; done
    cp "$work/torch-0.json" "$work/torch.json"
  fi
  $py -c "import json; print(json.load(open('$work/torch.json'))['step_time_s'])"
}

rows=()
for spec in "small-17m fp32 1 1" "small-17m fp32 2 1" "small-17m bf16 1 1" "small-17m bf16 2 1" \
            "small-17m fp32 1 2" "tiny fp32 1 1" "tiny fp32 1 2"; do
  read -r model dtype threads ranks <<<"$spec"
  s=$(shardsim_step "$model" "$dtype" "$threads" "$ranks")
  t=$(torch_step "$model" "$dtype" "$threads" "$ranks")
  rows+=("$model $dtype $threads $ranks $s $t")
done

out=docs/validation/cpu-speed.md
tmp=$(mktemp "$out.XXXXXX")
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
cpu=$(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
torch_version=$($py -c "import torch; print(torch.__version__)")
{
  echo "# The CPU runtime's step time against PyTorch"
  echo
  echo "Written by \`scripts/cpu-speed.sh $steps\` at commit $commit on $(nproc) cores of \"$cpu\";"
  echo "PyTorch $torch_version (Debian's python3-torch, its BLAS OpenBLAS). Each row: the same model"
  echo "(\`models/<model>.yaml\`; PyTorch's written from the same sizes by \`bench/torch_step.py\`), the"
  echo "same micro- and global batch, fp32 or bf16 (shardsim: bf16 weights and activations with fp32"
  echo "arithmetic on a CPU; PyTorch: bf16 autocast), unfused attention, AdamW with clipping, the same"
  echo "threads per process (OPENBLAS_NUM_THREADS and torch.set_num_threads; \`run --threads\`), the"
  echo "median of $steps timed steps after one untimed. ranks 2: \`mpirun -np 2 shardsim run\` with"
  echo "dp=2 against two PyTorch processes under DistributedDataParallel over gloo. Ratio: shardsim's"
  echo "step time over PyTorch's (below 1: shardsim is faster). Timings on this shared VM vary by"
  echo "about 10 % between runs."
  echo
  echo "| model | dtype | threads a process | processes | shardsim step (s) | PyTorch step (s) | ratio |"
  echo "|---|---|---:|---:|---:|---:|---:|"
  for row in "${rows[@]}"; do
    read -r model dtype threads ranks s t <<<"$row"
    $py -c "print(f'| {\"$model\"} | $dtype | $threads | $ranks | {$s:.3f} | {$t:.3f} | {$s / $t:.2f} |')"
  done
} >"$tmp"
mv "$tmp" "$out"
echo "wrote $out"
