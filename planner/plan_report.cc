// See plan_report.h.
#include "planner/plan_report.h"

#include <cstdio>
#include <sstream>

#include "src/report/compute_fit.h"
#include "src/report/error_band.h"
#include "src/util/json_writer.h"
#include "src/util/strings.h"

namespace shardsim::planner {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

}  // namespace

std::string ShortLayout(const Layout& l) {
  std::ostringstream o;
  o << "tp" << l.tp << " pp" << l.pp << " dp" << l.dp;
  if (l.cp > 1) o << " cp" << l.cp;
  if (l.ep > 1) o << " ep" << l.ep;
  if (l.own_expert_tp()) o << " etp" << l.etp;  // the experts split apart from TP
  if (l.vpp > 1) o << " vpp" << l.vpp;
  // An uneven split: the first / last stage's layers, or the embedding and loss counted.
  if (l.first_stage_layers > 0) o << " first" << l.first_stage_layers;
  if (l.last_stage_layers > 0) o << " last" << l.last_stage_layers;
  if (l.embedding_in_split) o << " +emb";
  if (l.loss_in_split) o << " +loss";
  o << " mbs" << l.mbs << " z" << l.zero << (l.sp ? " sp" : "");
  // TP overlap, which the planner searches: "ovl" the backward's, "ub" userbuffers' (all), or
  // with separate linears (torchtitan) "async" for its async TP.
  if (l.tp > 1 && l.overlap_tp == TpOverlap::kBackward) o << " ovl";
  if (l.tp > 1 && l.overlap_tp == TpOverlap::kOn) o << (SeparateLinears(l.kernels) ? " async" : " ub");
  o << " " << RecomputeName(l.recompute);
  if (l.pp > 1) o << " " << ScheduleName(l.schedule);
  if (l.offload != Offload::kNone) o << " off:" << OffloadName(l.offload);
  if (l.dtype == DType::kFp8) o << " fp8";  // searched on GPUs with an fp8 rate; bf16 unmarked
  return o.str();
}

double CriticalShare(const Candidate& c, std::initializer_list<Category> cats) {
  const RankResult& r = c.sim.ranks[c.sim.critical];
  double s = 0;
  for (Category k : cats) s += r.breakdown_s[static_cast<int>(k)];
  return s / c.sim.iteration_time_s;
}

namespace {


}  // namespace

