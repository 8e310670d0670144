// See published_suite.h.
#include "src/report/published_suite.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "src/cost/estimate.h"
#include "src/hardware/cluster.h"
#include "src/io/yaml_reader.h"
#include "src/layout/layout.h"
#include "src/layout/stack.h"
#include "src/layout/validate.h"
#include "src/model/model_spec.h"
#include "src/sim/simulator.h"
#include "src/util/json_writer.h"
#include "src/util/strings.h"
#include "src/util/units.h"

namespace shardsim {
namespace {

constexpr int64_t kMaxRunGpus = int64_t{1} << 20;  // docs/validation.md: a run's GPU count bound
constexpr double kMaxRunMemoryBytes = kTiB;  // a published per-GPU peak's bound

PublishedRun ReadRun(YamlMap& r) {
  PublishedRun run;
  run.id = r.String("id");
  run.source = r.String("source");
  run.model = r.String("model");
  run.hardware = r.String("hardware");
  run.gpus = r.Int("gpus", 1);
  if (run.gpus > kMaxRunGpus) r.Error("gpus", "expected at most " + std::to_string(kMaxRunGpus) + " GPUs");
  if (std::optional<long long> t = r.OptionalInt("seq_len", 1)) run.seq_len = *t;
  run.layout = r.String("layout");
  run.stack = r.OptionalString("stack").value_or("");
  run.assumed = r.OptionalString("assumed").value_or("");
  run.published = r.String("published");
  if (std::optional<double> s = r.OptionalNumber("measured_step_s", 1e-6, 1e6)) run.measured_step_s = *s;
  if (std::optional<double> t = r.OptionalNumber("measured_tokens_per_s_per_gpu", 1e-6, 1e9)) {
    run.measured_tokens_per_s_per_gpu = *t;
  }
  if (run.measured_step_s.has_value() == run.measured_tokens_per_s_per_gpu.has_value()) {
    r.Error("measured_step_s", "expected exactly one of 'measured_step_s' and 'measured_tokens_per_s_per_gpu'");
  }
  if (std::optional<double> m = r.OptionalQuantity("measured_memory", Dimension::kBytes)) {
    if (*m <= 0 || *m > kMaxRunMemoryBytes) {
      r.Error("measured_memory", "expected a size above 0 and at most 1 TiB");
    } else {
      run.measured_memory_bytes = *m;
    }
  }
  run.notes = r.OptionalString("notes").value_or("");
  r.Finish();
  return run;
}

}  // namespace

StatusOr<PublishedSuite> LoadPublishedSuite(const std::string& file) {
  SHARDSIM_ASSIGN_OR_RETURN(YamlFile f, YamlFile::Load(file));
  YamlMap root = f.Root();
  PublishedSuite suite;
  for (YamlMap& s : root.MapList("sources")) {
    PublishedSource src;
    src.key = s.String("key");
    src.citation = s.String("citation");
    src.stack = s.String("stack");
    s.Finish();
    suite.sources.push_back(src);
  }
  std::vector<YamlMap> runs = root.MapList("runs");
  root.Finish();
  std::set<std::string> keys, ids;
  for (const PublishedSource& s : suite.sources) {
    if (!keys.insert(s.key).second) return Status::Error(file + ": source '" + s.key + "' is defined twice");
  }
  for (YamlMap& r : runs) {
    PublishedRun run = ReadRun(r);
    if (f.status().ok() && !keys.count(run.source)) {
      r.Error("source", "expected one of the keys under 'sources', found '" + run.source + "'");
    }
    if (f.status().ok() && !ids.insert(run.id).second) r.Error("id", "'" + run.id + "' is used twice");
    suite.runs.push_back(std::move(run));
  }
  if (!f.status().ok()) return f.status();
  return suite;
}

ErrorStats StatsOf(const std::vector<double>& errors) {
  ErrorStats s;
  s.runs = errors.size();
  if (errors.empty()) return s;
  std::vector<double> sorted = errors;
  std::sort(sorted.begin(), sorted.end());
  for (double e : errors) {
    s.mape += std::fabs(e);
    s.mean_signed += e;
    s.max_abs = std::max(s.max_abs, std::fabs(e));
  }
  s.mape /= static_cast<double>(errors.size());
  s.mean_signed /= static_cast<double>(errors.size());
  const size_t n = sorted.size();
  s.median_signed = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  return s;
}

namespace {

// Replays one run; a run that cannot be replayed says why in `failure`.
PublishedResult Replay(const PublishedRun& run, const std::map<std::string, StatusOr<StackSpec>>& stacks) {
  PublishedResult res;
  res.run = &run;
  auto fail = [&](const std::string& why) {
    res.failure = why;
    return res;
  };
  StatusOr<ModelSpec> loaded_model = LoadModel(run.model);
  if (!loaded_model.ok()) return fail(loaded_model.status().message());
  ModelSpec model = *loaded_model;
  if (run.seq_len) model.seq_len = *run.seq_len;
  StatusOr<HardwareSpec> loaded_hw = LoadHardware(run.hardware);
  if (!loaded_hw.ok()) return fail(loaded_hw.status().message());
  HardwareSpec hw = *loaded_hw;
  const int64_t nodes = (run.gpus + hw.node.gpus - 1) / hw.node.gpus;
  if (nodes > 1 && !hw.network) return fail(hw.name + " has no network to join " + std::to_string(nodes) + " nodes");
  hw.nodes = std::max(hw.nodes, nodes);
  StatusOr<Layout> parsed = ParseLayout(run.layout);
  if (!parsed.ok()) return fail(parsed.status().message());
  StatusOr<Layout> layout = ResolveLayoutFor(*parsed, run.gpus, hw);
  if (!layout.ok()) return fail(layout.status().message());
  const LayoutCheck check = CheckLayout(*layout, model, hw, run.gpus);
  if (!check.ok()) return fail(check.ToStatus().message());
  if (!run.stack.empty()) {
    // The framework ran it, so its stack description must not refuse it.
    const StatusOr<StackSpec>& stack = stacks.at(run.stack);
    if (!stack.ok()) return fail(stack.status().message());
    if (std::optional<std::string> why = StackRefusal(*stack, *layout)) return fail(*why);
  }
  res.measured_step_s = run.measured_step_s
                            ? *run.measured_step_s
                            : static_cast<double>(layout->gbs) * static_cast<double>(model.seq_len) /
                                  (*run.measured_tokens_per_s_per_gpu * static_cast<double>(run.gpus));
  res.gpu = hw.gpu.name;
  res.dtype = DTypeName(layout->dtype);
  const Cluster cluster(hw, run.gpus);
  const Estimate est = EstimateIteration(model, cluster, *layout);
  SimOptions options;
  options.critical_path = false;
  StatusOr<SimResult> sim = Simulate(model, cluster, *layout, options);
  if (!sim.ok()) return fail(sim.status().message());
  res.estimate_s = est.iteration_time_s;
  res.simulated_s = sim->iteration_time_s;
  res.estimate_error = res.measured_step_s / res.estimate_s - 1;
  res.simulated_error = res.measured_step_s / res.simulated_s - 1;
  res.mfu = sim->mfu;
  res.peak_memory_bytes = sim->peak_memory_bytes;
  if (run.measured_memory_bytes) res.memory_error = res.peak_memory_bytes / *run.measured_memory_bytes - 1;
  res.fits = sim->fits;
  return res;
}


void StatsJson(JsonWriter& j, const std::string& key, const ErrorStats& s) {
  j.Key(key).BeginObject();
  j.Field("runs", static_cast<int64_t>(s.runs));
  j.Field("mape", s.mape).Field("mean_signed_error", s.mean_signed);
  j.Field("median_signed_error", s.median_signed).Field("max_abs_error", s.max_abs);
  j.EndObject();
}

}  // namespace

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double h = p * static_cast<double>(values.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(h));
  const size_t hi = std::min(values.size() - 1, lo + 1);
  return values[lo] + (h - static_cast<double>(lo)) * (values[hi] - values[lo]);
}

