// Executor: trains one rank's share of a model under a layout, on any Backend: data
// parallelism with ZeRO 0-3, Megatron tensor parallelism with optional sequence parallelism,
// pipeline parallelism with the simulator's schedules (GPipe, 1F1B, interleaved; the order
// comes from src/sim/schedule.h), gradient accumulation, and activation recomputation (none,
// selective, full). Every rank of the layout's world runs one Executor; together they compute
// what the single-process runtime/cpu Transformer computes, up to floating-point order.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/cpu/adamw.h"
#include "runtime/cpu/markov_stream.h"
#include "runtime/exec/block.h"
#include "runtime/exec/dp_overlap.h"
#include "runtime/exec/exec_context.h"
#include "runtime/exec/shard.h"
#include "runtime/exec/timeline.h"
#include "runtime/exec/zero_buckets.h"
#include "src/layout/layout.h"
#include "src/model/model_spec.h"

namespace shardsim::runtime {

// Why the executor cannot run `l` (empty when it can): features it does not implement are
// rejected, never ignored.
std::vector<std::string> UnsupportedLayout(const Layout& l);

class Executor {
 public:
  // `backend` and `timeline` (may be null) must outlive the executor. The backend's groups
  // must be the layout's. Allocates and initializes this rank's parameters and optimizer.
  static StatusOr<std::unique_ptr<Executor>> Create(const ModelSpec& m, const Layout& l,
                                                    Backend* backend, const AdamWConfig& opt,
                                                    uint64_t seed, Timeline* timeline);

  // One iteration on global sequences [step * gbs, (step + 1) * gbs) of `data`: every
  // micro-batch forward and backward in the schedule's order, the gradient reductions, the
  // clipped AdamW update. Returns the global batch's mean loss (nats per token, every rank).
  StatusOr<double> Step(const MarkovStream& data, int64_t step);

  // The whole model's parameters in the single-process layout, assembled from every rank
  // (a collective: every rank must call it).
  StatusOr<std::vector<float>> FullParams();

  const RankShard& shard() const { return shard_; }
  const Layout& layout() const { return layout_; }
  // The phase the last error came from ("forward", "backward", "optimizer", ...).
  const char* phase() const { return phase_; }

 private:
  // One micro-batch's state on one model chunk between its forward and backward passes.
  struct ChunkState {
    DeviceBuffer tokens, targets;          // (n) int32, embedding / head chunks
    std::vector<DeviceBuffer> residual;    // layers + 1 of (n_local, C): block inputs, output
    std::vector<BlockSaved> saved;         // one per layer
    DeviceBuffer final_out, final_mean, final_rstd;  // head chunk: final norm
    DeviceBuffer logits;                   // head chunk: (n, V / tp), probabilities after
  };

  Executor(const ModelSpec& m, const Layout& l, Backend* backend, RankShard shard,
           const AdamWConfig& opt, Timeline* timeline);
  Status Allocate(uint64_t seed);
  Status Forward(const MarkovStream& data, int64_t step, int32_t mb, int32_t chunk);
  Status Backward(int32_t mb, int32_t chunk);
  Status HeadForward(ChunkState& s, const ChunkInfo& info, double* loss_sum);
  Status HeadBackward(ChunkState& s, float* dres);
  Status OptimizerStep();
  Status ReduceGradients();
  StatusOr<double> GradSquaredNorm();  // over this rank's owned ranges, summed over the world
  Status WaitSends();
  Status ReleaseCompletedSends();
  const float* Param(const char* name) const;
  float* Grad(const char* name);
  int64_t SequenceIndex(int64_t step, int32_t mb) const;
  int Tag(int32_t mb, int64_t model_chunk, bool backward) const;

  ModelSpec model_;
  Layout layout_;
  Backend* backend_;
  RankShard shard_;
  AdamWConfig opt_;
  ExecContext ctx_;
  BlockDims dims_;
  const char* phase_ = "setup";

  int64_t total_ = 0;   // this rank's parameter count
  int64_t padded_ = 0;  // rounded up to a multiple of dp (ZeRO shards)
  int64_t shard_begin_ = 0, shard_end_ = 0;  // this rank's optimizer range
  // Persistent model states: whole (padded_ floats) or this rank's range (padded_ / dp):
  // moments under ZeRO >= 1, gradients >= 2, parameters 3 (zero_buckets.h).
  DeviceBuffer params_, grads_, moment1_, moment2_;
  std::unique_ptr<ZeroBuckets> zero_;
  std::unique_ptr<DpOverlap> overlap_;  // overlap_dp under ZeRO 0  // where parameters and gradients are; ZeRO-2/3 buckets
  int64_t adam_step_ = 0;

  std::map<std::pair<int32_t, int32_t>, ChunkState> live_;  // (chunk, micro-batch)
  std::vector<std::pair<int64_t, DeviceBuffer>> sends_;     // in flight
  double loss_sum_ = 0;
};

}  // namespace shardsim::runtime
