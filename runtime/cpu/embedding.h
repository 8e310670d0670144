// Token embedding, plus learned absolute positions (GPT-2) when the model has them.
// The first operator of the model; its backward scatters into the embedding tables.
#pragma once

#include <cstdint>

namespace shardsim::runtime {

// tokens (B, T) in [0, V); wte (V, C); wpe (T_max >= T, C) or nullptr (RoPE models);
// x (B, T, C):  x[b, t] = wte[tokens[b, t]] + wpe[t].
template <typename S>
void EmbeddingForward(const int32_t* tokens, const S* wte, const S* wpe, S* x, int64_t b, int64_t t,
                      int64_t c, int64_t vocab);

// dx (B, T, C). Adds dwte[tokens[b, t]] += dx[b, t] and dwpe[t] += dx[b, t] (if dwpe).
template <typename S>
void EmbeddingBackward(const S* dx, const int32_t* tokens, S* dwte, S* dwpe, int64_t b, int64_t t,
                       int64_t c, int64_t vocab);

}  // namespace shardsim::runtime
