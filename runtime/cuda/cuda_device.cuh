// Device helpers shared by the .cu files of runtime/cuda: launch shapes, block-wide sum and max
// reductions, the post-launch check, and the storage types' loads and stores (fp32 arithmetic
// on float or bf16 elements). Included by .cu files only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "runtime/backend/bf16.h"
#include "runtime/cuda/cuda_check.h"
#include "src/util/check.h"

namespace shardsim::runtime::cuda_device {

inline constexpr int kThreads = 256;     // threads per block; a multiple of the warp (32)
inline constexpr int kMaxBlocks = 4096;  // grid cap for grid-stride loops

// Blocks for a grid-stride loop over n elements.
inline int BlocksFor(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b));
}

// Row-per-block kernels take the row from blockIdx.x (up to 2^31 - 1 rows).
inline unsigned RowBlocks(int64_t rows) {
  CHECK(rows > 0 && rows <= 0x7fffffff) << rows << " rows";
  return static_cast<unsigned>(rows);
}

// A launch error (bad configuration) or an earlier asynchronous fault is an invariant broken.
#define SHARDSIM_CUDA_CHECK_LAUNCH() SHARDSIM_CUDA_CHECK(cudaGetLastError())

// The device element type of a storage type: float, or CUDA's __nv_bfloat16 for Bf16 (the same
// 16 bits, bf16.h), so kernels use CUDA's conversions.
template <typename T>
struct DeviceElement {
  using type = T;
};
template <>
struct DeviceElement<Bf16> {
  using type = __nv_bfloat16;
};
template <typename T>
using Dev = typename DeviceElement<T>::type;
static_assert(sizeof(__nv_bfloat16) == sizeof(Bf16) && alignof(__nv_bfloat16) == alignof(Bf16));

template <typename T>
Dev<T>* ToDev(T* p) {
  return reinterpret_cast<Dev<T>*>(p);
}
template <typename T>
const Dev<T>* ToDev(const T* p) {
  return reinterpret_cast<const Dev<T>*>(p);
}

// Kernels compute in fp32 whatever they store (backend.h's TypedKernels contract): Load widens
// an element (exact), Store rounds a float to the element type once (bf16: to nearest even,
// as ToBf16). On float both are plain accesses, so the fp32 kernels' operations are unchanged.
__device__ inline float Load(const float* p) { return *p; }
__device__ inline float Load(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ inline void Store(float* p, float v) { *p = v; }
__device__ inline void Store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

__device__ inline int64_t GlobalIndex() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline int64_t GlobalStride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// The block's sum (or max) of v, returned to every thread. blockDim.x must be a multiple of
// 32 and at most 1024; every thread of the block must call it. The tree is fixed, so the
// result is deterministic for a given blockDim.
template <typename T>
__device__ T BlockSum(T v) {
  __shared__ T warp_sums[32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // warp_sums may still be read by a previous call
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < static_cast<int>(blockDim.x >> 5) ? warp_sums[lane] : T(0);
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) warp_sums[0] = v;
  }
  __syncthreads();
  return warp_sums[0];
}

__device__ inline float BlockMax(float v) {
  __shared__ float warp_max[32];
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) warp_max[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < static_cast<int>(blockDim.x >> 5) ? warp_max[lane] : -INFINITY;
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (lane == 0) warp_max[0] = v;
  }
  __syncthreads();
  return warp_max[0];
}

}  // namespace shardsim::runtime::cuda_device
