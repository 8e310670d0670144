// See dp_overlap.h.
#include "runtime/exec/dp_overlap.h"

#include <algorithm>
#include <string>

#include "src/util/check.h"

#include "runtime/cpu/splitmix64.h"

namespace shardsim::runtime {

namespace {

// The part a tensor belongs to: a layer's index, kEmbedding or kHead.
int64_t PartOf(const ParamTensor& t) {
  if (t.name.rfind("embed.", 0) == 0) return DpOverlap::kEmbedding;
  if (t.name.rfind("blocks.", 0) == 0) return std::stoll(t.name.substr(7, t.name.find('.', 7) - 7));
  return DpOverlap::kHead;  // final_norm.*, lm_head.weight
}

}  // namespace

std::vector<CompressedTensor> CompressedTensorsOf(const RankShard& shard,
                                                  const std::function<bool(const ParamTensor&)>& in_group) {
  std::vector<CompressedTensor> out;
  const std::vector<ParamTensor>& tensors = shard.layout().tensors();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const ParamTensor& t = tensors[i];
    if (IsExpertParam(t.name) || !in_group(t)) continue;
    const bool tied_table = shard.model().tied_embeddings && t.name == "embed.tokens";
    const bool replicated = shard.split(i) == TensorSplit::kReplicated;
    const uint64_t block = replicated ? 0 : static_cast<uint64_t>(shard.tp_rank());
    out.push_back({.offset = t.offset, .rows = t.rows, .cols = t.cols,
                   .compress = t.rows > 1 && !tied_table && !shard.PartialOverTp(i),
                   .seed = SplitMix64(Fnv1a64(t.name) + block * kGoldenGamma)});
  }
  return out;
}

StatusOr<std::unique_ptr<DpOverlap>> DpOverlap::Create(ExecContext* ctx, const RankShard& shard, float* grads,
                                                       bool enabled, double compress, int64_t replicas) {
  std::unique_ptr<DpOverlap> d(new DpOverlap(ctx, grads, enabled));
  for (const ParamTensor& t : shard.layout().tensors()) {
    if (IsExpertParam(t.name)) continue;  // an MoE layer's experts: reduced over EP's replicas (executor.cc)
    auto [it, added] = d->ranges_.try_emplace(PartOf(t), t.offset, t.offset + t.size());
    // A part's tensors are contiguous in the layout, so the range only grows at its end.
    if (!added) it->second.second = std::max(it->second.second, t.offset + t.size());
  }
  if (compress > 1) {
    std::vector<std::vector<CompressedTensor>> groups;
    if (enabled) {
      for (const auto& part : d->ranges_) {
        const int64_t key = part.first;  // not a structured binding: clang 14 cannot capture one
        d->group_of_[key] = static_cast<int>(groups.size());
        groups.push_back(CompressedTensorsOf(shard, [&](const ParamTensor& t) { return PartOf(t) == key; }));
      }
    } else {
      groups.push_back(CompressedTensorsOf(shard, [](const ParamTensor&) { return true; }));
    }
    SHARDSIM_ASSIGN_OR_RETURN(PowerSgd p, PowerSgd::Create(&ctx->backend().memory(), &ctx->k(), groups, compress, replicas));
    d->powersgd_.emplace(std::move(p));
  }
  return d;
}

Status DpOverlap::StartCompressed(int g, bool blocking) {
  PowerSgd& p = *powersgd_;
  SHARDSIM_RETURN_IF_ERROR(ctx_->Comm(Phase::kOptimizer, 0, [&]() -> Status {
    p.Compress(g, grads_);
    return Status::Ok();
  }, SpanLabel::kGradientCompression));
  return ctx_->Comm(Phase::kDpComm, static_cast<double>(p.first_size(g)) * sizeof(float), [&]() -> Status {
    if (blocking) return ctx_->comm().AllReduceSum(Group::kDp, p.first(g), p.first_size(g));
    SHARDSIM_ASSIGN_OR_RETURN(const int64_t handle, ctx_->comm().IallReduceSum(Group::kDp, p.first(g), p.first_size(g)));
    in_flight_.emplace_back(g, handle);
    return Status::Ok();
  }, SpanLabel::kDpGradientAllReduce);
}

Status DpOverlap::FinishCompressed(int g, int64_t handle) {
  PowerSgd& p = *powersgd_;
  if (handle >= 0) {
    SHARDSIM_RETURN_IF_ERROR(ctx_->Comm(Phase::kDpComm, 0, [&] { return ctx_->comm().Wait(handle); },
                                        SpanLabel::kDpGradientAllReduce));
  }
  SHARDSIM_RETURN_IF_ERROR(ctx_->Comm(Phase::kOptimizer, 0, [&]() -> Status {
    p.Project(g, grads_);
    return Status::Ok();
  }, SpanLabel::kGradientCompression));
  if (p.second_size(g) > 0) {
    SHARDSIM_RETURN_IF_ERROR(ctx_->Comm(Phase::kDpComm, static_cast<double>(p.second_size(g)) * sizeof(float),
                                        [&] { return ctx_->comm().AllReduceSum(Group::kDp, p.second(g), p.second_size(g)); },
                                        SpanLabel::kDpGradientAllReduceQ));
  }
  return ctx_->Comm(Phase::kOptimizer, 0, [&]() -> Status {
    p.Decompress(g, grads_);
    return Status::Ok();
  }, SpanLabel::kGradientCompression);
}

Status DpOverlap::ReduceAll() {
  CHECK(powersgd_ && !active_) << "ReduceAll is for compression without overlap";
  SHARDSIM_RETURN_IF_ERROR(StartCompressed(0, /*blocking=*/true));
  return FinishCompressed(0, -1);
}

Status DpOverlap::Issue(int64_t key) {
  auto it = ranges_.find(key);
  if (!active_ || it == ranges_.end()) return Status::Ok();
  if (powersgd_) {
    SHARDSIM_RETURN_IF_ERROR(StartCompressed(group_of_.at(key), /*blocking=*/false));
    while (in_flight_.size() > 1) {  // the part issued before this one completes now
      const auto [g, handle] = in_flight_.front();
      in_flight_.pop_front();
      SHARDSIM_RETURN_IF_ERROR(FinishCompressed(g, handle));
    }
    return Status::Ok();
  }
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
  while (!in_flight_.empty()) {
    const auto [g, handle] = in_flight_.front();
    in_flight_.pop_front();
    SHARDSIM_RETURN_IF_ERROR(FinishCompressed(g, handle));
  }
  if (pending_.empty()) return Status::Ok();
  return ctx_->Comm(Phase::kDpComm, 0, [&]() -> Status {
    for (int64_t handle : pending_) SHARDSIM_RETURN_IF_ERROR(ctx_->comm().Wait(handle));
    pending_.clear();
    return Status::Ok();
  }, SpanLabel::kDpGradientAllReduce);
}

}  // namespace shardsim::runtime
