// DpOverlap: the layout's overlap_dp for ZeRO 0. In the last micro-batch's backward pass a
// part's gradients are final as soon as that part's backward is done, so their data-parallel
// all-reduce is issued then, non-blocking, and runs while the rest of the backward computes
// (Megatron-LM's overlap_grad_reduce; PyTorch DDP's bucketed all-reduce). One bucket per
// transformer layer, one for the embeddings, one for the final norm and LM head. The
// optimizer waits for them all. Communication volume and the sums are those of the blocking
// all-reduce of the whole buffer.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "runtime/exec/exec_context.h"
#include "runtime/exec/shard.h"
#include "src/util/status.h"

namespace shardsim::runtime {

class DpOverlap {
 public:
  static constexpr int64_t kEmbedding = -1;
  static constexpr int64_t kHead = -2;

  // Active when `enabled` (overlap_dp, ZeRO 0, dp > 1); `grads` is the rank's flat gradient
  // buffer, which must outlive this object.
  DpOverlap(ExecContext* ctx, const RankShard& shard, float* grads, bool enabled);

  bool active() const { return active_; }
  // Issues the all-reduce of part `key` (a global layer index, kEmbedding or kHead); nothing
  // when inactive or when this rank holds no such part.
  Status Issue(int64_t key);
  // Waits for every issued all-reduce (recorded as dp_comm: the exposed part of the overlap).
  Status WaitAll();

 private:
  ExecContext* ctx_;
  float* grads_;
  bool active_;
  std::map<int64_t, std::pair<int64_t, int64_t>> ranges_;  // key -> [begin, end) of grads
  std::vector<int64_t> pending_;                            // handles
};

}  // namespace shardsim::runtime
