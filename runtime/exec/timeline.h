// Timeline: what one rank measured during a run, as timed spans of the simulator's streams and
// breakdown categories, so `shardsim run --trace` writes the same Chrome trace as
// `simulate --trace` and run.json's time breakdown uses simulate --json's keys.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "runtime/backend/backend.h"
#include "src/sim/program.h"
#include "src/util/status.h"

namespace shardsim::runtime {

// What a rank can be doing in a measured span. Each phase lies on one simulator stream and
// counts towards one breakdown category (src/sim/program.h):
//   phase              stream        category   what
//   kForward           compute       compute    a forward pass (a layer, or the embedding or
//                                               lm head + loss with layer -1, as simulated)
//   kBackward          compute       compute    a backward pass (input and weight gradients)
//   kRecompute         compute       recompute  the forward rerun before a backward
//   kTpComm            tp            tp_comm    a tensor-parallel all-reduce (either pass)
//   kPpSendForward     pp-forward    pp_comm    sending activations to the next stage
//   kPpSendBackward    pp-backward   pp_comm    sending gradients to the previous stage
//   kPpWait            compute       bubble     blocked in a pipeline receive: the compute
//                                               stream idles (this includes the message's own
//                                               transfer, which the simulator charges to the
//                                               sender's pp stream)
//   kDpComm            dp            dp_comm    a data-parallel all-reduce / reduce-scatter /
//                                               all-gather (ZeRO), gradients or weights
//   kOptimizer         compute       optimizer  the optimizer step (clipping norm included)
//   kOffload           offload       offload    offload: gradients copied to host memory, the
//                                               updated weights copied back
//   kHostOptimizer     offload       optimizer  offload: AdamW on the host (ZeRO-Offload's
//                                               CPU Adam, the simulator's "cpu adam")
//   kCpComm            cp            cp_comm    context parallelism: the keys' and values'
//                                               all-gather, their gradients' reduce-scatter
//   kEpComm            ep            ep_comm    expert parallelism: the tokens' all-to-all to
//                                               the experts and back (and the routing's)
enum class Phase : uint8_t {
  kForward,
  kBackward,
  kRecompute,
  kTpComm,
  kPpSendForward,
  kPpSendBackward,
  kPpWait,
  kDpComm,
  kOptimizer,
  kOffload,
  kHostOptimizer,
  kCpComm,
  kEpComm
};
inline constexpr int kPhaseCount = 13;

// What a span is at the simulator's granularity, so that a measured trace names its spans as
// `simulate --trace` names the same work (src/cost/layer_plan.cc's task names): for a compute
// phase the part of the model it ran (attention, MLP, ...: the name is the part and the pass,
// "attention forward", "mlp backward", "lm head + loss forward"); for a transfer the
// collective ("tp all-reduce", "zero-2 gradient reduce-scatter", ...). kNone: the phase's own
// name (PhaseName).
enum class SpanLabel : uint8_t {
  kNone,
  // Compute: the part of the model.
  kEmbedding,
  kAttention,
  kAttentionCore,  // the attention core alone (selective recompute)
  kMlp,
  kRouter,
  kExperts,
  kMlpResidual,    // an MoE layer's residual add after the combine
  kHead,           // the lm head and the loss
  kWeightGradients,  // zero-bubble's W pass
  kOptimizerStep,
  // Transfers: the collective.
  kTpAllReduce,
  kTpAllGather,
  kTpReduceScatter,
  kSpGradientAllReduce,
  kCpKvExchange,
  kCpDkDvReduceScatter,
  kEpDispatch,
  kEpCombine,
  kPpSendActivations,
  kPpSendGradients,
  kReceiveActivations,
  kReceiveGradients,
  kDpGradientAllReduce,
  kDpGradientReduceScatter,
  kZero2GradientReduceScatter,
  kZero3GradientReduceScatter,
  kZero3ParameterAllGather,
  kZero3ExpertAllGather,
  kDpParameterAllGather,
  kExpertParameterAllGather,
  kEmbeddingGradientAllReduce,
  kExpertGradientAllReduce,
  kExpertGradientReduceScatter,
  kGradientsToHost,
  kWeightsToDevice,
  kParametersToDevice,
  kCpuAdam,
  // Work the simulator does not price (a few bytes each), named for what it is.
  kGradNormAllReduce,  // the global gradient norm's sum over the world (clipping)
  kEpRouting,          // MoE routing metadata over the EP group (slots, combine weights)
  // Gradient compression (PowerSGD, src/cost/grad_compression.h): the compressor's kernels, and
  // the second all-reduce of a bucket, its Q factors (the first is kDpGradientAllReduce).
  kGradientCompression,
  kDpGradientAllReduceQ,
};
inline constexpr int kSpanLabelCount = 43;
// The span's name in a trace: the simulator's task name for its label and phase, or
// PhaseName(phase) without a label.
std::string SpanName(Phase phase, SpanLabel label);

const char* PhaseName(Phase p);   // "forward", "backward", ..., "pp_wait", "optimizer"
Stream PhaseStream(Phase p);      // the simulator stream the phase lies on
Category PhaseCategory(Phase p);  // the breakdown category the phase counts towards
const char* StreamOf(Phase p);    // StreamName(PhaseStream(p)): "compute", "tp", ...
const char* CategoryOf(Phase p);  // CategoryName(PhaseCategory(p)): "compute", "bubble", ...

// One measured span. Times in seconds on the backend's clock (Backend::Now).
struct TimelineEvent {
  Phase phase = Phase::kForward;
  int32_t microbatch = -1, chunk = -1, layer = -1;  // -1: not about one
  double start_s = 0;
  double duration_s = 0;
  double bytes = 0;  // communication phases: bytes this rank sent or reduced; else 0
  SpanLabel label = SpanLabel::kNone;
};

// Seconds per breakdown category (every CategoryName key of simulate --json, 0 when none),
// plus the compute category split by pass.
struct TimelineTotals {
  std::map<std::string, double> by_category_s;
  double forward_s = 0;
  double backward_s = 0;
};
TimelineTotals Totals(const std::vector<TimelineEvent>& events);

// The spans one rank recorded, in the order they ended.
class Timeline {
 public:
  // Times its scope: reads the clock when built and when destroyed, then records `event` with
  // those times. Set bytes and the like through event() before it ends.
  class Span {
   public:
    Span(Timeline& timeline, std::function<double()> clock, TimelineEvent event);
    ~Span();
    Span(const Span&) = delete;
    Span& operator=(const Span&) = delete;
    TimelineEvent& event() { return event_; }

