#!/usr/bin/env bash
# The GPU check (issue 6), one script for one call on a machine with an NVIDIA GPU:
#   1. the CUDA kernel tests (each kernel against the CPU backend);
#   2. `shardsim calibrate --backend cuda` on Llama 3.2 1B's shapes, bf16 kernels
#      (h200-calibrated.yaml);
#   2b. the host's cost per eager PyTorch op and per CUDA graph replay (scripts/host-launch.py,
#      host-launch.md: the descriptions' host.launch_overhead);
#   3. the tiny model trained on the GPU and on the CPU, in fp32 and in bf16 mixed precision,
#      and tiny-moe in fp8 (the MoE and fp8 kernels checked so far only in the emulator),
#      losses compared step by step; rank 0 of cp=2 alone (the attention's query offset);
#   4. plans trained for a few steps and simulated, one table: plan, predicted vs measured step
#      (or, for an emulated rank, compute) time, TFLOP/s, MFU, peak memory, error %:
#        tiny on 1 GPU (fp32, bf16); Llama 3.2 1B on 1 GPU (fp32; bf16 with 2048- and 1024-token
#        sequences: the issue's 40 % MFU check, the 1024-token one again on cuBLAS instead of
#        cuBLASLt, SHARDSIM_CUBLASLT=0; bf16 with attention=flash);
#        rank 0 of an 8-GPU plan of Llama 3.2 1B and of a 1024-GPU plan of Llama 3 70B (bf16),
#        each run alone with --emulate-rank (its shards, schedule and memory; collectives as
#        copies).
# Everything goes under $OUT if set, else ./gpu-results/. Meant to finish within 8 minutes.
#
# Binaries: gpu-carry/ (scripts/package-gpu.sh, run on a CPU machine with the same CUDA: the
# GPU machine has CUDA but no yaml-cpp, Eigen, Boost or MPI), else build/ (a CUDA build made
# where the dependencies exist). With the device tool: package here, then
#   run(command="bash scripts/gpu-check.sh", carry=["gpu-carry"], timeout_s=600)
# and commit $OUT's table under docs/validation/.
#
# BACKEND=cpu runs the same steps on the CPU backend with tiny plans only: a dry run of this
# script's logic where there is no GPU (ctest's GpuCheckDryRun, a few seconds).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-results}
mkdir -p "$out"
backend=${BACKEND:-cuda}
log="$out/gpu-check.log"
: > "$log"
: > "$out/plans.txt"
say() { echo "$*" | tee -a "$log"; }

# --- binaries and libraries ---------------------------------------------------------------------
# SHARDSIM_BIN (a shardsim binary) overrides both.
if [[ -z ${SHARDSIM_BIN:-} && -x gpu-carry/bin/shardsim ]]; then
  bin=gpu-carry/bin/shardsim
  tests=gpu-carry/bin/shardsim_cuda_tests
  libs="$PWD/gpu-carry/lib"
else
  bin=${SHARDSIM_BIN:-build/shardsim}
  tests=$(dirname "$bin")/tests/cuda/shardsim_cuda_tests
  libs=""
fi
# cuBLAS and cudart: the toolkit's, else PyTorch's nvidia wheels.
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib; do [[ -d $d ]] && libs="$libs:$d"; done
py_nvidia=$(python3 -c 'import nvidia, os; print(os.path.dirname(nvidia.__path__[0]))' 2>/dev/null || true)
if [[ -n $py_nvidia ]]; then
  for d in "$py_nvidia"/nvidia/*/lib "$py_nvidia"/nvidia/cu*/lib; do [[ -d $d ]] && libs="$libs:$d"; done
fi
export LD_LIBRARY_PATH="${libs#:}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export SHARDSIM_DATA_DIR="$PWD"  # models/ and hardware/ of this tree, not the build machine's path
say "shardsim: $bin; backend $backend; LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
if ! "$bin" --help > /dev/null 2>>"$log"; then
  say "cannot start $bin:"; ldd "$bin" | grep "not found" | tee -a "$log"; exit 1
fi
command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee -a "$log"

