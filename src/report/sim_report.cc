// See sim_report.h.
#include "src/report/sim_report.h"

#include <cstdio>
#include <sstream>

#include "src/report/compute_fit.h"
#include "src/report/error_band.h"
#include "src/report/trace_events.h"
#include "src/util/json_writer.h"
#include "src/util/strings.h"
#include "src/util/units.h"

namespace shardsim {
namespace {

}  // namespace

std::string SimulationText(const ModelSpec& m, const HardwareSpec& hw, const SimResult& r,
                           const std::vector<std::string>& warnings) {
  std::ostringstream out;
  const Layout& l = r.layout;
  out << "shardsim simulate: " << m.name << " on " << l.world() << " x " << hw.gpu.name << " ("
      << hw.name << "), " << (r.full ? "full (every rank)" : "symmetric (one rank per stage)")
      << "\nlayout: " << FormatLayout(l) << "\nsequence length: " << m.seq_len << " tokens\n";
  for (const std::string& w : warnings) out << "warning: " << w << "\n";
  out << "simulated " << r.tasks << " tasks, " << r.events << " events on " << r.ranks.size() << " ranks";
  if (r.simulated_ranks < static_cast<int64_t>(r.ranks.size())) {
    out << " (TP peers in lockstep: " << r.simulated_ranks << " run, each for its " << l.tp << " TP ranks)";
  }
  out << "\n";
  const RankResult& crit = r.ranks[r.critical];
  out << "\niteration time breakdown (rank " << crit.rank << ", stage " << crit.stage
      << ", the busiest):\n";
  for (int c = 0; c < kCategoryCount; ++c) {
    char line[96];
    std::snprintf(line, sizeof line, "  %-10s %10.4f s  %5.1f %%\n", CategoryName(static_cast<Category>(c)),
                  crit.breakdown_s[c], 100 * crit.breakdown_s[c] / r.iteration_time_s);
    out << line;
  }
  if (crit.sm_contention_s > 0) {
    out << "  (of compute and recompute, " << Fmt("%.4f s", crit.sm_contention_s)
        << " is NCCL's kernels holding SMs beside it: docs/simulator.md, \"NCCL's SMs\")\n";
  }
  if (r.critical_path.tasks > 0) {
    const CriticalPath& cp = r.critical_path;
    out << "\ncritical path without contention: " << Fmt("%.4f s", cp.length_s) << " over "
        << cp.tasks << " tasks (";
    bool first = true;
    for (int c = 0; c < kCategoryCount; ++c) {
      if (cp.by_category_s[c] <= 0) continue;
      out << (first ? "" : ", ") << CategoryName(static_cast<Category>(c)) << " "
          << Fmt("%.1f %%", 100 * cp.by_category_s[c] / cp.length_s);
      first = false;
    }
    out << ")\n";
  }
  const RankResult& pk = r.ranks[r.peak_rank];
  const MemoryBreakdown& mem = pk.peak_memory;
  out << "\npeak memory (rank " << pk.rank << ", stage " << pk.stage << "):\n"
      << "  weights      " << FormatQuantity(mem.weights, Dimension::kBytes) << "\n"
      << "  gradients    " << FormatQuantity(mem.gradients, Dimension::kBytes) << "\n"
      << "  optimizer    " << FormatQuantity(mem.optimizer, Dimension::kBytes) << "\n"
      << "  activations  " << FormatQuantity(mem.activations, Dimension::kBytes) << "\n"
      << "  other        " << FormatQuantity(mem.other, Dimension::kBytes)
      << (mem.nccl_buffers > 0 ? " (NCCL buffers " + FormatQuantity(mem.nccl_buffers, Dimension::kBytes) + ")"
                               : std::string())
      << "\n"
      << "  total        " << FormatQuantity(mem.total(), Dimension::kBytes) << " of "
      << FormatQuantity(r.usable_memory_bytes, Dimension::kBytes) << " usable ("
      << FormatQuantity(hw.gpu.memory_bytes, Dimension::kBytes) << " less "
      << Fmt("%.0f %%", 100 * hw.gpu.memory_fragmentation) << " fragmentation of what is not reserved)";
  if (r.fits) {
    out << " (fits)\n";
  } else {
    out << " (DOES NOT FIT: over by "
        << FormatQuantity(mem.total() - r.usable_memory_bytes, Dimension::kBytes) << ")\n";
  }
  if (r.fits) {
    out << "  in use       " << FormatQuantity(hw.gpu.DeviceMemoryInUse(mem.total()), Dimension::kBytes)
        << " as the device would show it (nvidia-smi: the allocator's holding included)\n";
  }
  out << "  " << MemoryBandText(hw, r.peak_memory_bytes) << "\n";
  out << "\niteration time: " << Fmt("%.4f s", r.iteration_time_s) << "\nthroughput: "
      << Fmt("%.0f tokens/s", r.tokens_per_s) << ", " << Fmt("%.1f", r.model_tflops_per_gpu)
      << " model TFLOP/s per GPU (" << Fmt("%.1f", r.hardware_tflops_per_gpu)
      << " with recompute), MFU " << Fmt("%.1f %%", 100 * r.mfu) << "\n";
  out << ComputeFitText(hw) << "\n" << ErrorBandText(hw, r.layout.dtype, r.iteration_time_s) << "\n";
  return out.str();
}

std::string SimulationJson(const ModelSpec& m, const HardwareSpec& hw, const SimResult& r,
                           const std::vector<std::string>& warnings) {
  JsonWriter w;
  const RankResult& crit = r.ranks[r.critical];
  const MemoryBreakdown& mem = r.ranks[r.peak_rank].peak_memory;
  w.BeginObject();
  w.Field("model", m.name).Field("hardware", hw.name).Field("gpus", r.layout.world());
  w.Field("seq_len", m.seq_len);
  w.Field("layout", FormatLayout(r.layout));
  w.Field("mode", r.full ? "full" : "symmetric");
  w.Field("iteration_time_s", r.iteration_time_s);
  ComputeFitJson(w, hw);
  ErrorBandJson(w, hw, r.layout.dtype, r.iteration_time_s);
  w.Field("tokens_per_s", r.tokens_per_s);
  w.Field("model_tflops_per_gpu", r.model_tflops_per_gpu);
  w.Field("hardware_tflops_per_gpu", r.hardware_tflops_per_gpu);
  w.Field("mfu", r.mfu);
  w.Field("peak_memory_bytes", r.peak_memory_bytes);
  w.Field("memory_capacity_bytes", r.memory_capacity_bytes);
  w.Field("device_memory_in_use_bytes", hw.gpu.DeviceMemoryInUse(r.peak_memory_bytes));
  w.Field("fits", r.fits);
  MemoryBandJson(w, hw, r.peak_memory_bytes);
  w.Field("usable_memory_bytes", r.usable_memory_bytes);
  w.Field("over_capacity_bytes", r.fits ? 0.0 : std::max(0.0, r.peak_memory_bytes - r.usable_memory_bytes));
  w.Key("memory_breakdown").BeginObject();
  w.Field("weights", mem.weights).Field("gradients", mem.gradients);
  w.Field("optimizer", mem.optimizer).Field("activations", mem.activations);
  w.Field("other", mem.other).Field("nccl_buffers", mem.nccl_buffers).EndObject();
  w.Field("peak_memory_rank", r.ranks[r.peak_rank].rank);
  w.Key("time_breakdown").BeginObject();
  for (int c = 0; c < kCategoryCount; ++c) w.Field(CategoryName(static_cast<Category>(c)), crit.breakdown_s[c]);
  w.EndObject();
  w.Field("time_breakdown_rank", crit.rank);
  w.Field("sm_contention_s", crit.sm_contention_s);
  w.Key("ranks").BeginArray();
  for (const RankResult& rr : r.ranks) {
    w.BeginObject().Field("rank", rr.rank).Field("stage", static_cast<int64_t>(rr.stage));
    w.Field("peak_memory_bytes", rr.peak_memory.total());
    w.Field("peak_activations_bytes", rr.peak_activations);
    w.Key("time_breakdown").BeginObject();
    for (int c = 0; c < kCategoryCount; ++c) w.Field(CategoryName(static_cast<Category>(c)), rr.breakdown_s[c]);
    w.EndObject().EndObject();
  }
  w.EndArray();
  w.Key("critical_path").BeginObject().Field("length_s", r.critical_path.length_s);
  for (int c = 0; c < kCategoryCount; ++c) {
    w.Field(CategoryName(static_cast<Category>(c)), r.critical_path.by_category_s[c]);
  }
  w.EndObject();
  w.Field("tasks", static_cast<int64_t>(r.tasks)).Field("events", static_cast<int64_t>(r.events));
  w.Key("warnings").BeginArray();
  for (const std::string& s : warnings) w.Value(s);
  w.EndArray();
  w.EndObject();
  return w.str();
}

std::string ChromeTrace(const SimResult& r) {
  JsonWriter w;
  w.BeginObject().Field("displayTimeUnit", "ms").Key("traceEvents").BeginArray();
  for (const RankResult& rr : r.ranks) WriteRankTraceMetadata(w, rr.rank, rr.stage);
  for (const TraceSpan& t : r.trace) {
    w.BeginObject().Field("ph", "X").Field("name", r.names[t.stage][t.name]);
    w.Field("pid", static_cast<int64_t>(t.rank)).Field("tid", static_cast<int64_t>(t.stream));
    w.Field("ts", static_cast<double>(t.start) / 1e6).Field("dur", static_cast<double>(t.end - t.start) / 1e6);
    w.Key("args").BeginObject().Field("layer", static_cast<int64_t>(t.layer));
    w.Field("microbatch", static_cast<int64_t>(t.microbatch));
    if (t.bytes > 0) w.Field("bytes", t.bytes);
    if (t.flops > 0) w.Field("flops", t.flops);
    w.EndObject().EndObject();
  }
  for (const MemorySample& s : r.memory_trace) {
    w.BeginObject().Field("ph", "C").Field("name", "activation memory").Field("pid", static_cast<int64_t>(s.rank));
    w.Field("ts", static_cast<double>(s.time) / 1e6);
    w.Key("args").BeginObject().Field("bytes", s.bytes).EndObject().EndObject();
  }
  w.EndArray().EndObject();
  return w.str();
}

}  // namespace shardsim