std::vector<ErrorBandEstimate> ErrorBandsOf(const PublishedReport& report) {
  // Classes in the order their first run appears.
  std::vector<std::pair<std::string, std::string>> classes;
  for (const PublishedResult& r : report.results) {
    if (!r.failure.empty()) continue;
    const std::pair<std::string, std::string> k{r.gpu, r.dtype};
    if (std::find(classes.begin(), classes.end(), k) == classes.end()) classes.push_back(k);
  }
  std::vector<ErrorBandEstimate> out;
  for (const auto& [gpu, dtype] : classes) {
    ErrorBandEstimate b;
    b.gpu = gpu;
    b.dtype = dtype;
    std::vector<double> ratios;
    std::set<std::string> sources;
    for (const PublishedResult& r : report.results) {
      if (!r.failure.empty() || r.gpu != gpu || r.dtype != dtype) continue;
      ratios.push_back(1 + r.simulated_error);
      sources.insert(r.run->source);
    }
    b.runs = ratios.size();
    b.sources = sources.size();
    b.p10 = Percentile(ratios, 0.1);
    b.p50 = Percentile(ratios, 0.5);
    b.p90 = Percentile(ratios, 0.9);
    size_t inside = 0;
    for (const std::string& held_out : sources) {
      std::vector<double> others;
      for (const PublishedResult& r : report.results) {
        if (r.failure.empty() && r.gpu == gpu && r.dtype == dtype && r.run->source != held_out) {
          others.push_back(1 + r.simulated_error);
        }
      }
      if (others.empty()) continue;
      const double lo = Percentile(others, 0.1), hi = Percentile(others, 0.9);
      for (const PublishedResult& r : report.results) {
        if (!r.failure.empty() || r.gpu != gpu || r.dtype != dtype || r.run->source != held_out) continue;
        ++b.loso_runs;
        const double x = 1 + r.simulated_error;
        if (x >= lo && x <= hi) ++inside;
      }
    }
    b.loso_coverage = b.loso_runs ? static_cast<double>(inside) / static_cast<double>(b.loso_runs) : 0;
    out.push_back(b);
  }
  return out;
}

