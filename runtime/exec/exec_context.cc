// See exec_context.h.
#include "runtime/exec/exec_context.h"

#include "src/util/check.h"


namespace shardsim::runtime {

template <typename T>
StatusOr<const T*> ExecContext::Gather(const T* x, DeviceBuffer& tmp, int64_t n_local, int64_t c) {
  if (!sp_ || tp_ == 1) return x;
  SHARDSIM_ASSIGN_OR_RETURN(tmp, Alloc<T>(MemoryKind::kOther, tp_ * n_local * c, "sp all-gather"));
  const double bytes = static_cast<double>(tp_ * n_local * c) * sizeof(T);
  SHARDSIM_RETURN_IF_ERROR(Comm(Phase::kTpComm, bytes, [&] {
    return comm().AllGather(Group::kTp, x, tmp.as<T>(), n_local * c);
  }, SpanLabel::kTpAllGather));
  return static_cast<const T*>(tmp.as<T>());
}

template <typename T>
StatusOr<const T*> ExecContext::StartGather(const T* x, DeviceBuffer& tmp, int64_t n_local,
                                            int64_t c, int64_t* handle) {
  *handle = -1;
  if (!sp_ || tp_ == 1) return x;
  SHARDSIM_ASSIGN_OR_RETURN(tmp, Alloc<T>(MemoryKind::kOther, tp_ * n_local * c, "sp all-gather"));
  const double bytes = static_cast<double>(tp_ * n_local * c) * sizeof(T);
  // Issuing is timed as communication (it is, on a host backend, where MPI copies eagerly).
  SHARDSIM_RETURN_IF_ERROR(Comm(Phase::kTpComm, bytes, [&]() -> Status {
    SHARDSIM_ASSIGN_OR_RETURN(*handle, comm().IallGather(Group::kTp, x, tmp.as<T>(), n_local * c));
    return Status::Ok();
  }, SpanLabel::kTpAllGather));
  return static_cast<const T*>(tmp.as<T>());
}

Status ExecContext::FinishGather(int64_t handle) {
  if (handle < 0) return Status::Ok();
  return Comm(Phase::kTpComm, 0, [&] { return comm().Wait(handle); }, SpanLabel::kTpAllGather);
}

Status ExecContext::FinishReduce(int64_t handle) {
  if (handle < 0) return Status::Ok();
  return Comm(Phase::kTpComm, 0, [&] { return comm().Wait(handle); }, ReduceLabel());
}

Status ExecContext::AllReduceCoalescedOverTp(const std::vector<std::pair<float*, int64_t>>& pieces) {
  int64_t n = 0;
  for (const auto& [p, size] : pieces) n += size;
  if (tp_ == 1 || n == 0) return Status::Ok();
  SHARDSIM_ASSIGN_OR_RETURN(DeviceBuffer flat, Alloc(MemoryKind::kOther, n, "coalesced tp gradients"));
  int64_t at = 0;
  for (const auto& [p, size] : pieces) {
    mem().Copy(flat.f() + at, p, size * static_cast<int64_t>(sizeof(float)));
    at += size;
  }
  SHARDSIM_RETURN_IF_ERROR(Comm(Phase::kTpComm, static_cast<double>(n) * sizeof(float),
                                [&] { return comm().AllReduceSum(Group::kTp, flat.f(), n); },
                                SpanLabel::kSpGradientAllReduce));
  at = 0;
  for (const auto& [p, size] : pieces) {
    mem().Copy(p, flat.f() + at, size * static_cast<int64_t>(sizeof(float)));
    at += size;
  }
  return Status::Ok();
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
                [&] { return comm().AllReduceSum(Group::kTp, partial, n_local * c); }, SpanLabel::kTpAllReduce);
  }
  return Comm(Phase::kTpComm, static_cast<double>(tp_ * n_local * c) * sizeof(T),
              [&] { return comm().ReduceScatterSum(Group::kTp, partial, out, n_local * c); },
              SpanLabel::kTpReduceScatter);
}

template <typename T>
Status ExecContext::StartReduce(T* partial, T* out, int64_t n_local, int64_t c, int64_t* handle) {
  *handle = -1;
  if (tp_ == 1) return Status::Ok();
  // Bytes as Reduce's; issuing is timed as communication, as in StartGather.
  const double bytes = static_cast<double>((sp_ ? tp_ : 1) * n_local * c) * sizeof(T);
  return Comm(Phase::kTpComm, bytes, [&]() -> Status {
    if (sp_) {
      SHARDSIM_ASSIGN_OR_RETURN(*handle, comm().IreduceScatterSum(Group::kTp, partial, out, n_local * c));
    } else {
      SHARDSIM_ASSIGN_OR_RETURN(*handle, comm().IallReduceSum(Group::kTp, partial, n_local * c));
    }
    return Status::Ok();
  }, ReduceLabel());
}

