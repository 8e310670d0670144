// See exec_context.h.
#include "runtime/exec/exec_context.h"

namespace shardsim::runtime {

StatusOr<DeviceBuffer> ExecContext::Alloc(MemoryKind kind, int64_t floats, const char* what) {
  return mem().AllocateFloats(kind, floats, what);
}

StatusOr<DeviceBuffer> ExecContext::Zeros(MemoryKind kind, int64_t floats, const char* what) {
  SHARDSIM_ASSIGN_OR_RETURN(DeviceBuffer b, Alloc(kind, floats, what));
  mem().Zero(b.data(), b.bytes());
  return b;
}

StatusOr<const float*> ExecContext::Gather(const float* x, DeviceBuffer& tmp, int64_t n_local,
                                           int64_t c) {
  if (!sp_ || tp_ == 1) return x;
  SHARDSIM_ASSIGN_OR_RETURN(tmp, Alloc(MemoryKind::kOther, tp_ * n_local * c, "sp all-gather"));
  const double bytes = static_cast<double>(tp_ * n_local * c) * sizeof(float);
  SHARDSIM_RETURN_IF_ERROR(Comm(Phase::kTpComm, bytes, [&] {
    return comm().AllGather(Group::kTp, x, tmp.f(), n_local * c);
  }));
  return static_cast<const float*>(tmp.f());
}

StatusOr<float*> ExecContext::PartialTarget(float* out, DeviceBuffer& tmp, int64_t n_local,
                                            int64_t c) {
  if (!sp_ || tp_ == 1) return out;
  SHARDSIM_ASSIGN_OR_RETURN(tmp, Alloc(MemoryKind::kOther, tp_ * n_local * c, "sp partial sum"));
  return tmp.f();
}

Status ExecContext::Reduce(float* partial, float* out, int64_t n_local, int64_t c) {
  if (tp_ == 1) return Status::Ok();
  if (!sp_) {
    return Comm(Phase::kTpComm, static_cast<double>(n_local * c) * sizeof(float),
                [&] { return comm().AllReduceSum(Group::kTp, partial, n_local * c); });
  }
  return Comm(Phase::kTpComm, static_cast<double>(tp_ * n_local * c) * sizeof(float),
              [&] { return comm().ReduceScatterSum(Group::kTp, partial, out, n_local * c); });
}

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
