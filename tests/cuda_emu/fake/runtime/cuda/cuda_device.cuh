// Shadows runtime/cuda/cuda_device.cuh in the CPU emulator's builds (tests/cuda_emu): the launch
// shapes and index helpers the fused attention kernels use, as defined there (the real header's
// block reductions use static __shared__ arrays, which the emulator does not model).
#pragma once

#include <cstdint>

#include "runtime/cuda/cuda_check.h"
#include "tests/cuda_emu/emu_device.h"

namespace shardsim::runtime::cuda_device {

inline constexpr int kThreads = 256;
inline constexpr int kMaxBlocks = 4096;

inline int BlocksFor(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b));
}

#define SHARDSIM_CUDA_CHECK_LAUNCH() SHARDSIM_CUDA_CHECK(cudaGetLastError())

inline int64_t GlobalIndex() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
inline int64_t GlobalStride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

}  // namespace shardsim::runtime::cuda_device
