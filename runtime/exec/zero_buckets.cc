// See zero_buckets.h. Each bucket is sharded evenly (padded to dp x chunk), so its gradient
// reduction is a reduce-scatter and its parameter gather an all-gather, the collectives and
// volumes the simulator prices (src/sim/program.cc).
#include "runtime/exec/zero_buckets.h"

#include <algorithm>
#include <string>
#include <utility>

#include "runtime/exec/timeline.h"
#include "src/util/check.h"

namespace shardsim::runtime {
namespace {

// Bucket ids (ZeroBuckets::layer_of_): a tensor's global layer, kEmbeddingId, kHeadId,
// kPositionsId, or kExpertsId - layer for an MoE layer's experts.
constexpr int64_t kEmbeddingId = -1, kHeadId = -2, kPositionsId = -3, kExpertsId = -4;

// The bucket id of a tensor. `own_table`: the word embeddings are a bucket of their own, the
// learned positions another (a tied table held on two stages: both stages then shard the table
// alike, so its two copies' reduced chunks line up; Megatron-Core's param_and_grad_buffer puts
// the shared embedding in its own bucket for the same reason).
int64_t BucketId(const std::string& name, bool own_table) {
  if (name.rfind("blocks.", 0) == 0) return std::stoll(name.substr(7, name.find('.', 7) - 7));
  if (IsExpertParam(name)) return kExpertsId - std::stoll(name.substr(8, name.find('.', 8) - 8));  // experts.<layer>.
  if (own_table && name == "embed.positions") return kPositionsId;
  return name.rfind("embed.", 0) == 0 ? kEmbeddingId : kHeadId;
}

constexpr int64_t kFloat = static_cast<int64_t>(sizeof(float));

}  // namespace

template <typename T>
ZeroBuckets<T>::ZeroBuckets(ExecContext* ctx, const RankShard* shard, int zero, int64_t dp,
                            bool overlap, int64_t edp)
    : ctx_(ctx),
      shard_(shard),
      // ZeRO-1 with the experts' replicas alone (dp x cp = 1, edp > 1: etp 1 under TP) buckets
      // too: the dense buckets of one replica each, whole and never exchanged.
      bucketed_(zero >= 1 && (dp > 1 || edp > 1)),
      shards_grads_(zero >= 2 && dp > 1),
      shards_params_(zero >= 3 && dp > 1),
      overlap_(overlap),
      dp_(dp),
      state_size_(shard->layout().total_size()),
      experts_begin_(shard->layout().total_size()) {
  const std::vector<ParamTensor>& tensors = shard->layout().tensors();
  for (const ParamTensor& t : tensors) {
    if (IsExpertParam(t.name)) {
      experts_begin_ = t.offset;
      break;
    }
  }
  if (!bucketed_) return;
  shards_experts_ = edp > 1 && experts_begin_ < shard->layout().total_size();
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].offset >= experts_begin_ && !shards_experts_) break;  // the experts: whole, no bucket
    const int64_t id = BucketId(tensors[i].name, shard->table_on_two_stages());
    if (layer_of_.empty() || layer_of_.back() != id) {
      CHECK(std::find(layer_of_.begin(), layer_of_.end(), id) == layer_of_.end())
          << "the tensors of bucket " << id << " are not contiguous at " << tensors[i].name;
      layer_of_.push_back(id);
      Bucket bucket;
      bucket.begin = bucket.end = tensors[i].offset;
      if (id <= kExpertsId) {  // a layer's experts, over their replicas
        bucket.group = Group::kEdp;
        bucket.replicas = edp;
      } else {
        bucket.replicas = dp;
      }
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
    if (layer_of_[b] == kEmbeddingId) embedding_ = static_cast<int>(b);
    if (layer_of_[b] == kHeadId) head_ = static_cast<int>(b);
    if (layer_of_[b] == kPositionsId) positions_ = static_cast<int>(b);
  }
  state_size_ = 0;
  for (Bucket& k : buckets_) {
    const int64_t r = ctx_->comm().rank(k.group);
    k.chunk = (k.size() + k.replicas - 1) / k.replicas;
    k.own_begin = std::min(k.begin + r * k.chunk, k.end);
    k.own_end = std::min(k.begin + (r + 1) * k.chunk, k.end);
    k.base = state_size_;
    state_size_ += k.chunk;
  }
  if (shards_experts_) {  // the experts are buckets too: no whole region
    experts_begin_ = shard->layout().total_size();
    return;
  }
  experts_base_ = state_size_;
  state_size_ += shard->layout().total_size() - experts_begin_;
}

