// ExecContext: what the executor's layers share on one rank: the backend, the tensor-parallel
// group's f/g operators, and the measured timeline, with time split into non-overlapping
// segments (compute is paused while a collective runs, so phases sum to the step time).
// Segment boundaries are the backend's marks (CUDA events on a GPU: no wait at each one),
// turned into timeline events by Flush.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/exec/fp8_weight_cache.h"
#include "runtime/exec/timeline.h"
#include "src/util/status.h"

namespace shardsim::runtime {

class ExecContext {
 public:
  ExecContext(Backend* backend, int64_t tp, bool sp, Timeline* timeline, bool overlap_tp = false)
      : backend_(backend), tp_(tp), sp_(sp), overlap_tp_(overlap_tp), timeline_(timeline) {}

  Backend& backend() { return *backend_; }
  Kernels& k() { return backend_->kernels(); }
  Memory& mem() { return backend_->memory(); }
  Collectives& comm() { return backend_->comm(); }
  int64_t tp() const { return tp_; }
  bool sp() const { return sp_; }
  // The layout's overlap_tp (backward or on), where it applies (tp > 1): in the backward pass,
  // the input gradient's reduction of the column-parallel layers (StartReduce) and, with SP, the
  // re-gather of their input (StartGather) run under GEMMs. The forward's TP collectives stay
  // blocking (on asks for them hidden too; run_command.cc warns).
  bool overlap_tp() const { return overlap_tp_ && tp_ > 1; }
  // dtype=fp8: the Transformer Engine modules' GEMMs run in fp8 (te_gemm.h; the storage type
  // is then Bf16, and the backend has Fp8Kernels).
  bool fp8() const { return fp8_; }
  void set_fp8(bool on) { fp8_ = on; }
  Fp8WeightCache& fp8_weights() { return fp8_weights_; }

  // The storage type T's kernels (float, or Bf16 under mixed precision).
  template <typename T>
  TypedKernels<T>& kt() { return k().of<T>(); }

  // n elements of T.
  template <typename T = float>
  StatusOr<DeviceBuffer> Alloc(MemoryKind kind, int64_t n, const char* what) {
    return mem().AllocateOf<T>(kind, n, what);
  }
  // Allocated and zeroed.
  template <typename T = float>
  StatusOr<DeviceBuffer> Zeros(MemoryKind kind, int64_t n, const char* what) {
    SHARDSIM_ASSIGN_OR_RETURN(DeviceBuffer b, Alloc<T>(kind, n, what));
    mem().Zero(b.data(), b.bytes());
    return b;
  }

  // --- Tensor parallelism: Megatron's f and g (Shoeybi et al. 2019, Fig. 3) and their
  // sequence-parallel forms (Korthikanti et al. 2022, Sec. 4.2.2). Under SP a rank holds
  // rows [r n_local, (r+1) n_local) of every (n, c) tensor outside the parallel regions.
  //
  // Gather: rows (n_local, c) -> all rows (n, c): `x` itself without SP; all-gathered into
  // `tmp` with SP (the input of a column-parallel layer, and the backward of Reduce).
  template <typename T>
  StatusOr<const T*> Gather(const T* x, DeviceBuffer& tmp, int64_t n_local, int64_t c);
  // Gather's all-gather started without waiting: the rows are in the returned buffer once
  // FinishGather(*handle) returns (Megatron-LM starts SP's backward re-gather of a layer's input
  // before the input-gradient GEMM and waits for it before the weight-gradient GEMM). Without
  // SP, `x` itself and *handle = -1.
  template <typename T>
  StatusOr<const T*> StartGather(const T* x, DeviceBuffer& tmp, int64_t n_local, int64_t c,
                                 int64_t* handle);
  Status FinishGather(int64_t handle);
  // Where a row-parallel product (n, c) goes before Reduce: `out` itself, or `tmp` with SP.
  template <typename T>
  StatusOr<T*> PartialTarget(T* out, DeviceBuffer& tmp, int64_t n_local, int64_t c);
  // Reduce: a partial sum (n, c) over the TP group -> this rank's rows of the sum: all-reduce
  // in place (`out` == `partial`) or reduce-scatter into `out` (n_local, c) with SP (the
  // output of a row-parallel layer, and the backward of Gather). Nothing when tp = 1.
  template <typename T>
  Status Reduce(T* partial, T* out, int64_t n_local, int64_t c);
  // Reduce started without waiting: the sum is in `out` once FinishReduce(*handle) returns, and
  // `partial` (and `out`) stay alive and untouched until then (Megatron-LM starts the input
  // gradient's all-reduce or reduce-scatter of a column-parallel layer before its weight-
  // gradient GEMM and waits for it after). *handle = -1 when there is nothing to wait for
  // (tp = 1).
  template <typename T>
  Status StartReduce(T* partial, T* out, int64_t n_local, int64_t c, int64_t* handle);
  Status FinishReduce(int64_t handle);  // the same wait, named as the reduction
  // The TP reduction's name: SP's reduce-scatter, else the all-reduce.
  SpanLabel ReduceLabel() const { return sp_ ? SpanLabel::kTpReduceScatter : SpanLabel::kTpAllReduce; }

