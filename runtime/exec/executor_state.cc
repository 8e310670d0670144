// See executor.h: the state a checkpoint holds and the whole model assembled from the ranks
// (TypedExecutor's FullParams, SaveState / LoadState, SaveStateMap / LoadFullState; reshard.h).
#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "runtime/exec/executor_impl.h"

namespace shardsim::runtime {

template <typename T>
StatusOr<std::vector<float>> TypedExecutor<T>::FullParams() {
  // Each element from the one rank that owns it: its owner in DP under ZeRO >= 1, else DP
  // rank 0; for replicated tensors TP rank 0. The others contribute zeros to a world sum.
  Collectives& comm = backend_->comm();
  std::vector<float> local(total_, 0.0f);
  for (const auto& [begin, end] : zero_->OwnedRanges()) {
    // The dense part and the experts' (from experts_begin_) each from the rank that counts it.
    for (const auto& [from, to] : {std::pair{begin, std::min(end, experts_begin_)},
                                   std::pair{std::max(begin, experts_begin_), end}}) {
      if (from >= to || !CountsOnce(from)) continue;
      StateMemory().CopyToHost(local.data() + from, Master(from), (to - from) * static_cast<int64_t>(sizeof(float)));
    }
  }
  // A tied table's second copy (the same values) is the first stage's to contribute.
  std::fill(local.begin() + TableCopy().first, local.begin() + TableCopy().second, 0.0f);
  const std::vector<ParamTensor>& tensors = shard_.layout().tensors();
  for (size_t i = 0; i < tensors.size() && shard_.tp_rank() != 0; ++i) {
    if (shard_.split(i) != TensorSplit::kReplicated) continue;
    std::fill_n(local.begin() + tensors[i].offset, tensors[i].size(), 0.0f);
  }
  std::vector<float> full(shard_.full_layout().total_size(), 0.0f);
  shard_.Place(local.data(), full.data());
  std::vector<double> sum(full.begin(), full.end());
  SHARDSIM_RETURN_IF_ERROR(comm.AllReduceSumHost(Group::kWorld, sum.data(), static_cast<int64_t>(sum.size())));
  for (size_t i = 0; i < full.size(); ++i) full[i] = static_cast<float>(sum[i]);
  return full;
}

template <typename T>
StatusOr<std::string> TypedExecutor<T>::SaveState() {
  std::string out(reinterpret_cast<const char*>(&adam_step_), sizeof adam_step_);
  for (const DeviceBuffer* b : {&params_, &master_, &moment1_, &moment2_}) {
    const int64_t n = b->bytes();
    out.append(reinterpret_cast<const char*>(&n), sizeof n);
    const size_t at = out.size();
    out.resize(at + static_cast<size_t>(n));
    Memory& where = b == &params_ ? ParamMemory() : StateMemory();
    if (n > 0) where.CopyToHost(out.data() + at, b->data(), n);
  }
  // compress=R: PowerSGD's error feedback and warm-started Q, which carry from step to step.
  for (const auto& [data, floats] : overlap_->PersistentState()) {
    const int64_t n = floats * static_cast<int64_t>(sizeof(float));
    out.append(reinterpret_cast<const char*>(&n), sizeof n);
    const size_t at = out.size();
    out.resize(at + static_cast<size_t>(n));
    if (n > 0) backend_->memory().CopyToHost(out.data() + at, data, n);
  }
  return out;
}

template <typename T>
Status TypedExecutor<T>::LoadState(const std::string& in) {
  size_t at = 0;
  auto take = [&](void* dst, size_t n) {
    if (at + n > in.size()) return false;
    std::memcpy(dst, in.data() + at, n);
    at += n;
    return true;
  };
  int64_t step = 0;
  if (!take(&step, sizeof step) || step < 0) return Status::Error("the checkpoint is truncated");
  const char* names[] = {"working weights", "master weights", "AdamW first moment", "AdamW second moment"};
  int i = 0;
  for (DeviceBuffer* b : {&params_, &master_, &moment1_, &moment2_}) {
    int64_t n = 0;
    if (!take(&n, sizeof n) || n < 0 || at + static_cast<size_t>(n) > in.size()) {
      return Status::Error("the checkpoint is truncated");
    }
    if (n != b->bytes()) {
      return Status::Error("the checkpoint holds " + std::to_string(n) + " bytes of " + names[i] + ", this rank " +
                           std::to_string(b->bytes()) + ": it was saved under another layout or model");
    }
    Memory& where = b == &params_ ? ParamMemory() : StateMemory();
    if (n > 0) where.CopyToDevice(b->data(), in.data() + at, n);
    at += static_cast<size_t>(n);
    ++i;
  }
  for (const auto& [data, floats] : overlap_->PersistentState()) {
    int64_t n = 0;
    if (!take(&n, sizeof n) || n < 0 || at + static_cast<size_t>(n) > in.size()) {
      return Status::Error("the checkpoint holds no PowerSGD state (error feedback, Q) for this rank's compress");
    }
    if (n != floats * static_cast<int64_t>(sizeof(float))) {
      return Status::Error("the checkpoint holds " + std::to_string(n) + " bytes of a PowerSGD state buffer, this rank " +
                           std::to_string(floats * static_cast<int64_t>(sizeof(float))) +
                           ": it was saved under another layout or model");
    }
    if (n > 0) backend_->memory().CopyToDevice(data, in.data() + at, n);
    at += static_cast<size_t>(n);
  }
  if (at != in.size()) return Status::Error("the checkpoint has " + std::to_string(in.size() - at) + " bytes too many");
  adam_step_ = step;
  return Status::Ok();
}

template <typename T>
std::string TypedExecutor<T>::SaveStateMap() {
  // The local ranges this rank counts, as FullParams: owned, counted once over DP (or EDP),
  // less the head stage's copy of a tied table and, on TP ranks but the first, what TP
  // replicates.
  std::vector<std::pair<int64_t, int64_t>> counted;
  for (const auto& [begin, end] : zero_->OwnedRanges()) {
    for (const auto& [from, to] : {std::pair{begin, std::min(end, experts_begin_)},
                                   std::pair{std::max(begin, experts_begin_), end}}) {
      if (from < to && CountsOnce(from)) counted.emplace_back(from, std::min(to, total_));
    }
  }
  std::vector<std::pair<int64_t, int64_t>> skipped{TableCopy()};
  const std::vector<ParamTensor>& tensors = shard_.layout().tensors();
  for (size_t i = 0; i < tensors.size() && shard_.tp_rank() != 0; ++i) {
    if (shard_.split(i) == TensorSplit::kReplicated) skipped.emplace_back(tensors[i].offset, tensors[i].offset + tensors[i].size());
  }
  const bool master_in_weights = !kMixed && !offloaded();  // fp32: AdamW updates the weights
  std::vector<StateRun> runs;
  shard_.ForEachRow([&](const ParamTensor& f, int64_t index, int64_t at, int64_t cols) {
    for (const auto& [b, e] : skipped) {
      if (at >= b && at < e) return;  // a row lies in one tensor
    }
    for (const auto& [from, to] : counted) {
      const int64_t lo = std::max(from, at), hi = std::min(to, at + cols);
      if (lo >= hi) continue;
      StateRun r{.full = f.offset + index + (lo - at), .count = hi - lo, .master_at = 0,
                 .moment_at = zero_->StateIndex(lo), .master_in_weights = master_in_weights};
      r.master_at = master_in_weights ? Master(lo) - params_.f() : Master(lo) - master_.f();
      StateRun* last = runs.empty() ? nullptr : &runs.back();
      if (last && last->full + last->count == r.full && last->master_at + last->count == r.master_at &&
          last->moment_at + last->count == r.moment_at && last->master_in_weights == r.master_in_weights) {
        last->count += r.count;  // contiguous everywhere: one run
      } else {
        runs.push_back(r);
      }
    }
  });
  return EncodeStateMap(shard_.full_layout().total_size(), static_cast<int64_t>(sizeof(T)), runs);
}

template <typename T>
Status TypedExecutor<T>::LoadFullState(const FullState& full) {
  const int64_t n = shard_.full_layout().total_size();
  if (static_cast<int64_t>(full.master.size()) != n || full.moment1.size() != full.master.size() ||
      full.moment2.size() != full.master.size()) {
    return Status::Error("the checkpoint's model has " + std::to_string(full.master.size()) + " parameters, this one " +
                         std::to_string(n));
  }
  std::vector<float> local(static_cast<size_t>(total_));
  for (const auto& [src, dst] : {std::pair{&full.moment1, &moment1_}, std::pair{&full.moment2, &moment2_}}) {
    shard_.Slice(src->data(), local.data());
    for (const auto& [from, to] : zero_->OwnedRanges()) {
      const int64_t end = std::min(to, total_);  // the padding past the last tensor stays zero
      if (from < end) {
        StateMemory().CopyToDevice(dst->f() + zero_->StateIndex(from), local.data() + from,
                                   (end - from) * static_cast<int64_t>(sizeof(float)));
      }
    }
  }
  shard_.Slice(full.master.data(), local.data());
  SHARDSIM_RETURN_IF_ERROR(SetMasterWeights(local));
  adam_step_ = full.adam_step;
  ctx_.Flush();  // the gathers belong to no step
  return Status::Ok();
}

#define SHARDSIM_STATE_MEMBERS(T)                                          \
  template StatusOr<std::vector<float>> TypedExecutor<T>::FullParams();    \
  template StatusOr<std::string> TypedExecutor<T>::SaveState();            \
  template Status TypedExecutor<T>::LoadState(const std::string&);         \
  template std::string TypedExecutor<T>::SaveStateMap();                  \
  template Status TypedExecutor<T>::LoadFullState(const FullState&);
SHARDSIM_STATE_MEMBERS(float)
SHARDSIM_STATE_MEMBERS(Bf16)
#undef SHARDSIM_STATE_MEMBERS

}  // namespace shardsim::runtime
