// See bf16_convert.h.
#include "runtime/cpu/bf16_convert.h"

#include <cstring>

#include "runtime/cpu/parallel.h"

namespace shardsim::runtime {

// GCC and clang build one copy per target and pick one at load (function multi-versioning); the
// loops are branch-free (a select for NaN) so that each copy vectorizes.
// Not under AddressSanitizer (scripts/fuzz.sh): its run-time would be called from the ifunc
// resolver before it is set up.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SHARDSIM_NO_CLONES 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define SHARDSIM_NO_CLONES 1
#endif
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(SHARDSIM_NO_CLONES)
#define SHARDSIM_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define SHARDSIM_VECTOR_CLONES
#endif

namespace {

SHARDSIM_VECTOR_CLONES
void FloatsToBf16Part(const float* src, Bf16* dst, int64_t n) {
  const uint32_t* s = reinterpret_cast<const uint32_t*>(src);
  uint16_t* d = reinterpret_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = s[i];
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const uint32_t quiet_nan = (u >> 16) | 0x40u;
    d[i] = static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
  }
}

SHARDSIM_VECTOR_CLONES
void Bf16ToFloatsPart(const Bf16* src, float* dst, int64_t n) {
  const uint16_t* s = reinterpret_cast<const uint16_t*>(src);
  uint32_t* d = reinterpret_cast<uint32_t*>(dst);
  for (int64_t i = 0; i < n; ++i) d[i] = static_cast<uint32_t>(s[i]) << 16;
}

constexpr int64_t kGrain = 1 << 16;  // elements a thread takes at least (a few tens of microseconds)

}  // namespace

void FloatsToBf16(const float* src, Bf16* dst, int64_t n) {
  ParallelFor(n, kGrain, [&](int64_t b, int64_t e) { FloatsToBf16Part(src + b, dst + b, e - b); });
}

void Bf16ToFloats(const Bf16* src, float* dst, int64_t n) {
  ParallelFor(n, kGrain, [&](int64_t b, int64_t e) { Bf16ToFloatsPart(src + b, dst + b, e - b); });
}

}  // namespace shardsim::runtime
