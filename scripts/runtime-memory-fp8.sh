#!/usr/bin/env bash
# The runtime's measured peak memory against the simulator's for fp8 layouts on the tiny model
# (and tiny-moe), CPU backend: writes docs/validation/runtime-memory-fp8.md (whole or not at all).
#
#   bash scripts/runtime-memory-fp8.sh   # needs build/tests/mpi_memory_vs_model_test (bash scripts/build.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/tests/mpi_memory_vs_model_test
[[ -x "$bin" ]] || { echo "runtime-memory-fp8: $bin not built (bash scripts/build.sh)" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
one=("mbs=2,dtype=fp8" "mbs=2,dtype=fp8,attention=flash" "mbs=2,dtype=fp8,recompute=selective"
     "mbs=2,dtype=fp8,recompute=full" "emulate:tp=2,pp=2,dp=2,mbs=2,dtype=fp8"
     "emulate:pp=2,dp=2,vpp=2,mbs=1,schedule=zb-v,zero=3,dtype=fp8")
two=("tp=2,mbs=2,dtype=fp8" "tp=2,sp=on,mbs=2,dtype=fp8" "tp=2,sp=on,mbs=2,dtype=fp8,attention=flash"
     "tp=2,sp=on,overlap_tp=on,mbs=2,dtype=fp8" "pp=2,mbs=2,dtype=fp8" "pp=2,mbs=2,schedule=zero-bubble,dtype=fp8"
     "dp=2,zero=3,mbs=2,dtype=fp8" "cp=2,mbs=2,dtype=fp8")
moe=("mbs=2,dtype=fp8" "mbs=1,dtype=fp8,recompute=full")
rows() { grep '^| ' || true; }
out=docs/validation/runtime-memory-fp8.md
tmp="$out.tmp"
{
  echo "# Runtime memory vs simulator: dtype=fp8 (CPU backend)"
  echo
  echo "Written by \`scripts/runtime-memory-fp8.sh\`. Each rank's measured peak (the runtime's own"
  echo "allocation tracking) against the simulator's peak for its pipeline stage, on the tiny model"
  echo "(and tiny-moe, last rows), 2 training steps per layout. Under fp8 the runtime keeps, as"
  echo "Transformer Engine does, each TE module's fp8 weight codes and their transpose from its first"
  echo "use on (2 bytes per GEMM parameter, \`Fp8CachedWeightBytes\`) and its input's fp8 codes for the"
  echo "weight gradient (1 byte an element); flash attention's output stays bf16 beside linear_proj's"
  echo "fp8 copy. \"emulated\" rows are one rank of a larger layout run alone. MoE layers keep their"
  echo "experts' inputs and activations in bf16 (runtime/README.md), hence tiny-moe's larger gap."
  echo "The figures are byte counts, not timings: they repeat exactly."
  echo
  echo "| ranks | layout | rank | stage | measured peak | predicted | error |"
  echo "|---|---|---:|---:|---:|---:|---:|"
  mpirun -np 1 --oversubscribe "$bin" "${one[@]}" | rows
  mpirun -np 2 --oversubscribe "$bin" "${two[@]}" | rows
  mpirun -np 1 --oversubscribe "$bin" --model tiny-moe "${moe[@]}" | sed 's/| `/| tiny-moe `/' | rows
} > "$tmp"
mv "$tmp" "$out"
echo "wrote $out"
