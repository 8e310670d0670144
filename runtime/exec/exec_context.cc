// See exec_context.h.
#include "runtime/exec/exec_context.h"

namespace shardsim::runtime {

template <typename T>
StatusOr<const T*> ExecContext::Gather(const T* x, DeviceBuffer& tmp, int64_t n_local, int64_t c) {
  if (!sp_ || tp_ == 1) return x;
  SHARDSIM_ASSIGN_OR_RETURN(tmp, Alloc<T>(MemoryKind::kOther, tp_ * n_local * c, "sp all-gather"));
  const double bytes = static_cast<double>(tp_ * n_local * c) * sizeof(T);
  SHARDSIM_RETURN_IF_ERROR(Comm(Phase::kTpComm, bytes, [&] {
    return comm().AllGather(Group::kTp, x, tmp.as<T>(), n_local * c);
  }));
  return static_cast<const T*>(tmp.as<T>());
}

template <typename T>
StatusOr<T*> ExecContext::PartialTarget(T* out, DeviceBuffer& tmp, int64_t n_local, int64_t c) {
  if (!sp_ || tp_ == 1) return out;
  SHARDSIM_ASSIGN_OR_RETURN(tmp, Alloc<T>(MemoryKind::kOther, tp_ * n_local * c, "sp partial sum"));
  return tmp.as<T>();
}

template <typename T>
Status ExecContext::Reduce(T* partial, T* out, int64_t n_local, int64_t c) {
  if (tp_ == 1) return Status::Ok();
  if (!sp_) {
    return Comm(Phase::kTpComm, static_cast<double>(n_local * c) * sizeof(T),
                [&] { return comm().AllReduceSum(Group::kTp, partial, n_local * c); });
  }
  return Comm(Phase::kTpComm, static_cast<double>(tp_ * n_local * c) * sizeof(T),
              [&] { return comm().ReduceScatterSum(Group::kTp, partial, out, n_local * c); });
}

#define SHARDSIM_INSTANTIATE_TP_OPS(T)                                                   \
  template StatusOr<const T*> ExecContext::Gather(const T*, DeviceBuffer&, int64_t, int64_t); \
  template StatusOr<T*> ExecContext::PartialTarget(T*, DeviceBuffer&, int64_t, int64_t);      \
  template Status ExecContext::Reduce(T*, T*, int64_t, int64_t);
SHARDSIM_INSTANTIATE_TP_OPS(float)
SHARDSIM_INSTANTIATE_TP_OPS(Bf16)
#undef SHARDSIM_INSTANTIATE_TP_OPS

void ExecContext::SetPass(Phase compute, int32_t microbatch, int32_t chunk) {
  CloseSegment();
  compute_ = compute;
  microbatch_ = microbatch;
  chunk_ = chunk;
  layer_ = -1;
  in_pass_ = true;
  segment_start_ = Now();
}

void ExecContext::SwitchCompute(Phase compute) {
  CloseSegment();
  compute_ = compute;
  segment_start_ = Now();
}

void ExecContext::EndPass() {
  CloseSegment();
  in_pass_ = false;
}

void ExecContext::CloseSegment() {
  if (in_pass_) Record(compute_, segment_start_);
}

Status ExecContext::Comm(Phase phase, double bytes, const std::function<Status()>& fn) {
  CloseSegment();
  const double start = Now();
  Status st = fn();
  Record(phase, start, bytes);
  segment_start_ = Now();
  return st;
}

void ExecContext::Record(Phase phase, double start_s, double bytes) {
  if (timeline_ == nullptr) return;
  TimelineEvent e;
  e.phase = phase;
  e.microbatch = microbatch_;
  e.chunk = chunk_;
  e.layer = layer_;
  e.start_s = start_s;
  e.duration_s = Now() - start_s;
  e.bytes = bytes;
  timeline_->Record(e);
}

}  // namespace shardsim::runtime
