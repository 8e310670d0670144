// Bulk conversions between fp32 and bf16 (bf16.h's ToBf16 and ToFloat over arrays), compiled for
// the widest vectors the CPU has (one copy per instruction set, chosen when the program starts).
// Integer operations only, so every copy gives the same bits: round to nearest even, NaN quiet.
#pragma once

#include <cstdint>

#include "runtime/backend/bf16.h"

namespace shardsim::runtime {

void FloatsToBf16(const float* src, Bf16* dst, int64_t n);
void Bf16ToFloats(const Bf16* src, float* dst, int64_t n);

}  // namespace shardsim::runtime
