#!/usr/bin/env bash
# Packs shardsim for a GPU machine that has the NVIDIA driver and CUDA 13 (cudart, cuBLAS) but
# none of yaml-cpp, Eigen, Boost or MPI (the lent H200; scripts/gpu-check.sh's header says how
# the two scripts are used together). Builds here (same x86-64 and CUDA 13 as there), Release, without MPI (one
# process and --emulate-rank need none), and copies into gpu-carry/ (git-ignored, well under
# the 64 MiB a device call carries):
#   gpu-carry/bin/shardsim, gpu-carry/bin/shardsim_cuda_tests   stripped
#   gpu-carry/bin/libshardsim_cuda.so                           the CUDA backend's plugin, which
#                                                                shardsim loads from beside itself
#   gpu-carry/lib/                                               the shared libraries they need
#                                                                that are not the C/C++ runtime
#                                                                or CUDA's (yaml-cpp, cudart)
# scripts/gpu-check.sh finds cuBLAS there under /usr/local/cuda or PyTorch's nvidia wheels.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build-gpu}
# x86-64-v3 (AVX2, FMA): any GPU server's CPU has it; "native" would be this machine's. No
# OpenBLAS or oneDNN (SHARDSIM_BLAS=OFF, SHARDSIM_DNNL=OFF): their libraries are tens of MB, over
# what a device call carries, and the GPU machine trains on the GPU. No libgomp either
# (SHARDSIM_OPENMP=OFF): nothing says the GPU machine has GCC's runtime libraries.
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DSHARDSIM_MPI=OFF -DSHARDSIM_CUDA=ON \
  -DSHARDSIM_MARCH=x86-64-v3 -DSHARDSIM_BLAS=OFF -DSHARDSIM_DNNL=OFF -DSHARDSIM_OPENMP=OFF -DSHARDSIM_BUILD_BENCH=OFF > "$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
cmake --build "$build" -j"$(nproc)" --target shardsim shardsim_cuda shardsim_cuda_tests
rm -rf gpu-carry
mkdir -p gpu-carry/bin gpu-carry/lib
cp "$build/shardsim" "$build/libshardsim_cuda.so" "$build/tests/cuda/shardsim_cuda_tests" gpu-carry/bin/
strip gpu-carry/bin/*
# Libraries to carry: what ldd resolves, minus glibc / libstdc++ / libgcc (there, newer) and
# cuBLAS (hundreds of MB; there already). cudart is small and pinned to the build's version.
ldd gpu-carry/bin/* | awk '/=> \// {print $3}' | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libstdc++.so*|libgcc_s.so*|ld-linux*|libpthread.so*|libdl.so*|librt.so*) ;;
    libcublas*) ;;
    *) cp -L "$lib" gpu-carry/lib/ ;;
  esac
done
du -sh gpu-carry
ls gpu-carry/lib
