// Bf16: the 16-bit brain floating-point storage type of mixed-precision training (Kalamkar et
// al. 2019, "A Study of BFLOAT16 for Deep Learning Training": fp32's sign and 8-bit exponent,
// 7 explicit mantissa bits), and the host-side conversions every backend shares.
// Only a storage type: arithmetic widens to float. Its layout is CUDA's __nv_bfloat16, so
// device code reinterprets Bf16* as __nv_bfloat16*.
#pragma once

#include <cstdint>
#include <cstring>

#include "src/hardware/hardware_spec.h"

namespace shardsim::runtime {

struct Bf16 {
  uint16_t bits = 0;
};
static_assert(sizeof(Bf16) == 2);

// The upper 16 bits of the float: exact.
inline float ToFloat(Bf16 b) {
  const uint32_t u = static_cast<uint32_t>(b.bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Rounded to nearest, ties to even (CUDA's __float2bfloat16_rn, so CPU and GPU round alike);
// NaN stays a (quiet) NaN, overflow rounds to infinity.
inline Bf16 ToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return Bf16{static_cast<uint16_t>((u >> 16) | 0x40u)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return Bf16{static_cast<uint16_t>(u >> 16)};
}

// The element types the runtime stores activations and working weights in, as the layout's
// DType (src/hardware/hardware_spec.h).
template <typename T>
constexpr DType DTypeOf();
template <>
constexpr DType DTypeOf<float>() { return DType::kFp32; }
template <>
constexpr DType DTypeOf<Bf16>() { return DType::kBf16; }

}  // namespace shardsim::runtime
