// See timeline.h.
#include "runtime/exec/timeline.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "src/report/trace_events.h"
#include "src/util/check.h"
#include "src/util/json_writer.h"

namespace shardsim::runtime {
namespace {

struct PhaseInfo {
  const char* name;
  Stream stream;
  Category category;
};

// Indexed by Phase; the table in timeline.h.
constexpr PhaseInfo kPhases[kPhaseCount] = {
    {"forward", Stream::kCompute, Category::kCompute},
    {"backward", Stream::kCompute, Category::kCompute},
    {"recompute", Stream::kCompute, Category::kRecompute},
    {"tp_comm", Stream::kTp, Category::kTp},
    {"pp_send_forward", Stream::kPpForward, Category::kPp},
    {"pp_send_backward", Stream::kPpBackward, Category::kPp},
    {"pp_wait", Stream::kCompute, Category::kBubble},
    {"dp_comm", Stream::kDp, Category::kDp},
    {"optimizer", Stream::kCompute, Category::kOptimizer},
    {"offload", Stream::kOffload, Category::kOffload},
    {"host_optimizer", Stream::kOffload, Category::kOptimizer},
    {"cp_comm", Stream::kCp, Category::kCp},
    {"ep_comm", Stream::kEp, Category::kEp},
};

const PhaseInfo& Info(Phase p) {
  const int i = static_cast<int>(p);
  CHECK(i >= 0 && i < kPhaseCount) << "phase " << i << " out of range";
  return kPhases[i];
}

// A collective or a pipeline send (or its wait): what a device that cannot overlap runs on its
// compute stream (the simulator's PassBuilder::Finish). Host copies and the host's optimizer
// keep the offload stream.
bool Transfers(Phase p) {
  switch (p) {
    case Phase::kTpComm:
    case Phase::kPpSendForward:
    case Phase::kPpSendBackward:
    case Phase::kDpComm:
    case Phase::kCpComm:
    case Phase::kEpComm: return true;
    default: return false;
  }
}

// A double that must hold an integer in [lo, hi] (an encoded field).
int32_t AsInt(double v, int32_t lo, int32_t hi) {
  CHECK(std::floor(v) == v && v >= lo && v <= hi)
      << "encoded field " << v << " is not an integer in [" << lo << ", " << hi << "]";
  return static_cast<int32_t>(v);
}

// Indexed by SpanLabel: the simulator's names (src/cost/layer_plan.cc). A compute part's
// name is completed by its pass.
constexpr const char* kLabels[kSpanLabelCount] = {
    "",
    "embedding",
    "attention",
    "attention core",
    "mlp",
    "router",
    "experts",
    "mlp residual",
    "lm head + loss",
    "weight gradients",
    "optimizer step",
    "tp all-reduce",
    "tp all-gather",
    "tp reduce-scatter",
    "sp gradient all-reduce",
    "cp k/v exchange",
    "cp dk/dv reduce-scatter",
    "ep all-to-all dispatch",
    "ep all-to-all combine",
    "pp send activations",
    "pp send gradients",
    "receive activations",
    "receive gradients",
    "dp gradient all-reduce",
    "dp gradient reduce-scatter",
    "zero-2 gradient reduce-scatter",
    "zero-3 gradient reduce-scatter",
    "zero-3 parameter all-gather",
    "zero-3 expert all-gather",
    "dp parameter all-gather",
    "expert parameter all-gather",
    "embedding gradient all-reduce",
    "expert gradient all-reduce",
    "expert gradient reduce-scatter",
    "gradients to host",
    "weights to device",
    "parameters to device",
    "cpu adam",
    "gradient norm all-reduce",
    "ep routing exchange",
    "gradient compression",
    "dp gradient all-reduce (q)",
};

}  // namespace

std::string SpanName(Phase phase, SpanLabel label) {
  const int i = static_cast<int>(label);
  CHECK(i >= 0 && i < kSpanLabelCount) << "span label " << i << " out of range";
  if (label == SpanLabel::kNone) {
    switch (phase) {  // the phases that are one task of the simulator's whatever they run
      case Phase::kPpSendForward: return kLabels[static_cast<int>(SpanLabel::kPpSendActivations)];
      case Phase::kPpSendBackward: return kLabels[static_cast<int>(SpanLabel::kPpSendGradients)];
      case Phase::kOptimizer: return kLabels[static_cast<int>(SpanLabel::kOptimizerStep)];
      case Phase::kHostOptimizer: return kLabels[static_cast<int>(SpanLabel::kCpuAdam)];
      default: return PhaseName(phase);
    }
  }
  const bool part = label <= SpanLabel::kHead;  // completed by the pass
  if (!part) return kLabels[i];
  switch (phase) {
    case Phase::kForward: return std::string(kLabels[i]) + " forward";
    case Phase::kBackward: return std::string(kLabels[i]) + " backward";
    case Phase::kRecompute: return std::string(kLabels[i]) + " recompute";
    default: return kLabels[i];
  }
}

const char* PhaseName(Phase p) { return Info(p).name; }
Stream PhaseStream(Phase p) { return Info(p).stream; }
Category PhaseCategory(Phase p) { return Info(p).category; }
const char* StreamOf(Phase p) { return StreamName(PhaseStream(p)); }
const char* CategoryOf(Phase p) { return CategoryName(PhaseCategory(p)); }

TimelineTotals Totals(const std::vector<TimelineEvent>& events) {
  TimelineTotals t;
  for (int c = 0; c < kCategoryCount; ++c)
    t.by_category_s[CategoryName(static_cast<Category>(c))] = 0;
  for (const TimelineEvent& e : events) {
    t.by_category_s[CategoryOf(e.phase)] += e.duration_s;
    if (e.phase == Phase::kForward) t.forward_s += e.duration_s;
    if (e.phase == Phase::kBackward) t.backward_s += e.duration_s;
  }
  return t;
}

Timeline::Span::Span(Timeline& timeline, std::function<double()> clock, TimelineEvent event)
    : timeline_(timeline), clock_(std::move(clock)), event_(event) {
  event_.start_s = clock_();
}

Timeline::Span::~Span() {
  event_.duration_s = clock_() - event_.start_s;
  timeline_.Record(event_);
}

void Timeline::Record(const TimelineEvent& event) {
  CHECK(event.duration_s >= 0) << PhaseName(event.phase) << " span of " << event.duration_s
                               << " s: the clock went backwards";
  CHECK(event.bytes >= 0) << PhaseName(event.phase) << " span of " << event.bytes << " bytes";
  events_.push_back(event);
}

std::vector<double> Encode(const std::vector<TimelineEvent>& events) {
  std::vector<double> out;
  out.reserve(events.size() * kEncodedDoubles);
  for (const TimelineEvent& e : events) {
    out.insert(out.end(), {static_cast<double>(e.phase), static_cast<double>(e.microbatch),
                           static_cast<double>(e.chunk), static_cast<double>(e.layer), e.start_s,
                           e.duration_s, e.bytes, static_cast<double>(e.label), 1.0});
  }
  return out;
}

std::vector<TimelineEvent> Decode(const std::vector<double>& encoded) {
  CHECK(encoded.size() % kEncodedDoubles == 0)
      << encoded.size() << " doubles is not a whole number of " << kEncodedDoubles
      << "-double events";
  std::vector<TimelineEvent> out;
  for (size_t i = 0; i < encoded.size(); i += kEncodedDoubles) {
    const double* r = &encoded[i];
    if (r[8] == 0) continue;  // padding
    CHECK(r[8] == 1) << "encoded event " << i / kEncodedDoubles << " has tag " << r[8];
    TimelineEvent e;
    e.phase = static_cast<Phase>(AsInt(r[0], 0, kPhaseCount - 1));
    e.microbatch = AsInt(r[1], -1, INT32_MAX);
    e.chunk = AsInt(r[2], -1, INT32_MAX);
    e.layer = AsInt(r[3], -1, INT32_MAX);
    e.start_s = r[4];
    e.duration_s = r[5];
    e.bytes = r[6];
    e.label = static_cast<SpanLabel>(AsInt(r[7], 0, kSpanLabelCount - 1));
    out.push_back(e);
  }
  return out;
}

StatusOr<std::vector<std::vector<TimelineEvent>>> GatherTimelines(
    Collectives& comm, const std::vector<TimelineEvent>& mine) {
  const int n = comm.size(Group::kWorld);
  const double count = static_cast<double>(mine.size());
  std::vector<double> counts(n);
  SHARDSIM_RETURN_IF_ERROR(comm.AllGatherHost(Group::kWorld, &count, counts.data(), 1));
  int64_t max_count = 0;
  for (double c : counts) max_count = std::max<int64_t>(max_count, AsInt(c, 0, INT32_MAX));
  std::vector<std::vector<TimelineEvent>> out(n);
  if (max_count == 0) return out;  // every rank sees the same counts, so all skip alike

  // Each rank's events padded with zero rows to max_count: one fixed-size all-gather.
  const int64_t width = max_count * kEncodedDoubles;
  std::vector<double> padded = Encode(mine);
  padded.resize(width, 0.0);
  std::vector<double> all(static_cast<size_t>(n) * width);
  SHARDSIM_RETURN_IF_ERROR(comm.AllGatherHost(Group::kWorld, padded.data(), all.data(), width));
  for (int r = 0; r < n; ++r) {
    const auto begin = all.begin() + r * width;
    out[r] = Decode(
        std::vector<double>(begin, begin + static_cast<int64_t>(counts[r]) * kEncodedDoubles));
  }
  return out;
}

std::string MeasuredChromeTrace(const std::vector<std::vector<TimelineEvent>>& per_rank,
                                const std::vector<int32_t>& stage_of_rank, double t0_s, bool serialised) {
  CHECK(stage_of_rank.size() == per_rank.size())
      << stage_of_rank.size() << " stages for " << per_rank.size() << " ranks";
  JsonWriter w;
  w.BeginObject().Field("displayTimeUnit", "ms").Key("traceEvents").BeginArray();
  for (size_t r = 0; r < per_rank.size(); ++r) {
    WriteRankTraceMetadata(w, static_cast<int64_t>(r), stage_of_rank[r]);
  }
  for (size_t r = 0; r < per_rank.size(); ++r) {
    for (const TimelineEvent& e : per_rank[r]) {
      w.BeginObject()
          .Field("ph", "X")
          .Field("name", SpanName(e.phase, e.label))
          .Field("cat", CategoryOf(e.phase));
      w.Field("pid", static_cast<int64_t>(r))
          .Field("tid", static_cast<int64_t>(serialised && Transfers(e.phase) ? Stream::kCompute : PhaseStream(e.phase)));
      w.Field("ts", (e.start_s - t0_s) * 1e6).Field("dur", e.duration_s * 1e6);
      w.Key("args").BeginObject().Field("layer", static_cast<int64_t>(e.layer));
      w.Field("microbatch", static_cast<int64_t>(e.microbatch));
      w.Field("chunk", static_cast<int64_t>(e.chunk));
      if (e.bytes > 0) w.Field("bytes", e.bytes);
      w.EndObject().EndObject();
    }
  }
  w.EndArray().EndObject();
  return w.str();
}

}  // namespace shardsim::runtime