# --- 1. kernel tests -----------------------------------------------------------------------------
if [[ $backend == cuda ]]; then
  say "== CUDA kernel tests"
  "$tests" 2>&1 | tee "$out/cuda-tests.log" | tail -3 | tee -a "$log"
fi

# --- 2. calibrate the GPU on the 1B model's shapes: predictions with nominal and fitted figures --
calibrated=""
if [[ $backend == cuda ]]; then
  say "== calibrate (cuda, bf16, Llama 3.2 1B shapes)"
  if timeout 120 "$bin" calibrate --backend cuda --hardware h200 --name h200-calibrated --model llama3.2-1b \
      --seq-len 2048 --layout mbs=1,dtype=bf16,attention=unfused --out "$out/h200-calibrated.yaml" >> "$log" 2>&1; then
    calibrated="$out/h200-calibrated.yaml"
    sed -n 1,8p "$calibrated" | tee -a "$log"
  else
    say "   calibrate failed"
  fi
fi

# --- 2b. the host's cost per eager PyTorch op (hardware descriptions' host.launch_overhead) ---
launch_dev=cpu
[[ $backend == cuda ]] && launch_dev=cuda
say "== host cost per eager PyTorch op ($launch_dev; scripts/host-launch.py)"
torch_py=""
for py in python3 /usr/bin/python3; do
  if command -v "$py" > /dev/null && "$py" -c 'import torch' 2> /dev/null; then torch_py=$py; break; fi
done
if [[ -z $torch_py ]]; then
  say "   skipped: no python3 here has PyTorch"
elif ! timeout 120 "$torch_py" scripts/host-launch.py --device "$launch_dev" \
    --reps "$([[ $launch_dev == cuda ]] && echo 2000 || echo 100)" --out "$out/host-launch.md" >> "$log" 2>&1; then
  say "   host-launch failed"
fi

# --- 3. runs and simulations ---------------------------------------------------------------------
# name | model | hardware for the prediction | gpus | emulated rank (- for none) | layout | steps |
# extra flags | environment of the run (VAR=value ..., optional)
if [[ $backend == cuda ]]; then
  plans=(
    "tiny-1gpu|tiny|h200|1|-|mbs=8,gbs=32,dtype=fp32,attention=unfused|20|"
    "tiny-1gpu-bf16|tiny|h200|1|-|mbs=8,gbs=32,dtype=bf16,attention=unfused|20|"
    "tiny-moe-1gpu-fp8|tiny-moe|h200|1|-|mbs=8,gbs=32,dtype=fp8,attention=unfused|20|"
    "tiny-cp2-rank0|tiny|dgx-h200|2|0|cp=2,mbs=8,gbs=32,dtype=bf16,attention=flash|5|"
    "llama1b-1gpu|llama3.2-1b|h200|1|-|mbs=1,gbs=4,dtype=fp32,attention=unfused|3|--seq-len 2048"
    "llama1b-1gpu-bf16|llama3.2-1b|h200|1|-|mbs=1,gbs=8,dtype=bf16,attention=unfused|4|--seq-len 2048"
    "llama1b-1gpu-bf16-s1024|llama3.2-1b|h200|1|-|mbs=4,gbs=16,dtype=bf16,attention=unfused|3|--seq-len 1024"
    "llama1b-1gpu-bf16-s1024-cublas|llama3.2-1b|h200|1|-|mbs=4,gbs=16,dtype=bf16,attention=unfused|3|--seq-len 1024|SHARDSIM_CUBLASLT=0"
    "llama1b-1gpu-bf16-flash|llama3.2-1b|h200|1|-|mbs=1,gbs=4,dtype=bf16,attention=flash|3|--seq-len 2048"
    "llama1b-8gpu-rank0|llama3.2-1b|dgx-h200|8|0|tp=4,dp=2,sp=on,mbs=1,gbs=8,dtype=bf16,attention=unfused|3|--seq-len 2048"
    "llama70b-1024gpu-rank0|llama3-70b|dgx-h200|1024|0|tp=8,pp=8,dp=16,mbs=1,gbs=128,dtype=bf16,attention=unfused|2|--seq-len 2048 --nodes 128"
  )
