#!/usr/bin/env bash
# README command 1: install what is missing, build, and run the main job on the bundled
# default: plan GPT-3 175B on 1024 A100-80GB GPUs (hardware/dgx-a100-80gb.yaml) at global
# batch 1536, and print the winner's Megatron-LM arguments.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
./build/shardsim plan --global-batch 1536 --emit megatron
