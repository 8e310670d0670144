// Bounds on the counts a description or a flag can set, chosen from what is physically
// meaningful and so that products of them stay far from int64 overflow (docs/cli.md, "Bounds").
// Beyond them an input is an error that names the bound, never a wrong number or a crash.
#pragma once

#include <cstdint>
#include <optional>

namespace shardsim {

// GPUs in a cluster or a job, and any one parallel degree: 2^24 = 16,777,216 (the largest
// training clusters hold about 10^5).
inline constexpr int64_t kMaxGpus = int64_t{1} << 24;
// Sequences in a global batch (Llama 3 405B's largest was 16M tokens = 2,048 sequences).
inline constexpr int64_t kMaxGlobalBatch = 1'000'000'000;
// Micro-batch passes (micro-batches x virtual stages) in one pipeline schedule: 2^20.
inline constexpr int64_t kMaxMicrobatchPasses = int64_t{1} << 20;

// a x b, or nothing when it does not fit in int64.
inline std::optional<int64_t> CheckedMul(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

}  // namespace shardsim