template <typename T>
std::vector<std::pair<int64_t, int64_t>> ZeroBuckets<T>::OwnedRanges() const {
  if (!bucketed_) return {{0, shard_->layout().total_size()}};
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (const Bucket& k : buckets_) {
    if (k.own_begin < k.own_end) ranges.emplace_back(k.own_begin, k.own_end);
  }
  if (experts_begin_ < shard_->layout().total_size()) ranges.emplace_back(experts_begin_, shard_->layout().total_size());
  return ranges;
}

template <typename T>
int64_t ZeroBuckets<T>::StateIndex(int64_t offset) const {
  if (!bucketed_) return offset;
  if (offset >= experts_begin_) return experts_base_ + (offset - experts_begin_);
  const int b = BucketOf(offset);
  CHECK(b >= 0 && offset >= buckets_[b].own_begin && offset < buckets_[b].own_end)
      << "element " << offset << " is not this rank's";
  return buckets_[b].base + (offset - buckets_[b].own_begin);
}

template <typename T>
int ZeroBuckets<T>::layer(int64_t global_layer) const {
  if (global_layer < 0) return -1;
  const auto it = std::find(layer_of_.begin(), layer_of_.end(), global_layer);
  return it == layer_of_.end() ? -1 : static_cast<int>(it - layer_of_.begin());
}

template <typename T>
int ZeroBuckets<T>::experts(int64_t global_layer) const {
  const auto it = std::find(layer_of_.begin(), layer_of_.end(), kExpertsId - global_layer);
  return it == layer_of_.end() ? -1 : static_cast<int>(it - layer_of_.begin());
}

template <typename T>
int ZeroBuckets<T>::BucketOf(int64_t offset) const {
  for (size_t b = 0; b < buckets_.size(); ++b) {
    if (offset >= buckets_[b].begin && offset < buckets_[b].end) return static_cast<int>(b);
  }
  return -1;
}

template <typename T>
const T* ZeroBuckets<T>::Param(int64_t offset) const {
  if (!shards_params_) return params_ + offset;
  if (offset >= experts_begin_) return params_ + StateIndex(offset);  // this rank's experts, whole
  const int b = BucketOf(offset);
  CHECK(b >= 0 && !buckets_[b].params.empty())
      << "parameter " << offset << " used while not gathered";
  return buckets_[b].params.template as<T>() + (offset - buckets_[b].begin);
}

template <typename T>
float* ZeroBuckets<T>::Grad(int64_t offset) const {
  if (!shards_grads_) return grads_ + offset;
  if (offset >= experts_begin_) return grads_ + StateIndex(offset);  // this rank's experts, whole
  const int b = BucketOf(offset);
  CHECK(b >= 0 && !buckets_[b].grads.empty())
      << "gradient " << offset << " written while no bucket is open";
  return buckets_[b].grads.f() + (offset - buckets_[b].begin);
}

template <typename T>
BlockWeights<T> ZeroBuckets<T>::LayerParams(int64_t global_layer) const {
  const ModelSpec& m = shard_->local_model();
  if (!shards_params_) return BlockWeightsAt(shard_->layout(), m, global_layer, params_);
  const Bucket& k = buckets_[layer(global_layer)];
  CHECK(!k.params.empty()) << "layer " << global_layer << " used while not gathered";
  return BlockWeightsAt(k.layout, m, global_layer, k.params.template as<T>());
}

template <typename T>
BlockWeights<float> ZeroBuckets<T>::LayerGrads(int64_t global_layer) const {
  const ModelSpec& m = shard_->local_model();
  if (!shards_grads_) return BlockWeightsAt(shard_->layout(), m, global_layer, grads_);
  const Bucket& k = buckets_[layer(global_layer)];
  CHECK(!k.grads.empty()) << "layer " << global_layer << "'s gradient bucket is not open";
  return BlockWeightsAt(k.layout, m, global_layer, k.grads.f());
}

