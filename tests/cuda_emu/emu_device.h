// The CUDA device vocabulary the fused attention kernels use, on the host: qualifiers as empty
// macros, the built-in index variables (thread-local per emulated thread), uint4, bf16 and its
// conversions, and the few runtime-API calls the host code makes. Part of the CPU emulator that
// runs runtime/cuda's flash_fused kernels in CI without a GPU (tests/cuda_emu/CMakeLists.txt).
#pragma once

#include <math.h>  // expf, logf, fmaxf, INFINITY in the global namespace, as in device code

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
// __shared__ has no host meaning: cuda_to_cc.cmake rewrites the one form the emulator models
// (extern __shared__ dynamic memory) and fails the build on any other use.

// An emulator check (a rule the hardware or the CUDA runtime enforces): aborts with the rule.
#define CUDA_EMU_CHECK(cond, ...)                                                      \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      std::fprintf(stderr, "cuda_emu %s:%d: %s: ", __FILE__, __LINE__, #cond);         \
      std::fprintf(stderr, __VA_ARGS__);                                               \
      std::fprintf(stderr, "\n");                                                      \
      std::abort();                                                                    \
    }                                                                                  \
  } while (0)

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint3 {
  unsigned x = 0, y = 0, z = 0;
};
struct uint4 {
  unsigned x, y, z, w;
};
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }

// Set by cuda_emu::Launch for each emulated thread (threadIdx, blockIdx) and launch (the dims).
inline thread_local uint3 threadIdx, blockIdx;
inline dim3 gridDim, blockDim;

// CUDA's bf16: the upper half of a float, converted with round-to-nearest-even.
struct __nv_bfloat16 {
  unsigned short __x;
};
inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return {0x7fff};  // CUDA's canonical NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return {static_cast<unsigned short>(u >> 16)};
}
inline float __bfloat162float(__nv_bfloat16 h) {
  const uint32_t u = static_cast<uint32_t>(h.__x) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// The runtime API the host code calls, on an emulated H100/H200 (sm_90).
using cudaStream_t = struct CUstream_st*;
enum cudaError_t { cudaSuccess = 0 };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
enum cudaDeviceAttr { cudaDevAttrMaxSharedMemoryPerBlockOptin = 97 };
inline const char* cudaGetErrorName(cudaError_t) { return "cudaSuccess"; }
inline const char* cudaGetErrorString(cudaError_t) { return "no error"; }
inline cudaError_t cudaGetLastError() { return cudaSuccess; }

namespace cuda_emu {
// sm_90's opt-in dynamic shared memory per block (cudaDevAttrMaxSharedMemoryPerBlockOptin on
// H100 and H200: 227 KiB), and the default without cudaFuncSetAttribute (48 KiB).
inline constexpr size_t kMaxSharedOptin = 232448;
inline constexpr size_t kDefaultShared = 48 * 1024;
// Records a kernel's cudaFuncAttributeMaxDynamicSharedMemorySize (emu_launch.cc).
void SetMaxDynamicShared(const void* kernel, int bytes);
}  // namespace cuda_emu

inline cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
inline cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  CUDA_EMU_CHECK(attr == cudaDevAttrMaxSharedMemoryPerBlockOptin && device == 0,
                 "attribute %d of device %d is not emulated", attr, device);
  *value = static_cast<int>(cuda_emu::kMaxSharedOptin);
  return cudaSuccess;
}
template <typename... P>
cudaError_t cudaFuncSetAttribute(void (*kernel)(P...), cudaFuncAttribute attr, int value) {
  CUDA_EMU_CHECK(attr == cudaFuncAttributeMaxDynamicSharedMemorySize, "attribute %d", attr);
  cuda_emu::SetMaxDynamicShared(reinterpret_cast<const void*>(kernel), value);
  return cudaSuccess;
}
