#!/usr/bin/env bash
# Issue 16's acceptance for `shardsim memory`: its answer for Llama 3.1 8B (the Hugging Face
# config), Mixtral 8x22B and DeepSeek-V3 on dgx-h100, with DeepSpeed's and Accelerate's figures
# it prints beside its own. Writes docs/validation/memory.md (whole or not at all).
#
#   bash scripts/memory-acceptance.sh      # needs ./build/shardsim (bash scripts/build.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${SHARDSIM_BIN:-./build/shardsim}"
[[ -x "$bin" ]] || { echo "memory-acceptance: $bin not built (bash scripts/build.sh)" >&2; exit 2; }
out=docs/validation/memory.md
tmp="$out.tmp"
{
  echo "# \`shardsim memory\` on dgx-h100"
  echo
  echo "Written by \`scripts/memory-acceptance.sh\`. Each block is the command's text answer; the"
  echo "\"DeepSpeed's estimate\" column is \`estimate_zero2/3_model_states_mem_needs_all_live\`'s"
  echo "formula for the same GPU count and offload, and the model-size table carries Accelerate's"
  echo "\"Training using Adam\" figure (tests/memory_command_test.cc derives both by hand for Llama 3"
  echo "8B; the notes under each table say where the tools' assumptions differ from shardsim's)."
  for model in tests/data/hf/llama-3.1-8b.json tests/data/models/mixtral-8x22b.yaml deepseek-v3; do
    echo
    echo "## $model"
    echo
    echo '```'
    echo "\$ shardsim memory --model $model --hardware dgx-h100"
    "$bin" memory --model "$model" --hardware dgx-h100
    echo '```'
  done
} > "$tmp"
mv "$tmp" "$out"
echo "memory-acceptance: wrote $out"
