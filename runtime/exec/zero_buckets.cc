// See zero_buckets.h.
//
// Both bucket collectives are all-reduces over DP of a whole bucket. The shards are ranges of
// the flat buffer, so a bucket's range meets the shards unevenly (a layer may straddle two
// ranks' ranges, or lie inside one), and the Collectives interface has only equal-block
// reduce-scatter / all-gather:
//   gradients  all-reduce the bucket, keep this rank's intersection: every rank adds the
//              same sums, so the result is the one ZeRO-1's reduce-scatter gives;
//   parameters each rank writes its intersection into a zeroed bucket and all-reduces it:
//              every element is one rank's value plus zeros, exact in floating point, at twice
//              an all-gather's bytes on the wire (what FSDP avoids by sharding each unit
//              evenly; this keeps ZeRO-1's flat shard, so the optimizer states are unchanged).
#include "runtime/exec/zero_buckets.h"

#include <algorithm>
#include <string>

#include "runtime/exec/timeline.h"
#include "src/util/check.h"

namespace shardsim::runtime {
namespace {

// The global layer of a tensor, or -1 for the embeddings and -2 for the final norm and head.
int64_t BucketId(const std::string& name) {
  if (name.rfind("blocks.", 0) == 0) return std::stoll(name.substr(7, name.find('.', 7) - 7));
  return name.rfind("embed.", 0) == 0 ? -1 : -2;
}

constexpr int64_t kFloat = static_cast<int64_t>(sizeof(float));

}  // namespace

ZeroBuckets::ZeroBuckets(ExecContext* ctx, const RankShard* shard, int zero, int64_t dp,
                         int64_t shard_begin, int64_t shard_end, float* params, float* grads)
    : ctx_(ctx),
      shard_(shard),
      shards_grads_(zero >= 2 && dp > 1),
      shards_params_(zero >= 3 && dp > 1),
      dp_(dp),
      shard_begin_(shard_begin),
      shard_end_(shard_end),
      params_(params),
      grads_(grads) {
  if (!shards_grads_) return;
  const std::vector<ParamTensor>& tensors = shard->layout().tensors();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const int64_t id = BucketId(tensors[i].name);
    if (layer_of_.empty() || layer_of_.back() != id) {
      CHECK(std::find(layer_of_.begin(), layer_of_.end(), id) == layer_of_.end())
          << "the tensors of bucket " << id << " are not contiguous at " << tensors[i].name;
      layer_of_.push_back(id);
      Bucket bucket;
      bucket.begin = bucket.end = tensors[i].offset;
      buckets_.push_back(std::move(bucket));
    }
    buckets_.back().end = tensors[i].offset + tensors[i].size();
    buckets_.back().tensors.push_back(i);
  }
  for (size_t b = 0; b < buckets_.size(); ++b) {
    Bucket& k = buckets_[b];
    k.layout = shard->layout().Select(
        [&](const ParamTensor& t) { return t.offset >= k.begin && t.offset < k.end; });
    CHECK(k.layout.total_size() == k.size()) << "bucket " << b << " is not contiguous";
    if (layer_of_[b] == -1) embedding_ = static_cast<int>(b);
    if (layer_of_[b] == -2) head_ = static_cast<int>(b);
  }
}

int ZeroBuckets::layer(int64_t global_layer) const {
  if (global_layer < 0) return -1;
  const auto it = std::find(layer_of_.begin(), layer_of_.end(), global_layer);
  return it == layer_of_.end() ? -1 : static_cast<int>(it - layer_of_.begin());
}

int ZeroBuckets::BucketOf(int64_t offset) const {
  for (size_t b = 0; b < buckets_.size(); ++b) {
    if (offset >= buckets_[b].begin && offset < buckets_[b].end) return static_cast<int>(b);
  }
  return -1;
}

const float* ZeroBuckets::Param(int64_t offset) const {
  if (!shards_params_) return params_ + offset;
  const int b = BucketOf(offset);
  CHECK(b >= 0 && !buckets_[b].params.empty())
      << "parameter " << offset << " used while not gathered";
  return buckets_[b].params.f() + (offset - buckets_[b].begin);
}

float* ZeroBuckets::Grad(int64_t offset) const {
  if (!shards_grads_) return grads_ + offset;
  const int b = BucketOf(offset);
  CHECK(b >= 0 && !buckets_[b].grads.empty())
      << "gradient " << offset << " written while no bucket is open";
  return buckets_[b].grads.f() + (offset - buckets_[b].begin);
}

BlockWeights<float> ZeroBuckets::LayerParams(int64_t global_layer) const {
  const ModelSpec& m = shard_->local_model();
  if (!shards_params_) return BlockWeightsAt(shard_->layout(), m, global_layer, params_);
  const Bucket& k = buckets_[layer(global_layer)];
  CHECK(!k.params.empty()) << "layer " << global_layer << " used while not gathered";
  return BlockWeightsAt(k.layout, m, global_layer, k.params.f());
}