std::string ErrorBandsYaml(const std::vector<ErrorBandEstimate>& bands, const std::string& command) {
  std::ostringstream out;
  out << "# Error bands (issue 14, item 6): measured / simulated step time over the published runs of\n"
      << "# docs/validation/published-runs.yaml, per GPU and precision: p10, p50, p90 (linear\n"
      << "# interpolation), and the leave-one-source-out coverage of the p10-p90 band. Written by\n"
      << "# `" << command << "`; read by estimate, simulate and plan (src/report/error_band.h).\n"
      << "bands:\n";
  for (const ErrorBandEstimate& b : bands) {
    out << "  - gpu: " << YamlQuoted(b.gpu) << "\n"
        << "    dtype: " << b.dtype << "\n"
        << "    runs: " << b.runs << "\n"
        << "    sources: " << b.sources << "\n"
        << "    p10: " << Fmt("%.4f", b.p10) << "\n"
        << "    p50: " << Fmt("%.4f", b.p50) << "\n"
        << "    p90: " << Fmt("%.4f", b.p90) << "\n"
        << "    loso_coverage: " << Fmt("%.4f", b.loso_coverage) << "\n";
  }
  return out.str();
}

PublishedReport EvaluatePublishedSuite(const PublishedSuite& suite) {
  PublishedReport report;
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> by_source;
  std::vector<double> all_est, all_sim, memory;
  std::map<std::string, StatusOr<StackSpec>> stacks;  // each stack the runs name, read once
  for (const PublishedRun& run : suite.runs) {
    if (!run.stack.empty() && !stacks.count(run.stack)) stacks.emplace(run.stack, LoadStack(run.stack));
  }
  for (const PublishedRun& run : suite.runs) {
    report.results.push_back(Replay(run, stacks));
    const PublishedResult& r = report.results.back();
    if (!r.failure.empty()) {
      ++report.failed;
      continue;
    }
    by_source[run.source].first.push_back(r.estimate_error);
    by_source[run.source].second.push_back(r.simulated_error);
    all_est.push_back(r.estimate_error);
    all_sim.push_back(r.simulated_error);
    if (run.measured_memory_bytes) memory.push_back(r.memory_error);
  }
  for (const PublishedSource& s : suite.sources) {
    auto it = by_source.find(s.key);
    if (it == by_source.end()) continue;
    report.sources.push_back({s.key, StatsOf(it->second.first), StatsOf(it->second.second)});
  }
  report.estimate = StatsOf(all_est);
  report.simulated = StatsOf(all_sim);
  report.memory = StatsOf(memory);
  return report;
}

