// One pre-norm decoder block under Megatron-style tensor parallelism (Shoeybi et al. 2019,
// sec. 3, fig. 3): this rank holds heads/tp query heads, kv_heads/tp KV heads and ffn/tp MLP
// columns; Q, K, V and the MLP's first projection(s) are column-parallel, the attention
// output and the MLP's down projection row-parallel. The TP model stacks these.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/cpu/rope.h"
#include "runtime/cpu/transformer_block.h"
#include "runtime/mpi/communicator.h"
#include "src/model/model_spec.h"
#include "src/util/status.h"

namespace shardsim::runtime {

// The TP group as the blocks use it: a sum over the group, timed for the runtime's phase
// breakdown (the tp_comm of `simulate --json`).
struct TpGroup {
  const Communicator* comm = nullptr;
  double comm_s = 0;  // seconds spent in AllReduceSum, accumulated until the owner resets it

  Status AllReduceSum(float* data, size_t n);
};

// `local` is the model as one TP rank sees it (heads, kv_heads, ffn_hidden divided by tp;
// TensorParallelModel builds it), so BlockWeights / BlockActivations / BlockScratch of the
// single-process block hold this rank's shard: wq (H/tp*d, C), wo (C, H/tp*d), w_in (F/tp, C),
// w_out (C, F/tp); column-parallel biases sharded, row-parallel biases (bo, b_out) and norms
// full. x, out (B, T, C) are replicated on every TP rank.
//
// Forward: each row-parallel projection gives a partial sum (N, C) which is all-reduced over
// `tp` (the paper's g operator) before its bias and the residual are added, so the bias is
// counted once.
Status TpBlockForward(const ModelSpec& local, const BlockWeights<float>& w,
                      const RopeTable<float>& rope, TpGroup& tp, const float* x, float* out,
                      BlockActivations<float>& a, int64_t b, int64_t t);

// Backward: the gradient w.r.t. each column-parallel block's (replicated) input is a partial
// sum over this rank's columns, all-reduced over `tp` (the f operator's backward) before the
// norm's backward; so norm, row-parallel bias and residual gradients are full and identical
// on every TP rank. dresid as in BlockBackward (in: d out, return: d x). Adds into `dw`.
Status TpBlockBackward(const ModelSpec& local, const BlockWeights<float>& w,
                       const BlockWeights<float>& dw, const RopeTable<float>& rope, TpGroup& tp,
                       const float* x, const BlockActivations<float>& a, float* dresid,
                       BlockScratch<float>& s, int64_t b, int64_t t);

}  // namespace shardsim::runtime