else
  plans=(
    "tiny-1rank|tiny|cpu-host|1|-|mbs=2,gbs=8,dtype=fp32,attention=unfused|5|"
    "tiny-1rank-bf16|tiny|h200|1|-|mbs=2,gbs=8,dtype=bf16,attention=unfused|5|"
    "tiny-1rank-flash|tiny|cpu-host|1|-|mbs=2,gbs=8,dtype=fp32,attention=flash|5|"
    "tiny-8rank-rank5|tiny|dgx-h200|8|5|tp=2,pp=2,dp=2,mbs=1,gbs=8,dtype=bf16,attention=unfused|3|"
  )
fi
for row in "${plans[@]}"; do
  IFS='|' read -r name model hw gpus rank layout steps extra envs <<< "$row"
  say "== $name: $model, $layout on $gpus GPUs$( [[ $rank != - ]] && echo ", rank $rank emulated")"
  emulate=()
  [[ $rank != - ]] && emulate=(--emulate-rank "$rank")
  # shellcheck disable=SC2086
  timeout 240 env $envs "$bin" run --backend "$backend" --model "$model" --hardware "$hw" --gpus "$gpus" \
    --layout "$layout" --steps "$steps" "${emulate[@]}" $extra \
    --out "$out/$name.run.json" >> "$log" 2>&1 || say "   run failed (exit $?)"
  # shellcheck disable=SC2086
  "$bin" simulate --model "$model" --hardware "$hw" --gpus "$gpus" --layout "$layout" \
    $extra --json > "$out/$name.sim.json" 2>> "$log" || say "   simulate failed"
  if [[ -n $calibrated && $hw == h200 && $layout == *bf16* ]]; then  # bf16 single-GPU plans, fitted figures
    # shellcheck disable=SC2086
    "$bin" simulate --model "$model" --hardware "$calibrated" --gpus "$gpus" --layout "$layout" \
      $extra --json > "$out/$name.calsim.json" 2>> "$log" || say "   calibrated simulate failed"
  fi
  echo "$name|$rank" >> "$out/plans.txt"
done
if [[ $backend == cuda ]]; then
  for dtype in fp32 bf16; do
    say "== tiny on the CPU backend ($dtype), for the loss comparison"
    timeout 240 env $envs "$bin" run --backend cpu --model tiny --hardware h200 --gpus 1 \
      --layout "mbs=8,gbs=32,dtype=$dtype,attention=unfused" --steps 20 --out "$out/tiny-cpu-$dtype.run.json" >> "$log" 2>&1 ||
      say "   run failed"
  done
  say "== tiny-moe on the CPU backend (fp8), for the loss comparison"
  timeout 240 "$bin" run --backend cpu --model tiny-moe --hardware h200 --gpus 1 \
    --layout "mbs=8,gbs=32,dtype=fp8,attention=unfused" --steps 20 --out "$out/tiny-moe-cpu-fp8.run.json" >> "$log" 2>&1 ||
    say "   run failed"
fi

# --- the table -----------------------------------------------------------------------------------
python3 - "$out" "$backend" <<'PY' | tee "$out/gpu-check.md"
import json, os, sys
out, backend = sys.argv[1], sys.argv[2]
def load(path):
    try:
        return json.load(open(path))
    except Exception:
        return None
