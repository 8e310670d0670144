// The attention core of one decoder block on a rank: RoPE on Q and K, and the causal scaled
// dot-product attention between the QKV and output projections, unfused (probabilities kept or,
// under selective recompute, rebuilt) or memory-efficient (attention=flash), with or without
// context parallelism (context_parallel.h: each half of the rank's rows attends to the whole
// sequence's gathered keys). block.cc calls these between its projections.
#pragma once

#include "runtime/backend/backend.h"
#include "runtime/exec/block.h"
#include "runtime/exec/exec_context.h"

namespace shardsim::runtime {

// q (n, H d), k (n, KV d) rotated in place (forward) or their gradients rotated back
// (backward), each CP half at its positions in the sequence. Nothing for a model without RoPE.
template <typename T>
void RopeQueriesKeys(ExecContext& ctx, const BlockDims& d, T* q, T* k, bool backward);

// From the saved, roped s.q, s.k, s.v: allocates and fills s.attn (n, H d) and s.lse
// (attention=flash) or s.probs (kept as activations when keep_probs, else freed: selective
// recompute).
template <typename T>
Status AttentionCoreForward(ExecContext& ctx, const BlockDims& d, BlockSaved& s, bool keep_probs);

// dattn (n, H d): the output's gradient. Adds into dq (n, H d), dk, dv (n, KV d); rebuilds the
// probabilities first when the forward did not keep them (selective recompute, timed as
// recompute). Reads s.q, s.k, s.v and s.probs or s.lse and s.attn; frees s.probs and s.lse.
template <typename T>
Status AttentionCoreBackward(ExecContext& ctx, const BlockDims& d, BlockSaved& s, const T* dattn,
                             T* dq, T* dk, T* dv);

}  // namespace shardsim::runtime