template <typename T>
T* ZeroBuckets<T>::ParamState(int64_t offset) const {
  return params_ + (shards_params_ ? StateIndex(offset) : offset);
}

template <typename T>
float* ZeroBuckets<T>::GradState(int64_t offset) const {
  return grads_ + (shards_grads_ ? StateIndex(offset) : offset);
}

template <typename T>
Status ZeroBuckets<T>::Gather(int b, int also) {
  constexpr int64_t kElem = static_cast<int64_t>(sizeof(T));
  if (!shards_params_) return Status::Ok();
  for (const int i : {b, also}) {
    if (i < 0 || !buckets_[i].params.empty()) continue;
    Bucket& k = buckets_[i];
    SHARDSIM_ASSIGN_OR_RETURN(
        k.params, ctx_->template Alloc<T>(MemoryKind::kOther, k.replicas * k.chunk, "ZeRO-3 gathered parameters"));
    const T* mine = params_ + k.base;
    DeviceBuffer up;
    if (params_on_host_) {  // this rank's part up from host memory first (its padding zero)
      const int64_t own = (k.own_end - k.own_begin) * kElem;
      SHARDSIM_ASSIGN_OR_RETURN(up, ctx_->template Zeros<T>(MemoryKind::kOther, k.chunk, "parameter chunk from host"));
      SHARDSIM_RETURN_IF_ERROR(ctx_->Comm(Phase::kOffload, static_cast<double>(own), [&] {
        if (own > 0) ctx_->mem().CopyToDevice(up.data(), params_ + k.base, own);
        return Status::Ok();
      }, SpanLabel::kParametersToDevice));
      mine = up.template as<T>();
    }
    // Rank r's chunk lands at r x chunk: the bucket in order, then padding.
    SHARDSIM_RETURN_IF_ERROR(ctx_->Comm(
        Phase::kDpComm, static_cast<double>(k.replicas * k.chunk * kElem),
        [&] { return ctx_->comm().AllGather(k.group, mine, k.params.template as<T>(), k.chunk); },
        GatherLabel(k)));
  }
  return Status::Ok();
}

template <typename T>
SpanLabel ZeroBuckets<T>::GradientLabel(const Bucket& k) const {
  if (k.group == Group::kEdp) return SpanLabel::kExpertGradientReduceScatter;
  if (!shards_grads_) return SpanLabel::kDpGradientReduceScatter;  // ZeRO-1
  return shards_params_ ? SpanLabel::kZero3GradientReduceScatter : SpanLabel::kZero2GradientReduceScatter;
}

template <typename T>
SpanLabel ZeroBuckets<T>::GatherLabel(const Bucket& k) const {
  if (shards_params_) return k.group == Group::kEdp ? SpanLabel::kZero3ExpertAllGather : SpanLabel::kZero3ParameterAllGather;
  return k.group == Group::kEdp ? SpanLabel::kExpertParameterAllGather : SpanLabel::kDpParameterAllGather;
}

template <typename T>
void ZeroBuckets<T>::Release(int b) {
  if (shards_params_ && b >= 0) buckets_[b].params.Reset();
}

template <typename T>
Status ZeroBuckets<T>::OpenGrads(int b) {
  CHECK(!shards_grads_ || b >= 0) << "no such bucket";
  if (!shards_grads_ || !buckets_[b].grads.empty()) return Status::Ok();
  SHARDSIM_ASSIGN_OR_RETURN(buckets_[b].grads, ctx_->Zeros(MemoryKind::kGradients,
                                                           buckets_[b].replicas * buckets_[b].chunk, "gradient bucket"));
  return Status::Ok();
}

