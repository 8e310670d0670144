// DpOverlap: the layout's overlap_dp for ZeRO 0. In the last micro-batch's backward pass a
// part's gradients are final as soon as that part's backward is done, so their data-parallel
// all-reduce is issued then, non-blocking, and runs while the rest of the backward computes
// (Megatron-LM's overlap_grad_reduce; PyTorch DDP's bucketed all-reduce). One bucket per
// transformer layer, one for the embeddings, one for the final norm and LM head. The
// optimizer waits for them all. Communication volume and the sums are those of the blocking
// all-reduce of the whole buffer.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "runtime/exec/exec_context.h"
#include "runtime/exec/powersgd.h"
#include "runtime/exec/shard.h"
#include "src/util/status.h"

namespace shardsim::runtime {

// The tensors of `shard` that `in_group` accepts, as the compressor sees them (powersgd.h):
// matrices compressed except a tied embedding table and the tensors SP leaves partial over TP
// (src/cost/grad_compression.h says why); Q's seed from the name and, for a tensor TP splits,
// the TP rank.
std::vector<CompressedTensor> CompressedTensorsOf(const RankShard& shard,
                                                  const std::function<bool(const ParamTensor&)>& in_group);

class DpOverlap {
 public:
  static constexpr int64_t kEmbedding = -1;
  static constexpr int64_t kHead = -2;

  // Active when `enabled` (overlap_dp, ZeRO 0, dp > 1); `grads` is the rank's flat gradient
  // buffer, which must outlive this object. `compress`: the layout's compress where its DP
  // gradients are compressed (CompressesGradients), else 1; `replicas`: the DP group's size.
  static StatusOr<std::unique_ptr<DpOverlap>> Create(ExecContext* ctx, const RankShard& shard, float* grads,
                                                     bool enabled, double compress, int64_t replicas);

  bool active() const { return active_; }
  bool compresses() const { return powersgd_.has_value(); }
  // The compressor's state that carries from step to step (PowerSgd::PersistentState; none
  // without compression), in device memory.
  std::vector<std::pair<float*, int64_t>> PersistentState() const {
    return powersgd_ ? powersgd_->PersistentState() : std::vector<std::pair<float*, int64_t>>{};
  }
  // Issues the all-reduce of part `key` (a global layer index, kEmbedding or kHead); nothing
  // when inactive or when this rank holds no such part. Compressing, the part is compressed and
  // its first all-reduce issued, and the part issued before it is completed (its Q all-reduced,
  // blocking, and decompressed): one part in flight behind the backward.
  Status Issue(int64_t key);
  // Waits for every issued all-reduce (recorded as dp_comm: the exposed part of the overlap).
  Status WaitAll();
  // Without overlap, compressing: every tensor compressed and reduced now, as one part.
  Status ReduceAll();

 private:
  DpOverlap(ExecContext* ctx, float* grads, bool active) : ctx_(ctx), grads_(grads), active_(active) {}
  // Part g of the compressor: compressed and its first all-reduce issued (blocking or not).
  Status StartCompressed(int g, bool blocking);
  // Part g: its first all-reduce waited for (`handle`, -1 when it was blocking), projected, Q
  // all-reduced, decompressed.
  Status FinishCompressed(int g, int64_t handle);

  ExecContext* ctx_;
  float* grads_;
  bool active_;
  std::map<int64_t, std::pair<int64_t, int64_t>> ranges_;  // key -> [begin, end) of grads
  std::vector<int64_t> pending_;                            // handles
  std::optional<PowerSgd> powersgd_;
  std::map<int64_t, int> group_of_;   // key -> the compressor's part (with overlap)
  std::deque<std::pair<int, int64_t>> in_flight_;  // compressed parts issued: part, handle
};

}  // namespace shardsim::runtime