  // fp32 gradient pieces (pointer, elements) summed over the TP group in one all-reduce of
  // their concatenation (packed into a transient buffer and unpacked): SP's replicated
  // tensors, coalesced as Megatron-LM's _allreduce_layernorm_grads does. Nothing when there
  // are no pieces or tp = 1.
  Status AllReduceCoalescedOverTp(const std::vector<std::pair<float*, int64_t>>& pieces);

  // --- Timeline. Compute runs in the current phase (forward, backward or recompute) between
  // the calls below; Comm pauses it for the duration of `fn`.
  // Opens a compute pass on `part` of `layer` (the first it runs; -1: the embedding or head).
  void SetPass(Phase compute, int32_t microbatch, int32_t chunk, SpanLabel part = SpanLabel::kNone,
               int32_t layer = -1);
  // Outside a pass: the micro-batch and chunk the next spans are about (a pass's receive,
  // recorded before the pass opens).
  void SetMicrobatch(int32_t microbatch, int32_t chunk);
  // Continues the open pass on `layer`, on `first_part` (the part of it the pass runs first:
  // attention forward, the MLP backward): the spans of each layer apart, as the simulator's.
  void SetLayer(int32_t layer, SpanLabel first_part);
  int32_t layer() const { return layer_; }
  // Continues the open pass as another compute phase (recompute inside a backward pass), on
  // `part` when given.
  void SwitchCompute(Phase compute, std::optional<SpanLabel> part = std::nullopt);
  // Continues the open pass on another part of the model (attention, MLP, ...: the span label
  // the simulator's task names carry).
  void SetPart(SpanLabel part);
  SpanLabel part() const { return part_; }
  void EndPass();  // closes the open compute segment
  // Runs fn as a `phase` span of `bytes` named by `label` (the collective, as the simulator
  // names it); the compute segment around it is closed before and reopened after.
  Status Comm(Phase phase, double bytes, const std::function<Status()>& fn, SpanLabel label = SpanLabel::kNone);
  // A mark of the work issued so far (-1 without a timeline).
  int64_t Mark() { return timeline_ == nullptr ? -1 : backend_->Mark(); }
  // Records [start, a mark now) as `phase` with the current micro-batch and chunk; returns the
  // end mark.
  int64_t Record(Phase phase, int64_t start_mark, double bytes = 0, SpanLabel label = SpanLabel::kNone);
  // Resolves the marks of everything recorded so far into the timeline (waits for the work).
  void Flush();

 private:
  struct Pending {
    TimelineEvent event;  // without its times
    int64_t start_mark, end_mark;
  };
  void CloseSegment();

  Backend* backend_;
  int64_t tp_;
  bool sp_;
  bool overlap_tp_;
  bool fp8_ = false;
  Fp8WeightCache fp8_weights_;
  Timeline* timeline_;
  bool in_pass_ = false;
  Phase compute_ = Phase::kForward;
  SpanLabel part_ = SpanLabel::kNone;
  int32_t microbatch_ = -1, chunk_ = -1, layer_ = -1;
  int64_t segment_start_ = -1;   // mark
  std::vector<Pending> pending_;  // recorded, not yet flushed
};

}  // namespace shardsim::runtime