template <typename T>
Status ZeroBuckets<T>::ReduceGrads(int b, bool last_microbatch) {
  if (bucketed_ && !shards_grads_) {  // ZeRO-1
    return overlap_ && last_microbatch && b >= 0 ? IssueReduction(b, /*blocking=*/false) : Status::Ok();
  }
  if (!shards_grads_) return Status::Ok();
  CHECK(b >= 0) << "no such bucket";
  Bucket& k = buckets_[b];
  CHECK(!k.grads.empty()) << "bucket " << b << " reduced while not open";
  CHECK(k.pending < 0) << "bucket " << b << " reduced while its reduction is in flight";
  SHARDSIM_RETURN_IF_ERROR(SumPartialOverTp(k, k.grads.f()));
  // This rank's chunk of the sum over DP, added into its gradient shard.
  SHARDSIM_ASSIGN_OR_RETURN(k.reduced, ctx_->Alloc(MemoryKind::kOther, k.chunk, "reduced chunk"));
  const double bytes = static_cast<double>(k.replicas * k.chunk * kFloat);
  if (!overlap_) {
    SHARDSIM_RETURN_IF_ERROR(ctx_->Comm(Phase::kDpComm, bytes, [&] {
      return ctx_->comm().ReduceScatterSum(k.group, k.grads.f(), k.reduced.f(), k.chunk);
    }, GradientLabel(k)));
    return CompleteReduction(b);
  }
  // Issued (timed as communication, as ZeRO-1's), then the bucket before it completed: it has
  // had this bucket's backward to finish in.
  SHARDSIM_RETURN_IF_ERROR(ctx_->Comm(Phase::kDpComm, bytes, [&]() -> Status {
    SHARDSIM_ASSIGN_OR_RETURN(k.pending, ctx_->comm().IreduceScatterSum(k.group, k.grads.f(), k.reduced.f(), k.chunk));
    return Status::Ok();
  }, GradientLabel(k)));
  SHARDSIM_RETURN_IF_ERROR(WaitReductions());
  in_flight_ = b;
  return Status::Ok();
}

template <typename T>
Status ZeroBuckets<T>::CompleteReduction(int b) {
  Bucket& k = buckets_[b];
  if (k.pending >= 0) {
    SHARDSIM_RETURN_IF_ERROR(ctx_->Comm(Phase::kDpComm, 0, [&] {
      return ctx_->comm().Wait(std::exchange(k.pending, -1));
    }, GradientLabel(k)));
  }
  k.grads.Reset();
  const int64_t n = k.own_end - k.own_begin;
  if (n > 0 && host_grads_ != nullptr) {  // offload: the chunk down, added on the host
    SHARDSIM_ASSIGN_OR_RETURN(DeviceBuffer down, host_->AllocateFloats(MemoryKind::kOther, n, "reduced chunk (host)"));
    SHARDSIM_RETURN_IF_ERROR(ctx_->Comm(Phase::kOffload, static_cast<double>(n * kFloat), [&] {
      ctx_->mem().CopyToHost(down.f(), k.reduced.f(), n * kFloat);
      return Status::Ok();
    }, SpanLabel::kGradientsToHost));
    host_kernels_->f32().Add(host_grads_ + k.base, down.f(), n);
  } else if (n > 0) {
    ctx_->k().f32().Add(grads_ + k.base, k.reduced.f(), n);
  }
  k.reduced.Reset();
  return Status::Ok();
}

template <typename T>
Status ZeroBuckets<T>::WaitReductions() {
  if (in_flight_ < 0) return Status::Ok();
  return CompleteReduction(std::exchange(in_flight_, -1));
}

template <typename T>
Status ZeroBuckets<T>::SumPartialOverTp(const Bucket& k, float* bucket_grads) {
  // SP: replicated tensors saw only this rank's rows; the bucket's summed over the TP group
  // first, in one coalesced all-reduce.
  const std::vector<ParamTensor>& tensors = shard_->layout().tensors();
  std::vector<std::pair<float*, int64_t>> pieces;
  for (const size_t i : k.tensors) {
    if (shard_->PartialOverTp(i)) pieces.emplace_back(bucket_grads + (tensors[i].offset - k.begin), tensors[i].size());
  }
  return ctx_->AllReduceCoalescedOverTp(pieces);
}