   private:
    Timeline& timeline_;
    std::function<double()> clock_;
    TimelineEvent event_;
  };

  void Record(const TimelineEvent& event);  // CHECKs duration_s >= 0 and bytes >= 0
  const std::vector<TimelineEvent>& events() const { return events_; }
  void Clear() { events_.clear(); }
  TimelineTotals Totals() const { return runtime::Totals(events_); }

 private:
  std::vector<TimelineEvent> events_;
};

// Fixed-width encoding for gathering over host collectives: kEncodedDoubles per event
// (phase, microbatch, chunk, layer, start_s, duration_s, bytes, label, 1 = an event). Rows of
// zeros are padding and Decode drops them.
inline constexpr int64_t kEncodedDoubles = 9;
std::vector<double> Encode(const std::vector<TimelineEvent>& events);
std::vector<TimelineEvent> Decode(const std::vector<double>& encoded);

// Every world rank's events, indexed by world rank; a collective over Group::kWorld that each
// rank must call. Errors are the collectives'.
StatusOr<std::vector<std::vector<TimelineEvent>>> GatherTimelines(
    Collectives& comm, const std::vector<TimelineEvent>& mine);

// The Chrome trace-event JSON of measured timelines, in ChromeTrace's layout (src/report/
// sim_report.h): process `r` named "rank r (stage stage_of_rank[r])", one thread per simulator
// stream, each span a complete ("X") event named SpanName with cat = CategoryOf, ts and dur in
// microseconds from t0_s, args layer, microbatch, chunk and bytes (when > 0). Ranks' clocks
// must share an origin (one host's monotonic clock). `serialised`: the device cannot overlap
// communication with computation (the hardware description's overlaps_communication false, a
// CPU): collectives and sends lie on the compute thread, where the simulator puts that
// device's. Deterministic for the same input.
std::string MeasuredChromeTrace(const std::vector<std::vector<TimelineEvent>>& per_rank,
                                const std::vector<int32_t>& stage_of_rank, double t0_s, bool serialised = false);

}  // namespace shardsim::runtime
