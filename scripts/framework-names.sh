#!/usr/bin/env bash
# Extracts the option and key names the exports may use from the frameworks' own sources, at
# a named commit, into tests/data/frameworks/ (tests/emit_test.cc checks every emitted name
# against these lists, and the readers of src/io/framework_config.h read only these names):
#   megatron-lm-<commit>.txt  every `add_argument('--name'` of megatron/training/arguments.py
#                             (at 000c4ac24f61, and at d98e8a64dd for the reader's newer names);
#   deepspeed-<commit>.txt    the DeepSpeed config keys as dotted paths: the top-level and
#                             bf16/fp16 keys of deepspeed/runtime/constants.py, the
#                             activation_checkpointing keys of
#                             deepspeed/runtime/activation_checkpointing/config.py, and the
#                             fields and aliases of DeepSpeedZeroConfig
#                             (deepspeed/runtime/zero/config.py) and of its offload configs
#                             (deepspeed/runtime/zero/offload_config.py);
#   nemo-<commit>.txt         the NeMo 2 recipe paths (the end of this file).
# Needs git mirrors of NVIDIA/Megatron-LM and deepspeedai/DeepSpeed (the search tool's
# `fetch`: /work/.mirror/<owner>+<name>/repo) and python3. Run by hand when a commit moves.
set -euo pipefail
cd "$(dirname "$0")/.."
megatron_git=${MEGATRON_GIT:-/work/.mirror/NVIDIA+Megatron-LM/repo}
deepspeed_git=${DEEPSPEED_GIT:-/work/.mirror/deepspeedai+DeepSpeed/repo}
megatron_commit=${MEGATRON_COMMIT:-000c4ac24f61}  # Nov 2025, the last before dataclass-built arguments
# A later commit whose add_argument names the reader also takes (arguments its dataclasses build
# are not listed): the CUDA graph spellings of 2026 (--cuda-graph-modules).
megatron_new_commit=${MEGATRON_NEW_COMMIT:-d98e8a64dd}
deepspeed_commit=${DEEPSPEED_COMMIT:-edaa72212}
out=tests/data/frameworks
mkdir -p "$out"

show() { git --git-dir="$1" show "$2:$3"; }

# megatron_names COMMIT NOTE: the add_argument names of arguments.py at COMMIT, whole or not at all.
megatron_names() {
  local file="$out/megatron-lm-$1.txt"
  {
    echo "# add_argument names of megatron/training/arguments.py at NVIDIA/Megatron-LM $1"
    echo "# (scripts/framework-names.sh$2)"
    show "$megatron_git" "$1" megatron/training/arguments.py |
      grep -o "add_argument('--[A-Za-z0-9-]*'" | sed "s/add_argument('//; s/'//" | sort -u
  } > "$file.tmp"
  mv "$file.tmp" "$file"
}
megatron_names "$megatron_commit" ""
megatron_names "$megatron_new_commit" "; the arguments its dataclasses build are not listed"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
show "$deepspeed_git" "$deepspeed_commit" deepspeed/runtime/constants.py > "$tmp/constants.py"
show "$deepspeed_git" "$deepspeed_commit" deepspeed/runtime/activation_checkpointing/config.py > "$tmp/act.py"
show "$deepspeed_git" "$deepspeed_commit" deepspeed/runtime/zero/config.py > "$tmp/zero.py"
show "$deepspeed_git" "$deepspeed_commit" deepspeed/runtime/zero/offload_config.py > "$tmp/offload.py"
python3 - "$tmp" "$deepspeed_commit" > "$out/deepspeed-$deepspeed_commit.txt.tmp" <<'EOF'
import re, sys
d, commit = sys.argv[1], sys.argv[2]
def read(f): return open(f"{d}/{f}").read()
keys = set()
const = dict(re.findall(r'^([A-Z][A-Z0-9_]*) = ["\']([a-z0-9_]+)["\']', read("constants.py"), re.M))
# Top-level keys the emitters use, found by their constant names.
for name in ["TRAIN_BATCH_SIZE", "TRAIN_MICRO_BATCH_SIZE_PER_GPU", "GRADIENT_ACCUMULATION_STEPS",
             "GRADIENT_CLIPPING", "ZERO_OPTIMIZATION"]:
    if name in const: keys.add(const[name])
for section, enabled in [("BFLOAT16", "BFLOAT16_ENABLED"), ("FP16", "FP16_ENABLED")]:
    keys.add(const[section]); keys.add(const[section] + "." + const[enabled])
act = dict(re.findall(r"^(ACT_CHKPT[A-Z_]*) = '([a-z_]+)'", read("act.py"), re.M))
top = act.pop("ACT_CHKPT")
keys.add(top)
for v in act.values(): keys.add(top + "." + v)
def fields(text, cls):
    body = text.split(f"class {cls}(", 1)[1]
    body = re.split(r"\n(?:class |@|    def |    @)", body, 1)[0]
    names = re.findall(r"^    ([a-z_0-9]+): ", body, re.M)
    names += re.findall(r'alias="([a-z_0-9]+)"', body)
    return names