template <typename T>
Status ZeroBuckets<T>::IssueReduction(int b, bool blocking) {
  Bucket& k = buckets_[b];
  if (k.pending >= 0 || !k.reduced.empty()) return Status::Ok();  // issued already
  // ZeRO-1: SP's TP sums come after the DP reductions, coalesced (TypedExecutor's
  // ReduceGradients), as Megatron-LM's finalize_model_grads orders them.
  SHARDSIM_ASSIGN_OR_RETURN(k.reduced, ctx_->Alloc(MemoryKind::kOther, k.chunk, "reduced chunk"));
  // The bucket's dp x chunk floats from its first: past its end lie up to dp - 1 of the next
  // bucket's floats (or the buffer's slack), only read, whose sums land in the padding of the
  // last rank's chunk and are never used.
  const float* in = grads_ + k.begin;
  if (k.replicas == 1) {  // a bucket without replicas: its sum is itself
    ctx_->mem().Copy(k.reduced.f(), in, k.chunk * kFloat);
    return Status::Ok();
  }
  const double bytes = static_cast<double>(k.replicas * k.chunk * kFloat);
  if (blocking) {
    return ctx_->Comm(Phase::kDpComm, bytes, [&] {
      return ctx_->comm().ReduceScatterSum(k.group, in, k.reduced.f(), k.chunk);
    }, GradientLabel(k));
  }
  // Issuing is timed as communication (it is, on a host backend, where MPI copies eagerly).
  return ctx_->Comm(Phase::kDpComm, bytes, [&]() -> Status {
    SHARDSIM_ASSIGN_OR_RETURN(k.pending, ctx_->comm().IreduceScatterSum(k.group, in, k.reduced.f(), k.chunk));
    return Status::Ok();
  }, GradientLabel(k));
}

template <typename T>
Status ZeroBuckets<T>::FinishReductions() {
  if (!bucketed_ || shards_grads_) return Status::Ok();
  for (size_t b = 0; b < buckets_.size(); ++b) {
    SHARDSIM_RETURN_IF_ERROR(IssueReduction(static_cast<int>(b), /*blocking=*/true));
  }
  // The issued ones complete (the exposed part of the overlap), then every chunk goes over this
  // rank's ranges: only after all have completed, since their inputs overlap those ranges.
  SHARDSIM_RETURN_IF_ERROR(ctx_->Comm(Phase::kDpComm, 0, [&]() -> Status {
    for (Bucket& k : buckets_) {
      if (k.pending < 0) continue;
      const int64_t handle = std::exchange(k.pending, -1);
      SHARDSIM_RETURN_IF_ERROR(ctx_->comm().Wait(handle));
    }
    return Status::Ok();
  }, SpanLabel::kDpGradientReduceScatter));
  for (Bucket& k : buckets_) {
    if (k.own_begin < k.own_end) {
      ctx_->mem().Copy(grads_ + k.own_begin, k.reduced.f(), (k.own_end - k.own_begin) * kFloat);
    }
    k.reduced.Reset();
  }
  return Status::Ok();
}

template <typename T>
Status ZeroBuckets<T>::AllGatherParams() {
  constexpr int64_t kElem = static_cast<int64_t>(sizeof(T));
  CHECK(bucketed_ && !shards_params_) << "the whole-buffer all-gather is ZeRO-1/2's";
  for (const Bucket& k : buckets_) {
    if (k.replicas == 1) continue;  // whole on this rank already
    DeviceBuffer chunk, all;
    SHARDSIM_ASSIGN_OR_RETURN(chunk, ctx_->template Zeros<T>(MemoryKind::kOther, k.chunk, "parameter chunk"));
    SHARDSIM_ASSIGN_OR_RETURN(all, ctx_->template Alloc<T>(MemoryKind::kOther, k.replicas * k.chunk, "parameter all-gather"));
    if (k.own_begin < k.own_end) {
      ctx_->mem().Copy(chunk.template as<T>(), params_ + k.own_begin, (k.own_end - k.own_begin) * kElem);
    }
    SHARDSIM_RETURN_IF_ERROR(ctx_->Comm(Phase::kDpComm, static_cast<double>(k.replicas * k.chunk * kElem), [&] {
      return ctx_->comm().AllGather(k.group, chunk.template as<T>(), all.template as<T>(), k.chunk);
    }, GatherLabel(k)));
    ctx_->mem().Copy(params_ + k.begin, all.template as<T>(), k.size() * kElem);
  }
  return Status::Ok();
}

template class ZeroBuckets<float>;
template class ZeroBuckets<Bf16>;

}  // namespace shardsim::runtime