#define SHARDSIM_INSTANTIATE_TP_OPS(T)                                                   \
  template StatusOr<const T*> ExecContext::Gather(const T*, DeviceBuffer&, int64_t, int64_t); \
  template StatusOr<const T*> ExecContext::StartGather(const T*, DeviceBuffer&, int64_t, int64_t, \
                                                       int64_t*);                                 \
  template StatusOr<T*> ExecContext::PartialTarget(T*, DeviceBuffer&, int64_t, int64_t);      \
  template Status ExecContext::Reduce(T*, T*, int64_t, int64_t);                             \
  template Status ExecContext::StartReduce(T*, T*, int64_t, int64_t, int64_t*);
SHARDSIM_INSTANTIATE_TP_OPS(float)
SHARDSIM_INSTANTIATE_TP_OPS(Bf16)
#undef SHARDSIM_INSTANTIATE_TP_OPS

void ExecContext::SetMicrobatch(int32_t microbatch, int32_t chunk) {
  CHECK(!in_pass_) << "SetMicrobatch inside a pass";
  microbatch_ = microbatch;
  chunk_ = chunk;
}

void ExecContext::SetPass(Phase compute, int32_t microbatch, int32_t chunk, SpanLabel part, int32_t layer) {
  CloseSegment();
  compute_ = compute;
  microbatch_ = microbatch;
  chunk_ = chunk;
  layer_ = layer;
  part_ = part;
  in_pass_ = true;
  segment_start_ = Mark();
}

void ExecContext::SwitchCompute(Phase compute, std::optional<SpanLabel> part) {
  CloseSegment();
  compute_ = compute;
  if (part) part_ = *part;
  segment_start_ = Mark();
}

void ExecContext::SetLayer(int32_t layer, SpanLabel first_part) {
  CloseSegment();
  layer_ = layer;
  part_ = first_part;
  segment_start_ = Mark();
}

void ExecContext::SetPart(SpanLabel part) {
  if (part == part_) return;
  CloseSegment();
  part_ = part;
  segment_start_ = Mark();
}

void ExecContext::EndPass() {
  CloseSegment();
  in_pass_ = false;
  layer_ = -1;  // what follows (the pipeline send) is the pass's, not its last layer's
}

void ExecContext::CloseSegment() {
  if (in_pass_) Record(compute_, segment_start_, 0, part_);
}

Status ExecContext::Comm(Phase phase, double bytes, const std::function<Status()>& fn, SpanLabel label) {
  CloseSegment();
  const int64_t start = Mark();
  Status st = fn();
  segment_start_ = Record(phase, start, bytes, label);  // the compute after it starts there
  return st;
}

int64_t ExecContext::Record(Phase phase, int64_t start_mark, double bytes, SpanLabel label) {
  if (timeline_ == nullptr) return -1;
  Pending p;
  p.event.phase = phase;
  p.event.microbatch = microbatch_;
  p.event.chunk = chunk_;
  p.event.layer = layer_;
  p.event.bytes = bytes;
  p.event.label = label;
  // The reductions of the whole step's gradients (ZeRO 0/1, a layer's on the last micro-batch):
  // the step's, as the simulator's tasks, not the micro-batch that issued them.
  if (label == SpanLabel::kDpGradientAllReduce || label == SpanLabel::kDpGradientReduceScatter ||
      label == SpanLabel::kExpertGradientAllReduce || label == SpanLabel::kDpGradientAllReduceQ) {
    p.event.microbatch = p.event.chunk = -1;
  }
  p.start_mark = start_mark;
  p.end_mark = Mark();
  pending_.push_back(p);
  return p.end_mark;
}

void ExecContext::Flush() {
  if (timeline_ == nullptr) return;
  for (Pending& p : pending_) {
    p.event.start_s = backend_->MarkSeconds(p.start_mark);
    p.event.duration_s = backend_->MarkSeconds(p.end_mark) - p.event.start_s;
    timeline_->Record(p.event);
  }
  pending_.clear();
  backend_->ClearMarks();
}

}  // namespace shardsim::runtime
