// One training step of the single-process runtime: gradient accumulation over micro-batches,
// then AdamW. The reference loop that sharded executors must reproduce step by step.
#pragma once

#include <cstdint>

#include "runtime/cpu/adamw.h"
#include "runtime/cpu/token_batch.h"
#include "runtime/cpu/transformer.h"

namespace shardsim::runtime {

// Zeroes the gradients, then runs forward and backward on each micro-batch of
// `micro_batch_size` sequences (which must divide batch.batch), scaling micro-batch m's
// backward by n_m / N (its share of the batch's N tokens). Since the batch's mean loss is
// L = sum_m (n_m / N) L_m, the accumulated gradient is exactly grad L, the full-batch gradient.
// Returns L.
template <typename S>
S AccumulateGradients(Transformer<S>& model, const TokenBatch& batch, int64_t micro_batch_size);

// AccumulateGradients, then one AdamW step. Returns the batch's mean loss before the update.
template <typename S>
S TrainStep(Transformer<S>& model, AdamW<S>& optimizer, const TokenBatch& batch,
            int64_t micro_batch_size);

}  // namespace shardsim::runtime
