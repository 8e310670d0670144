// The CUDA device vocabulary runtime/cuda's kernels use, on the host: qualifiers as empty macros,
// the built-in index variables (thread-local per emulated thread), uint4, bf16 and its
// conversions, and the integer min / max overloads of device code. Part of the CPU emulator that
// runs runtime/cuda's kernels in CI without a GPU (tests/cuda_emu/CMakeLists.txt); the runtime
// API is emu_runtime.h.
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
// __shared__ has no host meaning: cuda_to_cc.cmake rewrites the two forms the emulator models
// (extern __shared__ dynamic memory, fixed-size __shared__ arrays) and fails the build on any
// other use.

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

// Device code's min and max of two values of one type (CUDA overloads them for the integer and
// floating types; runtime/cuda calls them on int64_t).
template <typename T>
inline T min(T a, T b) {
  return b < a ? b : a;
}
template <typename T>
inline T max(T a, T b) {
  return a < b ? b : a;
}
