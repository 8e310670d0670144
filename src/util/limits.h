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

// A model's sizes: far above every model trained (Llama 3 405B: 126 layers, hidden 16,384,
// 128 heads, vocabulary 128,256, FFN 53,248; DeepSeek-V3: 256 routed experts; context windows
// of 10^6 to 10^7 tokens), so that the cost model's products of them stay far from int64
// overflow and exact enough in double. Checked where a model is loaded (ValidateModel; the
// model YAML reader also names the line), so that no estimate loops over 2^40 layers.
inline constexpr int64_t kMaxLayers = 10'000;
inline constexpr int64_t kMaxWidth = int64_t{1} << 20;  // hidden, FFN, head_dim, MLA ranks, window
inline constexpr int64_t kMaxHeads = int64_t{1} << 16;  // attention heads, KV heads
inline constexpr int64_t kMaxVocab = int64_t{1} << 24;
inline constexpr int64_t kMaxSeqLen = int64_t{1} << 24;  // tokens in a training sequence
inline constexpr int64_t kMaxExperts = int64_t{1} << 16;  // routed experts of an MoE layer
// Parameters of a whole model: 10^15, a thousand times the largest trained, and 10^3 below
// int64's 9.2e18, in which parameter counts are summed.
inline constexpr double kMaxModelParams = 1e15;

// a x b, or nothing when it does not fit in int64.
inline std::optional<int64_t> CheckedMul(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

}  // namespace shardsim
