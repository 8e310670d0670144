#!/usr/bin/env bash
# Fuzzes every text shardsim reads (tests/fuzz/fuzz_inputs.cc) with libFuzzer under
# AddressSanitizer and UndefinedBehaviorSanitizer (issue 18).
#   scripts/fuzz.sh [SECONDS]        (default 60)
# Builds with clang into build-fuzz (-DSHARDSIM_FUZZ=ON: every target sanitized), seeds a
# corpus from the bundled descriptions (models, Hugging Face configs, clusters, stacks, the
# tests' bad inputs, layouts, and a plan file and the four framework configs that
# build/shardsim emits when it is built) and the regression corpus tests/data/fuzz, then
# fuzzes for SECONDS. Findings (crash-*, leak-*, timeout-*) land in build-fuzz/findings; the
# exit code is libFuzzer's (0: none). A finding, once fixed, joins tests/data/fuzz under a
# name that says what it was. CI runs `scripts/fuzz.sh 60` after the test suite (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
command -v clang++ > /dev/null || { echo "fuzz.sh: clang++ is needed (apt-get install clang)" >&2; exit 1; }
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSHARDSIM_FUZZ=ON \
  -DSHARDSIM_CUDA=OFF -DSHARDSIM_BUILD_TESTS=OFF -DSHARDSIM_BUILD_BENCH=OFF > build-fuzz.log 2>&1 ||
  { tail -30 build-fuzz.log; exit 1; }
cmake --build build-fuzz -j "$(nproc)" --target shardsim_fuzz >> build-fuzz.log 2>&1 || { tail -30 build-fuzz.log; exit 1; }

corpus=build-fuzz/corpus
findings=build-fuzz/findings
rm -rf "$corpus"
mkdir -p "$corpus" "$findings"
seed() {  # READER NAME < TEXT: one seed, the selector byte then the text (fuzz_inputs.cc's Reader)
  { printf "\\$(printf %03o "$1")"; cat; } > "$corpus/$1-$2"
}
for f in models/*.yaml tests/data/models/*.yaml tests/data/bad/model-*.yaml; do seed 0 "$(basename "$f")" < "$f"; done
for f in tests/data/hf/*.json; do seed 1 "$(basename "$f")" < "$f"; done
for f in hardware/*.yaml tests/data/bad/hardware-*.yaml; do seed 2 "$(basename "$f")" < "$f"; done
i=0
for spec in "tp=8,pp=16,dp=8,gbs=1536,mbs=1" "tp=2,pp=4,vpp=2,cp=2,ep=2,zero=3,sp=on,recompute=selective" \
            "pp=4,first_stage_layers=5,last_stage_layers=3,schedule=zero-bubble" "dtype=fp8,offload=optimizer,compress=4"; do
  printf '%s' "$spec" | seed 3 "layout$i"
  printf 'tp: 8\npp: 16\ngbs: 1536\nschedule: interleaved\nvpp: 2\n' | seed 4 "layout$i.yaml"
  i=$((i + 1))
done
for f in stacks/*.yaml; do seed 6 "$(basename "$f")" < "$f"; done
# The regression corpus: inputs that once crashed, hung or misread, already with their
# selector byte (ctest's FuzzReplay replays them in every build).
for f in tests/data/fuzz/*; do cp "$f" "$corpus/regression-$(basename "$f")"; done
for q in "80 GiB" "1.5 TB" "900 GB/s" "2 us" "1e308 TB"; do
  printf '%s' "$q" | seed 11 "q$(printf '%s' "$q" | md5sum | cut -c1-8)"
done
for p in "([0]*3+[1]*58)" "[0,1]*30+[1]" "1"; do printf '%s' "$p" | seed 12 "freq$(printf '%s' "$p" | md5sum | cut -c1-8)"; done
# Readers 15 and 16: a checkpoint manifest, and a rank's map and state file (runtime/exec/reshard.h's
# formats, written by tests/reshard_assemble.py's counterpart below) for a 64-parameter model.
printf 'format: shardsim checkpoint 1\nstep: 4\nworld: 2\nseed: 1234\nmodel: "tiny"\nlayout: "dp=2,zero=1"\ndata: "synthetic"\n' |
  seed 15 manifest.yaml
python3 - "$corpus/16-map-state" <<'PY'
import struct, sys
runs = [(0, 32, 0, 0, 0), (40, 24, 32, 32, 0)]  # elements [0, 32) and [40, 64) of 64
m = b"shardsim state map 1\n" + struct.pack("<qqq", 64, 2, len(runs)) + b"".join(struct.pack("<qqqqq", *r) for r in runs)
floats = lambda n: struct.pack("<q", 4 * n) + struct.pack("<%df" % n, *range(n))
state = struct.pack("<q", 3) + struct.pack("<q", 0) + floats(56) + floats(56) + floats(56)
open(sys.argv[1], "wb").write(bytes([16]) + struct.pack("<I", len(m)) + m + state)
PY
# Readers 13 and 14: a layout line, then a model: the cost model, and the simulator, on 64 H100.
for f in models/*.yaml tests/data/models/tiny*.yaml; do
  for spec in "tp=8,pp=2,gbs=64,mbs=1" "tp=2,pp=4,vpp=2,cp=2,zero=3,sp=on,gbs=32,mbs=2,recompute=selective" \
              "pp=4,vpp=2,dp=16,gbs=64,mbs=1,schedule=zb-v,zero=1,offload=optimizer"; do
    for reader in 13 14; do
      { printf '%s\n' "$spec"; cat "$f"; } | seed "$reader" "$(basename "$f" .yaml)-$(printf '%s' "$spec" | md5sum | cut -c1-6)"
    done
  done
done
if [ -x build/shardsim ]; then  # plan files and framework configs, as the planner writes them
  tmp=$(mktemp -d)
  build/shardsim plan --model llama3-8b --hardware dgx-h100 --gpus 8 --global-batch 64 --top 1 --out "$tmp/plan.yaml" > /dev/null
  seed 5 plan.yaml < "$tmp/plan.yaml"
  n=7
  for fmt in megatron nemo deepspeed torchtitan; do
    build/shardsim plan --model llama3-8b --hardware dgx-h100 --gpus 8 --global-batch 64 --top 1 --stack none \
      --emit "$fmt" --emit-out "$tmp/$fmt" > /dev/null 2>&1 || continue
    case $fmt in megatron) n=7 ;; nemo) n=8 ;; deepspeed) n=9 ;; torchtitan) n=10 ;; esac
    seed "$n" "$fmt" < "$tmp/$fmt"
  done
  rm -rf "$tmp"
fi
echo "fuzz.sh: $(ls "$corpus" | wc -l) seeds; fuzzing for $seconds s"
build-fuzz/shardsim_fuzz -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -max_len=65536 \
  -artifact_prefix="$findings/" -print_final_stats=1 "$corpus"
