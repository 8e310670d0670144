#!/usr/bin/env bash
# Installs shardsim's build and test dependencies from Debian 12 packages.
# Idempotent and non-interactive: runs apt-get only when a package is missing.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  libyaml-cpp-dev libeigen3-dev libboost-graph-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  openmpi-bin libopenmpi-dev
  chromium  # headless, for the HTML report's render test (HtmlReportRendersInChromium)
  python3   # scripts/gpu-check.sh's table (GpuCheckDryRun) and the validation scripts
  python3-torch libopenblas0  # the PyTorch reference test (tests/torch, TorchReference)
  libopenblas-dev libopenblas-openmp-dev libdnnl-dev # the CPU runtime's fp32 and bf16 matrix products on one OpenMP team (CMakeLists.txt SHARDSIM_OPENMP, SHARDSIM_BLAS, SHARDSIM_DNNL; optional to build)
  clang libclang-rt-14-dev    # CI's bounded fuzz run (scripts/fuzz.sh: libFuzzer, ASan, UBSan) and scripts/build-clang.sh
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