std::string PublishedReportMarkdown(const PublishedSuite& suite, const PublishedReport& report,
                                    const std::string& command) {
  std::ostringstream out;
  out << "# shardsim against published training runs\n\n"
      << "Generated by `" << command << "` from `docs/validation/published-runs.yaml` (sources, "
      << "layouts, what was assumed where a source is silent, and the figures as published). "
      << "Each run is replayed with its own layout: `estimate` (the simulation's critical path "
      << "without contention) and `simulate` (symmetric mode). Error = predicted throughput / "
      << "measured - 1 (measured step time / predicted - 1): **positive is optimistic**. Nothing "
      << "is fitted to these runs, so the leave-one-source-out error equals the in-sample one. "
      << "None of the sources issue 14 reserves for independent evaluation is here. "
      << "`tests/published_suite_test.cc` replays the file and fails when the simulation's MAPE "
      << "rises more than 1 point above the one recorded below.\n\n";
  out << "| run | source | model | GPUs | layout | published | measured step (s) | estimate (s) | error | simulated (s) | error | sim MFU | fits |\n"
      << "|---|---|---|---:|---|---|---:|---:|---:|---:|---:|---:|:---:|\n";
  for (const PublishedResult& r : report.results) {
    const PublishedRun& run = *r.run;
    out << "| " << run.id << " | " << run.source << " | " << run.model
        << (run.seq_len ? " (seq " + std::to_string(*run.seq_len) + ")" : "") << " | " << run.gpus << " | `"
        << run.layout << "` | " << run.published << " | ";
    if (!r.failure.empty()) {
      out << "not replayed: " << r.failure << " | | | | | | |\n";
      continue;
    }
    out << Fmt("%.3f", r.measured_step_s) << " | " << Fmt("%.3f", r.estimate_s) << " | " << Fmt("%+.1f %%", 100 * (r.estimate_error))
        << " | " << Fmt("%.3f", r.simulated_s) << " | " << Fmt("%+.1f %%", 100 * (r.simulated_error)) << " | "
        << Fmt("%.1f", 100 * r.mfu) << " % | " << (r.fits ? "yes" : "no") << " |\n";
  }
  out << "\n## By source\n\n"
      << "| source | stack | runs | simulated MAPE | mean signed | median signed | max abs | estimate MAPE |\n"
      << "|---|---|---:|---:|---:|---:|---:|---:|\n";
  for (const SourceStats& s : report.sources) {
    std::string stack;
    for (const PublishedSource& src : suite.sources) {
      if (src.key == s.key) stack = src.stack;
    }
    out << "| " << s.key << " | " << stack << " | " << s.simulated.runs << " | " << Fmt("%.1f %%", 100 * (s.simulated.mape))
        << " | " << Fmt("%+.1f %%", 100 * (s.simulated.mean_signed)) << " | " << Fmt("%+.1f %%", 100 * (s.simulated.median_signed)) << " | "
        << Fmt("%.1f %%", 100 * (s.simulated.max_abs)) << " | " << Fmt("%.1f %%", 100 * (s.estimate.mape)) << " |\n";
  }
  out << "\n**Over " << report.simulated.runs << " runs from " << report.sources.size()
      << " sources: simulation MAPE " << Fmt("%.1f", 100 * report.simulated.mape) << " %, estimate MAPE "
      << Fmt("%.1f", 100 * report.estimate.mape) << " %**; simulation mean signed error "
      << Fmt("%+.1f %%", 100 * (report.simulated.mean_signed)) << ", median " << Fmt("%+.1f %%", 100 * (report.simulated.median_signed))
      << ", largest " << Fmt("%.1f %%", 100 * (report.simulated.max_abs)) << ".";
  if (report.failed > 0) out << " " << report.failed << " runs could not be replayed (listed above).";
  out << "\n\n## Peak memory\n\n"
      << "Where a source publishes the memory a run used per GPU, the simulation's peak (the "
      << "busiest rank's weights, gradients, optimizer states, activations and buffers, with the "
      << "hardware description's reserved memory; without the allocator's fragmentation, which "
      << "the fit verdict takes off the capacity instead) against it. Error = predicted / "
      << "measured - 1.\n\n"
      << "| run | measured | predicted peak | error |\n|---|---:|---:|---:|\n";
  for (const PublishedResult& r : report.results) {
    if (!r.failure.empty() || !r.run->measured_memory_bytes) continue;
    out << "| " << r.run->id << " | " << Fmt("%.1f GiB", *r.run->measured_memory_bytes / kGiB) << " | "
        << Fmt("%.1f GiB", r.peak_memory_bytes / kGiB) << " | " << Fmt("%+.1f %%", 100 * r.memory_error) << " |\n";
  }
  out << "\n**Peak memory over " << report.memory.runs << " runs: MAPE "
      << Fmt("%.1f %%", 100 * report.memory.mape) << ", mean signed " << Fmt("%+.1f %%", 100 * report.memory.mean_signed)
      << ", largest " << Fmt("%.1f %%", 100 * report.memory.max_abs) << ".**";
  out << "\n\n## Error bands\n\n"
      << "Measured / simulated step time per GPU and precision (what `estimate`, `simulate` and "
      << "`plan` print as the prediction's band, from `docs/validation/error-bands.yaml`): a ratio "
      << "above 1 means the run was slower than predicted. Leave-one-source-out coverage: the share "
      << "of runs inside the p10-p90 band computed from the other sources only (a calibrated band "
      << "covers about 80 %).\n\n"
      << "| GPU | precision | runs | sources | p10 | p50 | p90 | leave-one-source-out coverage |\n"
      << "|---|---|---:|---:|---:|---:|---:|---:|\n";
  for (const ErrorBandEstimate& b : ErrorBandsOf(report)) {
    out << "| " << b.gpu << " | " << b.dtype << " | " << b.runs << " | " << b.sources << " | " << Fmt("%.3f", b.p10)
        << " | " << Fmt("%.3f", b.p50) << " | " << Fmt("%.3f", b.p90) << " | "
        << (b.loso_runs ? Fmt("%.1f %%", 100 * (b.loso_coverage)) + " of " + std::to_string(b.loso_runs) : std::string("(one source)"))
        << " |\n";
  }
  out << "\nSources:\n\n";
  for (const PublishedSource& s : suite.sources) out << "- `" << s.key << "`: " << s.citation << "\n";
  return out.str();
}

