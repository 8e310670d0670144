// DataParallelTrainer: one training step of a data-parallel group with ZeRO 0-3 (Rajbhandari
// et al. 2020): each rank runs its share of the global batch (with gradient accumulation over
// micro-batches), then the gradients are combined over the DP group and AdamW updates the
// parameters. ZeRO 0 all-reduces the gradients and every rank steps the whole model; ZeRO >= 1
// reduce-scatters them, each rank steps its 1/dp shard (with the global gradient norm for
// clipping) and the parameters are all-gathered back. The result equals the single-process
// step on the whole batch up to floating-point summation order.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/cpu/adamw.h"
#include "runtime/cpu/token_batch.h"
#include "runtime/cpu/transformer.h"
#include "runtime/mpi/communicator.h"

namespace shardsim::runtime {

class DataParallelTrainer {
 public:
  DataParallelTrainer(Transformer<float>* model, AdamW<float>* optimizer, const Communicator* dp,
                      int zero, int64_t micro_batch_size);

  // One step on `global` (every rank passes the same batch; rank r uses rows
  // [r B/dp, (r+1) B/dp)). Returns the global batch's mean loss before the update.
  StatusOr<float> Step(const TokenBatch& global);

  // Where the last Step's time went on this rank, seconds (wall clock).
  struct Times {
    double compute_s = 0;    // forward + backward of the micro-batches
    double comm_s = 0;       // gradient / parameter collectives and the loss reduction
    double optimizer_s = 0;  // AdamW (this rank's shard under ZeRO >= 1)
  };
  const Times& last_times() const { return times_; }

  // The range of the flat parameter buffer this rank's optimizer owns (ZeRO >= 1).
  int64_t shard_begin() const;
  int64_t shard_end() const;

 private:
  Transformer<float>* model_;
  AdamW<float>* optimizer_;
  const Communicator* dp_;
  int zero_;
  int64_t mbs_;
  Times times_;
  int64_t padded_ = 0;  // the flat size rounded up to a multiple of dp
  std::vector<float> scratch_;  // (padded_)
  std::vector<float> shard_;    // (padded_ / dp)
};

}  // namespace shardsim::runtime
