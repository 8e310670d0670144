// Softmax cross-entropy over the vocabulary, mean over tokens: the training loss.
// Fused with the softmax (as llm.c) because the pair's gradient is simply probs - onehot.
#pragma once

#include <cstdint>

namespace shardsim::runtime {

// logits, probs (N, V); targets (N) in [0, V). Saves probs = softmax_row(logits) and returns
//   loss = (1/N) sum_i -log probs[i, targets[i]]   (natural log: nats per token).
template <typename S>
S CrossEntropyForward(const S* logits, const int32_t* targets, S* probs, int64_t n, int64_t v);

// Gradient of scale * loss:  dlogits[i] += (scale / N) (probs[i] - onehot(targets[i])).
// `scale` lets a micro-batch's loss count for its share of a larger batch's mean.
template <typename S>
void CrossEntropyBackward(const S* probs, const int32_t* targets, S scale, S* dlogits, int64_t n,
                          int64_t v);

}  // namespace shardsim::runtime