std::string PlanText(const ModelSpec& m, const HardwareSpec& hw, const PlanOptions& o,
                     const PlanResult& r, const std::vector<std::string>& warnings) {
  std::ostringstream out;
  out << "shardsim plan: " << m.name << " on " << r.gpus << " x " << hw.gpu.name << " (" << hw.name
      << "), global batch " << o.global_batch << " sequences of " << m.seq_len << " tokens\n";
  for (const std::string& w : warnings) out << "warning: " << w << "\n";
  if (!r.stack.empty()) {
    out << "stack: " << r.stack << " (stacks/" << r.stack << ".yaml"
        << (o.stack_is_default ? "; the default, --stack none searches every layout" : "") << "): "
        << r.stack_refused << " layouts left out as it cannot run them\n";
  }
  out << "layouts: " << r.enumerated << " enumerated, " << r.invalid << " invalid, "
      << r.pruned_memory << " over memory (limit " << Fmt("%.1f", r.memory_limit_bytes / kGiB)
      << " GiB), " << r.dominated << " dominated (same layout with less recompute or offload fits); "
      << r.bounded << " bounded, " << r.estimated << " estimated, " << r.simulated << " simulated; "
      << r.unexamined << " never bounded (their compute alone exceeds what the winner takes)\n\n";
  if (r.ranked.empty()) {
    out << "NO LAYOUT FITS. Closest (least over memory):\n";
    for (const Candidate& c : r.closest) {
      out << "  " << Fmt("%6.1f GiB", c.memory_bytes / kGiB) << "  " << FormatLayout(c.layout) << "\n";
    }
    // Whether the closest may run all the same: the memory band says how far measured peaks
    // have fallen from predictions.
    if (!r.closest.empty()) out << "The closest one's " << MemoryBandText(hw, r.closest.front().memory_bytes) << "\n";
    out << "What would help the closest one:\n";
    for (const std::string& a : r.advice) out << "  - " << a << "\n";
    return out.str();
  }
  char line[400];
  std::snprintf(line, sizeof line, "%-3s %-62s %10s %9s %6s %9s %8s %7s %7s\n", "#", "layout",
                "iter (s)", "TFLOP/s", "MFU", "mem GiB", "headroom", "bubble", "comm");
  out << line;
  int i = 1;
  for (const Candidate& c : r.ranked) {
    std::snprintf(line, sizeof line, "%-3d %-62s %10.4f %9.1f %5.1f%% %9.1f %7.1f%% %6.1f%% %6.1f%%\n", i++,
                  ShortLayout(c.layout).c_str(), c.sim.iteration_time_s, c.sim.model_tflops_per_gpu,
                  100 * c.sim.mfu, c.sim.peak_memory_bytes / kGiB,
                  100 * (1 - c.sim.peak_memory_bytes / r.memory_limit_bytes), 100 * CriticalShare(c, {Category::kBubble}),
                  100 * ExposedCommFraction(c));
    out << line;
  }
  if (r.ties > 1) {
    const double fastest = r.fastest ? r.fastest->sim.iteration_time_s : r.ranked.front().sim.iteration_time_s;
    out << "ties: " << r.ties << " layouts within " << Fmt("%.1f", 100 * o.tie_tolerance) << " % of the fastest ("
        << Fmt("%.4f", fastest) << " s); row 1 is the most robust of them, the others follow by time\n";
  }
  const Candidate& w = r.ranked.front();
  out << "\nwinner: " << FormatLayout(w.layout) << "\n";
  out << "  " << Fmt("%.4f", w.sim.iteration_time_s) << " s per iteration, "
      << Fmt("%.0f", w.sim.tokens_per_s) << " tokens/s, " << Fmt("%.1f", w.sim.model_tflops_per_gpu)
      << " TFLOP/s per GPU, MFU " << Fmt("%.1f %%", 100 * w.sim.mfu) << "\n";
  out << "  " << ComputeFitText(hw) << "\n  " << ErrorBandText(hw, w.layout.dtype, w.sim.iteration_time_s) << "\n";
  out << "  " << MemoryBandText(hw, w.sim.peak_memory_bytes) << "\n";
  if (o.objective == Objective::kTimeToTrain || o.objective == Objective::kCost) {
    const double score = Score(w, m, hw, o);
    out << "  " << (o.objective == Objective::kCost ? "cost to train: $" + Fmt("%.0f", score)
                                                    : "time to train: " + Fmt("%.1f", score / 86400) + " days")
        << " for " << Fmt("%.3g", o.tokens) << " tokens\n";
  }
  if (!r.why.empty()) out << "why: " << r.why << "\n";
  return out.str();
}

std::string ParetoText(const ModelSpec& m, const std::vector<PlanResult>& results) {
  std::ostringstream out;
  out << "\nbest plan per GPU count:\n";
  char line[300];
  std::snprintf(line, sizeof line, "  %6s %12s %14s %12s %10s  %s\n", "GPUs", "iter (s)", "tokens/s",
                "tok/s/GPU", "scaling", "layout");
  out << line;
  double base = 0;
  for (const PlanResult& r : results) {
    if (r.ranked.empty()) {
      std::snprintf(line, sizeof line, "  %6lld %12s\n", static_cast<long long>(r.gpus), "no fit");
      out << line;
      continue;
    }
    const Candidate& w = r.ranked.front();
    const double per_gpu = w.sim.tokens_per_s / static_cast<double>(r.gpus);
    if (base == 0) base = per_gpu;
    std::snprintf(line, sizeof line, "  %6lld %12.4f %14.0f %12.1f %9.1f%%  %s\n",
                  static_cast<long long>(r.gpus), w.sim.iteration_time_s, w.sim.tokens_per_s, per_gpu,
                  100 * per_gpu / base, ShortLayout(w.layout).c_str());
    out << line;
  }
  (void)m;
  return out.str();
}