BlockWeights<float> ZeroBuckets::LayerGrads(int64_t global_layer) const {
  const ModelSpec& m = shard_->local_model();
  if (!shards_grads_) return BlockWeightsAt(shard_->layout(), m, global_layer, grads_);
  const Bucket& k = buckets_[layer(global_layer)];
  CHECK(!k.grads.empty()) << "layer " << global_layer << "'s gradient bucket is not open";
  return BlockWeightsAt(k.layout, m, global_layer, k.grads.f());
}

float* ZeroBuckets::ParamState(int64_t offset) const {
  return params_ + (shards_params_ ? offset - shard_begin_ : offset);
}

float* ZeroBuckets::GradState(int64_t offset) const {
  return grads_ + (shards_grads_ ? offset - shard_begin_ : offset);
}

Status ZeroBuckets::Gather(int b, int also) {
  if (!shards_params_) return Status::Ok();
  for (const int i : {b, also}) {
    if (i < 0 || !buckets_[i].params.empty()) continue;
    Bucket& k = buckets_[i];
    SHARDSIM_ASSIGN_OR_RETURN(
        k.params, ctx_->Zeros(MemoryKind::kOther, k.size(), "ZeRO-3 gathered parameters"));
    const int64_t from = std::max(k.begin, shard_begin_), to = std::min(k.end, shard_end_);
    if (from < to)
      ctx_->mem().Copy(k.params.f() + (from - k.begin), params_ + (from - shard_begin_),
                       (to - from) * kFloat);
    SHARDSIM_RETURN_IF_ERROR(
        ctx_->Comm(Phase::kDpComm, static_cast<double>(k.size() * kFloat),
                   [&] { return ctx_->comm().AllReduceSum(Group::kDp, k.params.f(), k.size()); }));
  }
  return Status::Ok();
}

void ZeroBuckets::Release(int b) {
  if (shards_params_ && b >= 0) buckets_[b].params.Reset();
}

Status ZeroBuckets::OpenGrads(int b) {
  CHECK(!shards_grads_ || b >= 0) << "no such bucket";
  if (!shards_grads_ || !buckets_[b].grads.empty()) return Status::Ok();
  SHARDSIM_ASSIGN_OR_RETURN(buckets_[b].grads, ctx_->Zeros(MemoryKind::kGradients,
                                                           buckets_[b].size(), "gradient bucket"));
  return Status::Ok();
}

Status ZeroBuckets::ReduceGrads(int b) {
  if (!shards_grads_) return Status::Ok();
  CHECK(b >= 0) << "no such bucket";
  Bucket& k = buckets_[b];
  CHECK(!k.grads.empty()) << "bucket " << b << " reduced while not open";
  Collectives& comm = ctx_->comm();
  // SP: replicated tensors saw only this rank's rows; sum them over the TP group first.
  const std::vector<ParamTensor>& tensors = shard_->layout().tensors();
  for (const size_t i : k.tensors) {
    if (!shard_->PartialOverTp(i)) continue;
    float* g = k.grads.f() + (tensors[i].offset - k.begin);
    SHARDSIM_RETURN_IF_ERROR(
        ctx_->Comm(Phase::kTpComm, static_cast<double>(tensors[i].size() * kFloat),
                   [&] { return comm.AllReduceSum(Group::kTp, g, tensors[i].size()); }));
  }
  SHARDSIM_RETURN_IF_ERROR(ctx_->Comm(Phase::kDpComm, static_cast<double>(k.size() * kFloat), [&] {
    return comm.AllReduceSum(Group::kDp, k.grads.f(), k.size());
  }));
  const int64_t from = std::max(k.begin, shard_begin_), to = std::min(k.end, shard_end_);
  if (from < to)
    ctx_->k().Add(grads_ + (from - shard_begin_), k.grads.f() + (from - k.begin), to - from);
  k.grads.Reset();
  return Status::Ok();
}

Status ZeroBuckets::AllGatherParams(int64_t per) {
  CHECK(shards_grads_ && !shards_params_) << "the whole-buffer all-gather is ZeRO-2's";
  int64_t largest = 0;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    if (layer_of_[b] >= 0) largest = std::max(largest, buckets_[b].size());
  }
  const int64_t slice = std::clamp<int64_t>((largest + dp_ - 1) / dp_, 1, per);
  SHARDSIM_ASSIGN_OR_RETURN(DeviceBuffer all,
                            ctx_->Alloc(MemoryKind::kOther, dp_ * slice, "parameter all-gather"));
  const int r = ctx_->comm().rank(Group::kDp);
  for (int64_t at = 0; at < per; at += slice) {
    const int64_t n = std::min(slice, per - at);
    SHARDSIM_RETURN_IF_ERROR(ctx_->Comm(Phase::kDpComm, static_cast<double>(dp_ * n * kFloat), [&] {
      return ctx_->comm().AllGather(Group::kDp, params_ + r * per + at, all.f(), n);
    }));
    for (int64_t q = 0; q < dp_; ++q) {
      if (q != r) ctx_->mem().Copy(params_ + q * per + at, all.f() + q * n, n * kFloat);
    }
  }
  return Status::Ok();
}

}  // namespace shardsim::runtime