print(f"# GPU check ({backend} backend)\n")
print("| plan | measured | predicted | error | TFLOP/s | MFU | peak memory | predicted | error |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
seen = set()
for line in open(os.path.join(out, "plans.txt")):
    name, rank = line.strip().split("|")
    if name in seen:
        continue
    seen.add(name)
    r, s = load(f"{out}/{name}.run.json"), load(f"{out}/{name}.sim.json")
    if r is None or s is None:
        print(f"| {name} | failed | | | | | | | |")
        continue
    emulated = rank != "-"
    me = r["ranks"][0]
    stage = me["stage"]
    sim_rank = next((x for x in s["ranks"] if x["stage"] == stage), s["ranks"][0])
    if emulated:  # an emulated rank's step has no real communication or bubble: compare compute
        keys = ("compute", "recompute", "optimizer")
        t_meas = sum(me["time_breakdown"][k] for k in keys)
        t_pred = sum(sim_rank["time_breakdown"][k] for k in keys)
        what = "compute"
    else:
        t_meas, t_pred, what = r["iteration_time_s"], s["iteration_time_s"], "step"
    tflops = s["model_tflops_per_gpu"] * s["iteration_time_s"] / r["iteration_time_s"]
    mfu = s["mfu"] * s["iteration_time_s"] / r["iteration_time_s"]
    m_meas, m_pred = me["peak_memory_bytes"], sim_rank["peak_memory_bytes"]
    print(f"| {name} ({what}) | {t_meas * 1e3:.1f} ms | {t_pred * 1e3:.1f} ms | "
          f"{100 * (t_pred - t_meas) / t_meas:+.0f} % | {tflops:.1f} | {100 * mfu:.1f} % | "
          f"{m_meas / 2**30:.2f} GiB | {m_pred / 2**30:.2f} GiB | {100 * (m_pred - m_meas) / m_meas:+.1f} % |")
for name in sorted(seen):
    r, s = load(f"{out}/{name}.run.json"), load(f"{out}/{name}.calsim.json")
    if r and s:
        t_meas, t_pred = r["iteration_time_s"], s["iteration_time_s"]
        print(f"\n{name} with the calibrated H200 ({out}/h200-calibrated.yaml): predicted "
              f"{t_pred * 1e3:.1f} ms vs measured {t_meas * 1e3:.1f} ms ({100 * (t_pred - t_meas) / t_meas:+.0f} %)")
# The issue's 40 % MFU for the 1B model's GEMM-heavy step: 2048-token sequences, and 1024-token
# ones in micro-batches of 4 (the unfused attention's T^2 traffic is then a smaller share).
for name in ("llama1b-1gpu-bf16", "llama1b-1gpu-bf16-s1024", "llama1b-1gpu-bf16-s1024-cublas"):
    r, s = load(f"{out}/{name}.run.json"), load(f"{out}/{name}.sim.json")
    if r and s:
        mfu = s["mfu"] * s["iteration_time_s"] / r["iteration_time_s"]
        print(f"\n{name}: measured MFU {100 * mfu:.1f} % of the bf16 peak "
              f"({'meets' if mfu >= 0.40 else 'BELOW'} the issue's 40 %).")
# cuBLASLt against cuBLAS on the same step (SHARDSIM_CUBLASLT=0, cuda_gemm.h).
lt, plain = load(f"{out}/llama1b-1gpu-bf16-s1024.run.json"), load(f"{out}/llama1b-1gpu-bf16-s1024-cublas.run.json")
if lt and plain:
    print(f"\nGEMMs through cuBLASLt vs cuBLAS, llama1b bf16 s1024: {lt['iteration_time_s'] * 1e3:.1f} ms vs "
          f"{plain['iteration_time_s'] * 1e3:.1f} ms per step (ratio {lt['iteration_time_s'] / plain['iteration_time_s']:.3f}).")
# The issue's criteria: fp32 kernels and losses as the CPU's to ~1e-4, bf16 to 1e-2.
for dtype, run, cpu_run, bound in (("fp32", "tiny-1gpu", "tiny-cpu-fp32", 1e-4),
                                   ("bf16", "tiny-1gpu-bf16", "tiny-cpu-bf16", 1e-2),
                                   ("fp8", "tiny-moe-1gpu-fp8", "tiny-moe-cpu-fp8", 1e-2)):
    gpu, cpu = load(f"{out}/{run}.run.json"), load(f"{out}/{cpu_run}.run.json")
    if gpu and cpu:
        worst = max(abs(a - b) / abs(b) for a, b in zip(gpu["losses"], cpu["losses"]))
        print(f"\n{run}, GPU vs CPU backend, {dtype} on both, {len(cpu['losses'])} steps: worst "
              f"relative loss difference {worst:.1e} ({'within' if worst <= bound else 'ABOVE'} {bound:.0e}).")
PY
say "wrote $out/gpu-check.md"
