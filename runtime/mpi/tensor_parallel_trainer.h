// TensorParallelTrainer: one training step under dp x tp (ZeRO 0): each DP replica (a TP
// group holding one copy of the model, sharded by TensorParallelModel) runs its share of the
// global batch with gradient accumulation over micro-batches; the gradients are averaged
// over the DP group (every rank's shard against the same shard of the other replicas), and
// each rank steps its own shard with AdamW, clipping with the whole model's gradient norm.
// The result equals the single-process step up to floating-point summation order.
#pragma once

#include <cstdint>

#include "runtime/cpu/adamw.h"
#include "runtime/cpu/token_batch.h"
#include "runtime/mpi/communicator.h"
#include "runtime/mpi/tensor_parallel_model.h"

namespace shardsim::runtime {

class TensorParallelTrainer {
 public:
  // `optimizer` is built over model->layout() (this rank's shard). `dp` may have size 1.
  TensorParallelTrainer(TensorParallelModel* model, AdamW<float>* optimizer, const Communicator* dp,
                        int64_t micro_batch_size);

  // One step on `global` (every rank passes the same batch; DP rank r uses rows
  // [r B/dp, (r+1) B/dp)). Returns the global batch's mean loss before the update.
  StatusOr<float> Step(const TokenBatch& global);

  // Where the last Step's time went on this rank, seconds (wall clock).
  struct Times {
    double compute_s = 0;    // forward + backward of the micro-batches, less tp_comm_s
    double tp_comm_s = 0;    // the blocks' all-reduces over the TP group
    double dp_comm_s = 0;    // gradient and loss all-reduces over the DP group, norm over TP
    double optimizer_s = 0;  // AdamW on this rank's shard
  };
  const Times& last_times() const { return times_; }

 private:
  TensorParallelModel* model_;
  AdamW<float>* optimizer_;
  const Communicator* dp_;
  int64_t mbs_;
  Times times_;
};

}  // namespace shardsim::runtime
