// See dp_overlap.h.
#include "runtime/exec/dp_overlap.h"

#include <algorithm>
#include <string>

namespace shardsim::runtime {

DpOverlap::DpOverlap(ExecContext* ctx, const RankShard& shard, float* grads, bool enabled)
    : ctx_(ctx), grads_(grads), active_(enabled) {
  for (const ParamTensor& t : shard.layout().tensors()) {
    if (IsExpertParam(t.name)) continue;  // an MoE layer's experts: reduced over EP's replicas (executor.cc)
    int64_t key = kHead;  // final_norm.*, lm_head.weight
    if (t.name.rfind("embed.", 0) == 0) key = kEmbedding;
    if (t.name.rfind("blocks.", 0) == 0) key = std::stoll(t.name.substr(7, t.name.find('.', 7) - 7));
    auto [it, added] = ranges_.try_emplace(key, t.offset, t.offset + t.size());
    // A part's tensors are contiguous in the layout, so the range only grows at its end.
    if (!added) it->second.second = std::max(it->second.second, t.offset + t.size());
  }
}

Status DpOverlap::Issue(int64_t key) {
  auto it = ranges_.find(key);
  if (!active_ || it == ranges_.end()) return Status::Ok();
  // Plain variables, not a structured binding: C++20 lets a lambda capture a binding, but
  // clang 14 does not implement it yet.
  const int64_t begin = it->second.first, end = it->second.second;
  float* data = grads_ + begin;
  // Issuing is timed as communication (it is, on a host backend, where MPI copies eagerly).
  return ctx_->Comm(Phase::kDpComm, static_cast<double>(end - begin) * sizeof(float),
                    [&]() -> Status {
                      SHARDSIM_ASSIGN_OR_RETURN(
                          const int64_t handle,
                          ctx_->comm().IallReduceSum(Group::kDp, data, end - begin));
                      pending_.push_back(handle);
                      return Status::Ok();
                    },
                    SpanLabel::kDpGradientAllReduce);
}

Status DpOverlap::WaitAll() {
  if (pending_.empty()) return Status::Ok();
  return ctx_->Comm(Phase::kDpComm, 0, [&]() -> Status {
    for (int64_t handle : pending_) SHARDSIM_RETURN_IF_ERROR(ctx_->comm().Wait(handle));
    pending_.clear();
    return Status::Ok();
  }, SpanLabel::kDpGradientAllReduce);
}

}  // namespace shardsim::runtime