zero = "zero_optimization"
keys.add(zero)
for f in fields(read("zero.py"), "DeepSpeedZeroConfig"): keys.add(zero + "." + f)
for sub, cls in [("offload_param", "DeepSpeedZeroOffloadParamConfig"),
                 ("offload_optimizer", "DeepSpeedZeroOffloadOptimizerConfig")]:
    for f in fields(read("offload.py"), cls): keys.add(f"{zero}.{sub}.{f}")
print(f"# DeepSpeed config keys (dotted paths) at deepspeedai/DeepSpeed {commit}")
print("# (scripts/framework-names.sh)")
for k in sorted(keys): print(k)
EOF
mv "$out/deepspeed-$deepspeed_commit.txt.tmp" "$out/deepspeed-$deepspeed_commit.txt"
wc -l "$out"/*.txt

# NeMo 2 recipe paths (scripts/framework-names/nemo_paths.py): MegatronStrategy.__init__'s
# arguments (trainer.strategy.*), the fields of Megatron-Core's TransformerConfig and NeMo's
# GPTConfig (model.config.*), DistributedDataParallelConfig's (trainer.strategy.ddp.*),
# OptimizerConfig's (optim.config.*), MegatronMixedPrecision's (trainer.plugins.*),
# MegatronCommOverlapCallback.__init__'s (callback.*) and MockDataModule.__init__'s (data.*).
nemo_git=${NEMO_GIT:-/work/.mirror/NVIDIA+NeMo/repo}
nemo_commit=${NEMO_COMMIT:-8cfedd7203}
show "$nemo_git" "$nemo_commit" nemo/lightning/pytorch/strategies/megatron_strategy.py > "$tmp/strategy.py"
show "$nemo_git" "$nemo_commit" nemo/collections/llm/gpt/model/base.py > "$tmp/gpt.py"
show "$nemo_git" "$nemo_commit" nemo/lightning/pytorch/plugins/mixed_precision.py > "$tmp/precision.py"
show "$nemo_git" "$nemo_commit" nemo/lightning/pytorch/callbacks/megatron_comm_overlap.py > "$tmp/overlap.py"
show "$nemo_git" "$nemo_commit" nemo/collections/llm/gpt/data/mock.py > "$tmp/mock.py"
show "$megatron_git" d98e8a64dd megatron/core/transformer/transformer_config.py > "$tmp/transformer.py"
show "$megatron_git" d98e8a64dd megatron/core/distributed/distributed_data_parallel_config.py > "$tmp/ddp.py"
show "$megatron_git" d98e8a64dd megatron/core/optimizer/optimizer_config.py > "$tmp/optim.py"
python3 scripts/framework-names/nemo_paths.py "$tmp" "$nemo_commit" > "$out/nemo-$nemo_commit.txt.tmp"
mv "$out/nemo-$nemo_commit.txt.tmp" "$out/nemo-$nemo_commit.txt"
wc -l "$out/nemo-$nemo_commit.txt"

# torchtitan TOML job-config names (scripts/framework-names/torchtitan_names.py): JobConfig's
# fields as section.key, the registered model converters, the llama3 flavors and the fields of
# llama3's TransformerModelArgs, at torchtitan v0.2.2 (73a0e6979, Feb 2026): the last release
# whose job config is a TOML file (later commits build it from Python functions).
torchtitan_git=${TORCHTITAN_GIT:-/work/.mirror/pytorch+torchtitan/repo}
torchtitan_commit=${TORCHTITAN_COMMIT:-73a0e6979}
show "$torchtitan_git" "$torchtitan_commit" torchtitan/config/job_config.py > "$tmp/job_config.py"
show "$torchtitan_git" "$torchtitan_commit" torchtitan/components/quantization/float8.py > "$tmp/float8.py"
show "$torchtitan_git" "$torchtitan_commit" torchtitan/components/quantization/mx.py > "$tmp/mx.py"
show "$torchtitan_git" "$torchtitan_commit" torchtitan/models/llama3/__init__.py > "$tmp/llama3_init.py"
show "$torchtitan_git" "$torchtitan_commit" torchtitan/models/llama3/model/args.py > "$tmp/llama3_args.py"
python3 scripts/framework-names/torchtitan_names.py "$tmp" "$torchtitan_commit" > "$out/torchtitan-$torchtitan_commit.txt.tmp"
mv "$out/torchtitan-$torchtitan_commit.txt.tmp" "$out/torchtitan-$torchtitan_commit.txt"
wc -l "$out/torchtitan-$torchtitan_commit.txt"