std::string PlanJson(const ModelSpec& m, const HardwareSpec& hw, const PlanOptions& o,
                     const std::vector<PlanResult>& results, const std::vector<std::string>& warnings) {
  JsonWriter w;
  w.BeginObject().Field("model", m.name).Field("hardware", hw.name);
  w.Field("global_batch", o.global_batch).Field("seq_len", m.seq_len);
  w.Key("warnings").BeginArray();
  for (const std::string& s : warnings) w.Value(s);
  w.EndArray();
  w.Field("objective", o.objective == Objective::kThroughput ? "throughput"
                       : o.objective == Objective::kTimeToTrain ? "time-to-train" : "cost");
  w.Key("results").BeginArray();
  for (const PlanResult& r : results) {
    w.BeginObject().Field("gpus", r.gpus).Field("enumerated", r.enumerated).Field("invalid", r.invalid);
    w.Field("pruned_memory", r.pruned_memory).Field("dominated", r.dominated).Field("bounded", r.bounded).Field("estimated", r.estimated).Field("simulated", r.simulated).Field("unexamined", r.unexamined);
    w.Field("memory_limit_bytes", r.memory_limit_bytes).Field("fits", !r.ranked.empty());
    w.Field("tie_tolerance", o.tie_tolerance).Field("ties", r.ties);
    if (r.fastest) {
      w.Key("fastest").BeginObject().Field("layout", FormatLayout(r.fastest->layout));
      w.Field("iteration_time_s", r.fastest->sim.iteration_time_s).EndObject();
    }
    if (!r.stack.empty()) {
      w.Field("stack", r.stack).Field("stack_is_default", o.stack_is_default).Field("stack_refused", r.stack_refused);
    }
    if (!r.ranked.empty()) {
      // The winner's band (every ranked layout of one plan shares the GPU; the precision is
      // the winner's).
      ComputeFitJson(w, hw);
      ErrorBandJson(w, hw, r.ranked.front().layout.dtype, r.ranked.front().sim.iteration_time_s);
      MemoryBandJson(w, hw, r.ranked.front().sim.peak_memory_bytes);
    } else if (!r.closest.empty()) {
      MemoryBandJson(w, hw, r.closest.front().memory_bytes);  // the closest's: whether it may run
    }
    w.Key("ranked").BeginArray();
    for (const Candidate& c : r.ranked) {
      w.BeginObject().Field("layout", FormatLayout(c.layout));
      w.Field("iteration_time_s", c.sim.iteration_time_s).Field("estimated_iteration_time_s", c.estimated_time_s);
      w.Field("tokens_per_s", c.sim.tokens_per_s).Field("model_tflops_per_gpu", c.sim.model_tflops_per_gpu);
      w.Field("hardware_tflops_per_gpu", c.sim.hardware_tflops_per_gpu).Field("mfu", c.sim.mfu);
      w.Field("peak_memory_bytes", c.sim.peak_memory_bytes);
      w.Field("headroom_bytes", r.memory_limit_bytes - c.sim.peak_memory_bytes);
      w.Field("bubble_fraction", CriticalShare(c, {Category::kBubble})).Field("exposed_comm_fraction", ExposedCommFraction(c));
      w.Field("score", Score(c, m, hw, o)).EndObject();
    }
    w.EndArray();
    w.Field("why", r.why);
    w.Key("closest").BeginArray();
    for (const Candidate& c : r.closest) {
      w.BeginObject().Field("layout", FormatLayout(c.layout)).Field("peak_memory_bytes", c.memory_bytes).EndObject();
    }
    w.EndArray();
    w.Key("advice").BeginArray();
    for (const std::string& a : r.advice) w.Value(a);
    w.EndArray().EndObject();
  }
  w.EndArray().EndObject();
  return w.str();
}

}  // namespace shardsim::planner
