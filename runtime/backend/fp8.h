// fp8 as Transformer Engine trains with it (Micikevicius et al. 2022, "FP8 Formats for Deep
// Learning"): E4M3 (4 exponent bits, bias 7, 3 mantissa bits, no infinities, max 448) for
// weights and activations, E5M2 (5 bits, bias 15, 2 mantissa bits, max 57344) for gradients:
// TE's HYBRID format. Conversions round to nearest, ties to even, and saturate to the largest
// finite value (CUDA's __nv_cvt_float_to_fp8 with __NV_SATFINITE, which TE's casts use); NaN
// stays NaN. A tensor is quantized with TE's current scaling (Float8CurrentScaling, Megatron's
// --fp8-recipe tensorwise): scale = fp8_max / amax(tensor), codes = fp8(x * scale), and its
// values are fp8(x * scale) / scale.
#pragma once

#include <cstdint>

namespace shardsim::runtime {

enum class Fp8Format : uint8_t { kE4M3, kE5M2 };

// The largest finite value: 448 (E4M3), 57344 (E5M2).
float Fp8Max(Fp8Format f);
uint8_t ToFp8(float v, Fp8Format f);
float FromFp8(uint8_t code, Fp8Format f);

// Current scaling's factor for a tensor whose largest magnitude is `amax`: fp8_max / amax, or 1
// when amax is 0 or not finite (TE leaves such a tensor's scale at 1).
float Fp8Scale(float amax, Fp8Format f);

}  // namespace shardsim::runtime
