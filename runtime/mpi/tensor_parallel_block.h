// Megatron-style tensor parallelism for one pre-norm decoder block (Shoeybi et al. 2019,
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

// The block itself is the single-process one (runtime/cpu/transformer_block.h) run on the
// rank's shard with TpGroup::AllReduceSum as its partial-sum hook: each row-parallel
// projection's partial output is reduced before its bias and the residual (the paper's g), and
// the gradient w.r.t. each column-parallel block's replicated input before the norm's backward
// (f's backward), so norm, row-parallel bias and residual gradients are full and identical on
// every TP rank. TensorParallelModel wires it.

}  // namespace shardsim::runtime