std::string PublishedReportJson(const PublishedReport& report) {
  JsonWriter j;
  j.BeginObject();
  j.Key("runs").BeginArray();
  for (const PublishedResult& r : report.results) {
    j.BeginObject();
    j.Field("id", r.run->id).Field("source", r.run->source).Field("model", r.run->model);
    j.Field("gpus", r.run->gpus).Field("layout", r.run->layout).Field("published", r.run->published);
    if (!r.failure.empty()) {
      j.Field("failure", r.failure);
    } else {
      j.Field("measured_step_s", r.measured_step_s).Field("estimate_s", r.estimate_s);
      j.Field("estimate_error", r.estimate_error).Field("simulated_s", r.simulated_s);
      j.Field("simulated_error", r.simulated_error).Field("mfu", r.mfu);
      j.Field("peak_memory_bytes", r.peak_memory_bytes).Field("fits", r.fits);
      if (r.run->measured_memory_bytes) {
        j.Field("measured_memory_bytes", *r.run->measured_memory_bytes).Field("memory_error", r.memory_error);
      }
    }
    j.EndObject();
  }
  j.EndArray();
  j.Key("sources").BeginArray();
  for (const SourceStats& s : report.sources) {
    j.BeginObject();
    j.Field("key", s.key);
    StatsJson(j, "simulated", s.simulated);
    StatsJson(j, "estimate", s.estimate);
    j.EndObject();
  }
  j.EndArray();
  StatsJson(j, "simulated", report.simulated);
  StatsJson(j, "estimate", report.estimate);
  StatsJson(j, "memory", report.memory);
  j.Field("failed", static_cast<int64_t>(report.failed));
  j.EndObject();
  return j.str();
}

}  // namespace shardsim
