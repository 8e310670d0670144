#!/usr/bin/env bash
# Writes docs/validation/torch-reference.md: shardsim's training math against PyTorch
# (tests/torch/reference_test.sh, the TorchReference test). Needs a build (scripts/build.sh)
# and python3-torch.
set -euo pipefail
cd "$(dirname "$0")/.."
mpiexec=$(command -v mpirun || true)
table=$(mktemp)
trap 'rm -f "$table"' EXIT
bash tests/torch/reference_test.sh build/shardsim build/tests/torch_reference_dump "$table" $mpiexec
torch_version=$(/usr/bin/python3 -c "import torch; print(torch.__version__)" 2>/dev/null || python3 -c "import torch; print(torch.__version__)")
out=docs/validation/torch-reference.md
{
  echo "# shardsim's training math against PyTorch"
  echo
  echo "Written by \`scripts/torch-reference.sh\` from the \`TorchReference\` test"
  echo "(\`tests/torch/reference_test.sh\`), PyTorch $torch_version (Debian's python3-torch), CPU."
  echo "\`tests/torch/reference.py\` rebuilds each model from its shape with PyTorch's own operators"
  echo "and optimizer (\`F.linear\`, \`F.layer_norm\`, \`F.gelu\`, \`F.silu\`, autograd,"
  echo "\`torch.optim.AdamW\`, \`clip_grad_norm_\`), loads the initial parameters and the tokens"
  echo "shardsim trained on, and replays the same steps: 5 steps of 4 sequences, learning rate 0.003."
  echo "fp32 runs are compared with PyTorch in fp32, bf16 runs with PyTorch's bf16 autocast."
  echo "The bounds and their derivation are in \`reference.py\` (TOLERANCES)."
  echo
  echo "- **single-process reference**: \`runtime/cpu\`'s \`Transformer<float>\`, the run every"
  echo "  layout of \`shardsim run\` is held to by the \`mpi.Equivalence\` tests; its step-0 logits"
  echo "  and every gradient are compared too."
  echo "- **shardsim run**: the executor under the layout named, its \`--dump\` (the whole model"
  echo "  before the first step and after the last, assembled from every rank)."
  echo
  cat "$table"
} > "$out.tmp"
mv "$out.tmp" "$out"
echo "wrote $out"
