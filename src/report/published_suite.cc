// See published_suite.h.
#include "src/report/published_suite.h"

#include <algorithm>
#include <cmath>
#include <iterator>
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
#include "src/util/check.h"
#include "src/util/json_writer.h"
#include "src/util/strings.h"
#include "src/util/units.h"

namespace shardsim {
namespace {

constexpr int64_t kMaxRunGpus = int64_t{1} << 20;  // docs/cli.md "validate --published": a run's GPU count bound
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
  if (run.measured_step_s && run.measured_tokens_per_s_per_gpu) {
    r.Error("measured_step_s", "expected at most one of 'measured_step_s' and 'measured_tokens_per_s_per_gpu'");
  }
  if (std::optional<double> m = r.OptionalQuantity("measured_memory", Dimension::kBytes)) {
    if (*m <= 0 || *m > kMaxRunMemoryBytes) {
      r.Error("measured_memory", "expected a size above 0 and at most 1 TiB");
    } else {
      run.measured_memory_bytes = *m;
    }
  }
  if (std::optional<std::string> k = r.OptionalChoice("measured_memory_kind", {"device", "allocator_reserved"})) {
    if (!run.measured_memory_bytes) r.Error("measured_memory_kind", "expected only beside 'measured_memory'");
    if (*k == "allocator_reserved") run.measured_memory_kind = PublishedRun::MemoryKind::kAllocatorReserved;
  }
  if (!run.timed() && !run.measured_memory_bytes) {
    r.Error("measured_tokens_per_s_per_gpu", "expected 'measured_step_s', 'measured_tokens_per_s_per_gpu' or, for a "
            "run checked for memory only, 'measured_memory'");
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

// The probe: compute times 1.25 (sustained_compute 0.8), within the fitted values' range,
// large enough that the critical path's response is not lost in rounding.
constexpr double kProbeComputeTime = 1.25;

// One run's inputs, loaded and checked once for all its replays.
struct PreparedRun {
  ModelSpec model;
  HardwareSpec hw;
  Layout layout;
};

// Loads and checks a run; a run that cannot be replayed says why in res->failure. Fills the
// figures that do not depend on a prediction (the measured step time, the GPU, the dtype).
std::optional<PreparedRun> Prepare(const PublishedRun& run, const std::map<std::string, StatusOr<StackSpec>>& stacks,
                                   PublishedResult* res) {
  res->run = &run;
  auto fail = [&](const std::string& why) {
    res->failure = why;
    return std::nullopt;
  };
  PreparedRun p;
  StatusOr<ModelSpec> loaded_model = LoadModel(run.model);
  if (!loaded_model.ok()) return fail(loaded_model.status().message());
  p.model = *loaded_model;
  if (run.seq_len) p.model.seq_len = *run.seq_len;
  StatusOr<HardwareSpec> loaded_hw = LoadHardware(run.hardware);
  if (!loaded_hw.ok()) return fail(loaded_hw.status().message());
  p.hw = *loaded_hw;
  const int64_t nodes = (run.gpus + p.hw.node.gpus - 1) / p.hw.node.gpus;
  if (nodes > 1 && !p.hw.network) return fail(p.hw.name + " has no network to join " + std::to_string(nodes) + " nodes");
  p.hw.nodes = std::max(p.hw.nodes, nodes);
  StatusOr<Layout> parsed = ParseLayout(run.layout);
  if (!parsed.ok()) return fail(parsed.status().message());
  StatusOr<Layout> layout = ResolveLayoutFor(*parsed, run.gpus, p.hw);
  if (!layout.ok()) return fail(layout.status().message());
  p.layout = *layout;
  const LayoutCheck check = CheckLayout(p.layout, p.model, p.hw, run.gpus);
  if (!check.ok()) return fail(check.ToStatus().message());
  if (!run.stack.empty()) {
    // The framework ran it, so its stack description must not refuse it.
    const StatusOr<StackSpec>& stack = stacks.at(run.stack);
    if (!stack.ok()) return fail(stack.status().message());
    if (std::optional<std::string> why = StackRefusal(*stack, p.layout)) return fail(*why);
  }
  res->measured_step_s = run.measured_step_s ? *run.measured_step_s
                         : run.measured_tokens_per_s_per_gpu
                             ? static_cast<double>(p.layout.gbs) * static_cast<double>(p.model.seq_len) /
                                   (*run.measured_tokens_per_s_per_gpu * static_cast<double>(run.gpus))
                             : 0.0;
  res->gpu = p.hw.gpu.name;
  res->architecture = p.hw.gpu.FitKey();
  res->dtype = DTypeName(p.layout.dtype);
  return p;
}

// `base` with the predictions at `sustained` as efficiency.sustained_compute (nullopt: the
// description's, i.e. the structural model): the symmetric simulation, and the estimate when
// asked (the fit's probe and left-out replays need only the simulation).
PublishedResult Replay(const PreparedRun& p, const PublishedResult& base, std::optional<double> sustained,
                       bool with_estimate) {
  PublishedResult res = base;
  HardwareSpec hw = p.hw;
  if (sustained) hw.gpu.efficiency.sustained_compute = *sustained;
  const Cluster cluster(hw, res.run->gpus);
  SimOptions options;
  options.critical_path = false;
  StatusOr<SimResult> sim = Simulate(p.model, cluster, p.layout, options);
  if (!sim.ok()) {
    res.failure = sim.status().message();
    return res;
  }
  const bool timed = res.run->timed();
  if (with_estimate) {
    res.estimate_s = EstimateIteration(p.model, cluster, p.layout).iteration_time_s;
    if (timed) res.estimate_error = res.measured_step_s / res.estimate_s - 1;
  }
  res.simulated_s = sim->iteration_time_s;
  if (timed) res.simulated_error = res.measured_step_s / res.simulated_s - 1;
  res.mfu = sim->mfu;
  res.peak_memory_bytes = sim->peak_memory_bytes;
  res.device_memory_bytes = hw.gpu.DeviceMemoryInUse(sim->peak_memory_bytes);
  res.predicted_memory_bytes =
      res.run->measured_memory_kind == PublishedRun::MemoryKind::kAllocatorReserved
          ? hw.gpu.AllocatorReserved(sim->peak_memory_bytes, sim->ranks[sim->peak_rank].peak_memory.nccl_buffers)
          : res.device_memory_bytes;
  if (res.run->measured_memory_bytes) res.memory_error = res.predicted_memory_bytes / *res.run->measured_memory_bytes - 1;
  res.fits = sim->fits;
  res.sustained = hw.gpu.efficiency.sustained();
  return res;
}

double Median(std::vector<double> v) { return Percentile(std::move(v), 0.5); }

// A replayed run with a measured time: what the fit, the time errors, the bands and the
// ranking tolerance are made of (a memory-only run counts for the memory figures alone).
bool Timed(const PublishedResult& r) { return r.failure.empty() && r.run->timed(); }

// The compute-time multiplier (1 / sustained_compute) that makes a run's simulation equal its
// measurement, on the line through its structural and probe simulations; nullopt when the
// step does not respond to compute (no slope).
std::optional<double> ExactComputeTime(const PublishedResult& r) {
  if (!(r.compute_slope_s > 0)) return std::nullopt;
  return 1 + (r.measured_step_s - r.structural_s) / r.compute_slope_s;
}

// Measured / simulated step time at compute-time multiplier t, on that line.
double LinearRatio(const PublishedResult& r, double t) {
  return r.measured_step_s / (r.structural_s + (t - 1) * r.compute_slope_s);
}

// A factor outside the hardware field's bounds [0.05, 2] is not a sustained rate: no fit.
bool InFitBounds(double t) { return t >= 0.5 && t <= 20; }

// The compute-time multiplier fitted on `arch`'s runs whose source is not in `without`: the
// median over sources of each source's median exact multiplier, or none where no run is left
// or it is out of bounds. A source is one vote, whatever its number of runs: its runs share a
// stack, a cluster and a way of measuring, so their residuals move together (a source's runs
// are what leave-one-source-out holds out as one), and a source of 28 runs would otherwise
// set the fit for the five others. One rule for the fit, its leave-one-source-out refits and
// the bands' nested refits.
std::optional<double> FitTime(const std::vector<PublishedResult>& results, const std::string& arch,
                              const std::set<std::string>& without) {
  std::map<std::string, std::vector<double>> by_source;
  for (const PublishedResult& r : results) {
    if (!Timed(r) || r.architecture != arch || without.count(r.run->source)) continue;
    if (std::optional<double> t = ExactComputeTime(r)) by_source[r.run->source].push_back(*t);
  }
  std::vector<double> per_source;
  for (const auto& [source, times] : by_source) per_source.push_back(Median(times));
  if (per_source.empty() || !InFitBounds(Median(per_source))) return std::nullopt;
  return Median(per_source);
}

// FitTime, or 1 (the structural model) where it gives none.
double FitTimeWithout(const std::vector<PublishedResult>& results, const std::string& arch,
                      const std::set<std::string>& without) {
  return FitTime(results, arch, without).value_or(1.0);
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

double StudentT90(int64_t df) {
  // One-sided 90 % critical values of Student's t (NIST/SEMATECH e-Handbook of Statistical
  // Methods, 1.3.6.7.2, "Critical values of the Student's t distribution", column 0.10): df 1-30,
  // then 40, 60, 120 and the normal's 1.282, between them linear in 1 / df.
  static constexpr double kTable[] = {3.078, 1.886, 1.638, 1.533, 1.476, 1.440, 1.415, 1.397, 1.383, 1.372,
                                      1.363, 1.356, 1.350, 1.345, 1.341, 1.337, 1.333, 1.330, 1.328, 1.325,
                                      1.323, 1.321, 1.319, 1.318, 1.316, 1.315, 1.314, 1.313, 1.311, 1.310};
  CHECK(df >= 1) << "Student's t needs a degree of freedom, got " << df;
  if (df <= 30) return kTable[df - 1];
  const std::pair<double, double> tail[] = {{30, 1.310}, {40, 1.303}, {60, 1.296}, {120, 1.289}, {1e300, 1.282}};
  for (size_t i = 1; i < std::size(tail); ++i) {
    if (static_cast<double>(df) > tail[i].first) continue;
    const double a = 1 / tail[i - 1].first, b = 1 / tail[i].first, x = 1 / static_cast<double>(df);
    return tail[i - 1].second + (x - a) / (b - a) * (tail[i].second - tail[i - 1].second);
  }
  return 1.282;
}

PredictionBand PredictionBandOf(const std::vector<std::vector<double>>& ratios_by_source) {
  std::vector<double> means;
  double within = 0;
  size_t n = 0;
  for (const std::vector<double>& g : ratios_by_source) {
    if (g.empty()) continue;
    double m = 0;
    for (double x : g) m += std::log(x);
    m /= static_cast<double>(g.size());
    for (double x : g) within += (std::log(x) - m) * (std::log(x) - m);
    n += g.size();
    means.push_back(m);
  }
  PredictionBand b;
  const size_t k = means.size();
  if (n < 2) return b;  // one run says nothing of the spread: no band
  double mu = 0;
  for (double m : means) mu += m;
  mu /= static_cast<double>(k);
  double between = 0;
  for (double m : means) between += (m - mu) * (m - mu);
  between = k > 1 ? between / static_cast<double>(k - 1) : 0;
  within = n > k ? within / static_cast<double>(n - k) : 0;
  // A new source's mean: a new draw of the sources' means, sigma_b^2 (1 + 1/k) about their
  // mean; a run of it: that plus the spread within a source. With one source nothing is known
  // of the spread between sources: the band is that source's own (t over its runs).
  const double s = std::sqrt(between * (1 + 1 / static_cast<double>(k)) + within);
  const int64_t df = k > 1 ? static_cast<int64_t>(k - 1) : std::max<int64_t>(1, static_cast<int64_t>(n) - 1);
  const double t = StudentT90(df);
  b.lo = std::exp(mu - t * s);
  b.mid = std::exp(mu);
  b.hi = std::exp(mu + t * s);
  return b;
}

std::vector<ErrorBandEstimate> ErrorBandsOf(const PublishedReport& report) {
  // Classes (architecture, precision) in the order their first run appears: the fit's class,
  // so a GPU with one source (H200) shares its architecture's spread over sources.
  std::vector<std::pair<std::string, std::string>> classes;
  for (const PublishedResult& r : report.results) {
    if (!Timed(r)) continue;
    const std::pair<std::string, std::string> k{r.architecture, r.dtype};
    if (std::find(classes.begin(), classes.end(), k) == classes.end()) classes.push_back(k);
  }
  std::set<std::string> fitted;  // architectures with a fit; the others are replayed structural
  for (const ComputeFitEstimate& f : report.fits) fitted.insert(f.architecture);
  std::vector<ErrorBandEstimate> out;
  for (const auto& [arch, dtype] : classes) {
    ErrorBandEstimate b;
    b.architecture = arch;
    b.dtype = dtype;
    // The band is of errors on sources the fit has not seen, as a user's run is: each run's
    // measured / simulated with the fit made without its source (1 + loso_error), not the
    // in-sample residuals, which a fit on the run's own source narrows.
    auto in_class = [&, &arch = arch, &dtype = dtype](const PublishedResult& r) {
      return Timed(r) && r.architecture == arch && r.dtype == dtype;
    };
    std::map<std::string, std::vector<double>> by_source;
    std::set<std::string> sources;
    std::vector<std::string> names;
    for (const PublishedResult& r : report.results) {
      if (!in_class(r)) continue;
      by_source[r.run->source].push_back(1 + r.loso_error);
      sources.insert(r.run->source);
      if (std::find(names.begin(), names.end(), r.gpu) == names.end()) names.push_back(r.gpu);
      b.sustained = r.sustained;
      ++b.runs;
    }
    b.gpus = Join(names, ", ");
    b.sources = sources.size();
    std::vector<std::vector<double>> groups;
    for (auto& [source, g] : by_source) groups.push_back(g);
    const PredictionBand band = PredictionBandOf(groups);
    if (band.hi <= 0) continue;  // a single run: no band for the class
    b.p10 = band.lo;
    b.p50 = band.mid;
    b.p90 = band.hi;
    // Its coverage, nested: each held-out source's runs (predicted without it) against the band
    // the other sources give when the held-out one is unseen too: each other source's runs at
    // the fit made without both.
    size_t inside = 0;
    for (const std::string& held_out : sources) {
      std::vector<std::vector<double>> others;
      for (const std::string& other : sources) {
        if (other == held_out) continue;
        const double t = fitted.count(arch) ? FitTimeWithout(report.results, arch, {held_out, other}) : 1.0;
        others.emplace_back();
        for (const PublishedResult& r : report.results) {
          if (in_class(r) && r.run->source == other) others.back().push_back(LinearRatio(r, t));
        }
      }
      const PredictionBand without = PredictionBandOf(others);
      if (without.hi <= 0) continue;  // the others hold a single run: no band to check against
      const double lo = without.lo, hi = without.hi;
      for (const PublishedResult& r : report.results) {
        if (!in_class(r) || r.run->source != held_out) continue;
        ++b.loso_runs;
        const double x = 1 + r.loso_error;
        if (x >= lo && x <= hi) ++inside;
      }
    }
    b.loso_coverage = b.loso_runs ? static_cast<double>(inside) / static_cast<double>(b.loso_runs) : 0;
    out.push_back(b);
  }
  return out;
}

RankingTolerance RankingToleranceOf(const PublishedReport& report) {
  std::vector<double> rel;
  const std::vector<PublishedResult>& rs = report.results;
  for (size_t i = 0; i < rs.size(); ++i) {
    for (size_t j = i + 1; j < rs.size(); ++j) {
      const PublishedResult &a = rs[i], &b = rs[j];
      if (!Timed(a) || !Timed(b) || a.run->source != b.run->source ||
          a.run->model != b.run->model || a.gpu != b.gpu || a.dtype != b.dtype) {
        continue;
      }
      rel.push_back(std::exp(std::fabs(std::log((1 + a.simulated_error) / (1 + b.simulated_error)))) - 1);
    }
  }
  return {Median(rel), rel.size()};
}

MemoryBandEstimate MemoryBandOf(const PublishedReport& report) {
  MemoryBandEstimate b;
  std::vector<std::string> sources;  // in the file's order
  std::vector<std::pair<std::string, double>> ratios;  // source, measured / predicted
  for (const PublishedResult& r : report.results) {
    if (!r.failure.empty() || !r.run->measured_memory_bytes) continue;
    ratios.emplace_back(r.run->source, 1 / (1 + r.memory_error));
    if (std::find(sources.begin(), sources.end(), r.run->source) == sources.end()) sources.push_back(r.run->source);
  }
  b.runs = ratios.size();
  b.sources = sources.size();
  std::vector<std::string> counts;
  for (const std::string& s : sources) {
    const auto n = std::count_if(ratios.begin(), ratios.end(), [&](const auto& r) { return r.first == s; });
    counts.push_back(s + " " + std::to_string(n));
  }
  b.source_runs = Join(counts, ", ");
  // The ratios grouped by source, leaving one out (or none: "").
  auto groups_without = [&](const std::string& left_out) {
    std::vector<std::vector<double>> groups;
    for (const std::string& s : sources) {
      if (s == left_out) continue;
      groups.emplace_back();
      for (const auto& [source, x] : ratios) {
        if (source == s) groups.back().push_back(x);
      }
    }
    return groups;
  };
  const PredictionBand band = PredictionBandOf(groups_without(""));
  if (band.hi <= 0) return MemoryBandEstimate{};  // fewer than two peaks: no band
  b.p10 = band.lo;
  b.p50 = band.mid;
  b.p90 = band.hi;
  size_t inside = 0;
  for (const std::string& held_out : sources) {
    const std::vector<std::vector<double>> others = groups_without(held_out);
    const PredictionBand without = PredictionBandOf(others);
    if (without.hi <= 0) continue;
    const double lo = without.lo, hi = without.hi;
    for (const auto& [source, x] : ratios) {
      if (source != held_out) continue;
      ++b.loso_runs;
      if (x >= lo && x <= hi) ++inside;
    }
  }
  b.loso_coverage = b.loso_runs ? static_cast<double>(inside) / static_cast<double>(b.loso_runs) : 0;
  return b;
}

std::string ErrorBandsYaml(const std::vector<ErrorBandEstimate>& bands, const RankingTolerance& ranking,
                           const MemoryBandEstimate& memory, const std::string& command) {
  std::ostringstream out;
  out << "# Error bands (issue 14, item 6): measured / simulated step time over the published runs of\n"
      << "# docs/validation/published-runs.yaml, per GPU architecture (the fit's class) and precision,\n"
      << "# each run predicted with the fit made without its source: the 80 % prediction interval for a\n"
      << "# run from an unseen source (p10, p90; p50 its middle: published_suite.h PredictionBandOf, the\n"
      << "# sources as random effects), and its nested leave-one-source-out coverage; printed\n"
      << "# beside predictions made with sustained_compute (the fit of docs/validation/compute-fits.yaml;\n"
      << "# a prediction with another value gets no band). Written by\n"
      << "# `" << command << "`; read by estimate, simulate and plan (src/report/error_band.h).\n"
      << "# ranking_tolerance: the median relative error between two runs' predictions from one source\n"
      << "# (same model, GPU and precision; published_suite.h), what plan treats as a tie.\n"
      << "ranking_tolerance: " << Fmt("%.4f", ranking.tolerance) << "\n"
      << "ranking_pairs: " << ranking.pairs << "\n"
      << "bands:\n";
  for (const ErrorBandEstimate& b : bands) {
    out << "  - architecture: " << YamlQuoted(b.architecture) << "\n"
        << "    gpus: " << YamlQuoted(b.gpus) << "\n"
        << "    dtype: " << b.dtype << "\n"
        << "    runs: " << b.runs << "\n"
        << "    sources: " << b.sources << "\n"
        << "    p10: " << Fmt("%.4f", b.p10) << "\n"
        << "    p50: " << Fmt("%.4f", b.p50) << "\n"
        << "    p90: " << Fmt("%.4f", b.p90) << "\n"
        << "    sustained_compute: " << Fmt("%.4f", b.sustained) << "\n"
        << "    loso_coverage: " << Fmt("%.4f", b.loso_coverage) << "\n";
  }
  if (memory.runs > 0) {
    out << "# memory_band: measured / predicted peak memory per GPU over the runs whose source publishes\n"
        << "# one, each against the prediction of what it measured (the device's use or the allocator's\n"
        << "# reserved peak): the 80 % prediction interval for a run from an unseen source (p10, p90; p50 its\n"
        << "# middle: PredictionBandOf), and the nested leave-one-source-out coverage (each source's\n"
        << "# runs against the band of the others'). No fitted parameter: the ratios are out of sample.\n"
        << "memory_band:\n"
        << "  runs: " << memory.runs << "\n"
        << "  sources: " << memory.sources << "\n"
        << "  source_runs: " << YamlQuoted(memory.source_runs) << "\n"
        << "  p10: " << Fmt("%.4f", memory.p10) << "\n"
        << "  p50: " << Fmt("%.4f", memory.p50) << "\n"
        << "  p90: " << Fmt("%.4f", memory.p90) << "\n"
        << "  loso_coverage: " << Fmt("%.4f", memory.loso_coverage) << "\n";
  }
  return out.str();
}

PublishedReport EvaluatePublishedSuite(const PublishedSuite& suite, const PublishedProgress& progress) {
  PublishedReport report;
  std::map<std::string, StatusOr<StackSpec>> stacks;  // each stack the runs name, read once
  for (const PublishedRun& run : suite.runs) {
    if (!run.stack.empty() && !stacks.count(run.stack)) stacks.emplace(run.stack, LoadStack(run.stack));
  }
  // 1. Structural replays, and the probe's slope.
  std::vector<std::optional<PreparedRun>> prepared;
  for (const PublishedRun& run : suite.runs) {
    if (progress) progress("structural", prepared.size(), suite.runs.size(), run.id);
    PublishedResult r;
    prepared.push_back(Prepare(run, stacks, &r));
    if (prepared.back()) {
      r = Replay(*prepared.back(), r, std::nullopt, run.timed());  // a memory-only run needs no estimate
      if (Timed(r)) {
        r.structural_s = r.simulated_s;
        r.structural_error = r.simulated_error;
        const PublishedResult probe = Replay(*prepared.back(), r, 1 / kProbeComputeTime, false);
        if (probe.failure.empty()) r.compute_slope_s = (probe.simulated_s - r.simulated_s) / (kProbeComputeTime - 1);
      }
    }
    report.results.push_back(r);
  }
  // 2. One factor per GPU architecture (FitTime: the median over sources of each source's
  // median exact multiplier), where two or more sources give runs; and each source's factor
  // without it.
  std::vector<std::string> archs;  // in the order their first run appears
  for (const PublishedResult& r : report.results) {
    if (Timed(r) && std::find(archs.begin(), archs.end(), r.architecture) == archs.end()) {
      archs.push_back(r.architecture);
    }
  }
  std::map<std::string, double> fitted;                          // architecture -> sustained
  std::map<std::pair<std::string, std::string>, double> held;   // (architecture, source) -> sustained
  for (const std::string& arch : archs) {
    std::set<std::string> sources;
    std::vector<std::string> names;
    size_t runs = 0;
    for (const PublishedResult& r : report.results) {
      if (!Timed(r) || r.architecture != arch) continue;
      ++runs;
      sources.insert(r.run->source);
      if (std::find(names.begin(), names.end(), r.gpu) == names.end()) names.push_back(r.gpu);
    }
    const std::optional<double> t = FitTime(report.results, arch, {});
    if (sources.size() < 2 || !t) continue;
    ComputeFitEstimate fit;
    fit.architecture = arch;
    fit.gpus = Join(names, ", ");
    fit.runs = runs;
    fit.sources = sources.size();
    fit.sustained = 1 / *t;
    fitted[arch] = fit.sustained;
    for (const std::string& source : sources) {
      const double f = 1 / FitTimeWithout(report.results, arch, {source});
      held[{arch, source}] = f;
      fit.loso.emplace_back(source, f);
    }
    report.fits.push_back(fit);
  }
  // 3. Replays with the fit and without each run's source.
  for (size_t i = 0; i < report.results.size(); ++i) {
    PublishedResult& r = report.results[i];
    if (progress) progress("fitted", i, report.results.size(), suite.runs[i].id);
    if (!r.failure.empty()) continue;
    const auto it = fitted.find(r.architecture);
    if (it == fitted.end()) {
      r.loso_s = r.structural_s;
      r.loso_error = r.structural_error;
      continue;
    }
    if (!r.run->timed()) {  // memory only: its peak as the commands predict it, with the fit
      r = Replay(*prepared[i], r, it->second, false);
      continue;
    }
    const PublishedResult without = Replay(*prepared[i], r, held.at({r.architecture, r.run->source}), false);
    r = Replay(*prepared[i], r, it->second, true);
    if (r.failure.empty() && !without.failure.empty()) r.failure = without.failure;
    r.loso_s = without.simulated_s;
    r.loso_error = without.simulated_error;
  }
  // 4. Statistics.
  std::map<std::string, std::vector<const PublishedResult*>> by_source;
  std::vector<double> est, sim, structural, loso, memory;
  for (const PublishedResult& r : report.results) {
    if (!r.failure.empty()) {
      ++report.failed;
      continue;
    }
    if (r.run->measured_memory_bytes) memory.push_back(r.memory_error);
    if (!r.run->timed()) {
      ++report.memory_only;
      continue;
    }
    by_source[r.run->source].push_back(&r);
    est.push_back(r.estimate_error);
    sim.push_back(r.simulated_error);
    structural.push_back(r.structural_error);
    loso.push_back(r.loso_error);
  }
  auto stats = [](const std::vector<const PublishedResult*>& rs, double PublishedResult::*field) {
    std::vector<double> v;
    for (const PublishedResult* r : rs) v.push_back(r->*field);
    return StatsOf(v);
  };
  for (const PublishedSource& s : suite.sources) {
    auto it = by_source.find(s.key);
    if (it == by_source.end()) continue;
    report.sources.push_back({s.key, stats(it->second, &PublishedResult::estimate_error),
                              stats(it->second, &PublishedResult::simulated_error),
                              stats(it->second, &PublishedResult::structural_error),
                              stats(it->second, &PublishedResult::loso_error)});
  }
  for (ComputeFitEstimate& fit : report.fits) {
    std::vector<const PublishedResult*> rs;
    for (const PublishedResult& r : report.results) {
      if (Timed(r) && r.architecture == fit.architecture) rs.push_back(&r);
    }
    fit.structural = stats(rs, &PublishedResult::structural_error);
    fit.fitted = stats(rs, &PublishedResult::simulated_error);
    fit.held_out = stats(rs, &PublishedResult::loso_error);
  }
  report.estimate = StatsOf(est);
  report.simulated = StatsOf(sim);
  report.structural = StatsOf(structural);
  report.loso = StatsOf(loso);
  report.memory = StatsOf(memory);
  return report;
}

std::vector<ComputeFit> ComputeFitsOf(const PublishedReport& report) {
  std::vector<ComputeFit> out;
  for (const ComputeFitEstimate& f : report.fits) {
    ComputeFit c;
    c.architecture = f.architecture;
    c.gpus = f.gpus;
    c.sustained_compute = f.sustained;
    c.runs = static_cast<int64_t>(f.runs);
    c.sources = static_cast<int64_t>(f.sources);
    c.structural_mape = f.structural.mape;
    c.fitted_mape = f.fitted.mape;
    c.loso_mape = f.held_out.mape;
    c.structural_median = f.structural.median_signed;
    c.fitted_median = f.fitted.median_signed;
    c.loso_median = f.held_out.median_signed;
    out.push_back(c);
  }
  return out;
}

std::string PublishedReportMarkdown(const PublishedSuite& suite, const PublishedReport& report,
                                    const std::string& command) {
  std::ostringstream out;
  out << "# shardsim against published training runs\n\n"
      << "Generated by `" << command << "` from `docs/validation/published-runs.yaml` (sources, "
      << "layouts, what was assumed where a source is silent, and the figures as published). "
      << "Each run is replayed with its own layout: `estimate` (the simulation's closed form, "
      << "each pass's transfers sharing links) and `simulate` (symmetric mode). Error = predicted throughput / "
      << "measured - 1 (measured step time / predicted - 1): **positive is optimistic**.\n\n"
      << "Three predictions per run: **structural** (nothing fitted: every parameter from a "
      << "datasheet, a kernel-level benchmark or framework code), **fitted** (what the commands "
      << "print: the one parameter fitted per GPU, `efficiency.sustained_compute`, section "
      << "\"Fitted parameter\" below) and **left out** (the same fit made without the run's own "
      << "source: the error to expect on a source the fit has not seen). None of the sources "
      << "issue 14 reserves for independent evaluation is here. `tests/published_suite_test.cc` "
      << "replays the file and fails when any of the three MAPEs rises more than 1 point above "
      << "the one recorded below.\n\n";
  out << "| run | source | model | GPUs | layout | published | measured step (s) | structural (s) | error | fitted (s) | error | left out | estimate error | sim MFU | fits |\n"
      << "|---|---|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|:---:|\n";
  for (const PublishedResult& r : report.results) {
    const PublishedRun& run = *r.run;
    out << "| " << run.id << " | " << run.source << " | " << run.model
        << (run.seq_len ? " (seq " + std::to_string(*run.seq_len) + ")" : "") << " | " << run.gpus << " | `"
        << run.layout << "` | " << run.published << " | ";
    if (!r.failure.empty()) {
      out << "not replayed: " << r.failure << " | | | | | | | | |\n";
      continue;
    }
    if (!run.timed()) {
      out << "memory only (section \"Peak memory\") | | | | | | | | " << (r.fits ? "yes" : "no") << " |\n";
      continue;
    }
    out << Fmt("%.3f", r.measured_step_s) << " | " << Fmt("%.3f", r.structural_s) << " | "
        << Fmt("%+.1f %%", 100 * r.structural_error) << " | " << Fmt("%.3f", r.simulated_s) << " | "
        << Fmt("%+.1f %%", 100 * r.simulated_error) << " | " << Fmt("%+.1f %%", 100 * r.loso_error) << " | "
        << Fmt("%+.1f %%", 100 * r.estimate_error) << " | " << Fmt("%.1f", 100 * r.mfu) << " % | "
        << (r.fits ? "yes" : "no") << " |\n";
  }
  out << "\n## By source\n\n"
      << "| source | stack | runs | structural MAPE | structural median | fitted MAPE | fitted median | left-out MAPE | left-out median | fitted max abs | estimate MAPE |\n"
      << "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const SourceStats& s : report.sources) {
    std::string stack;
    for (const PublishedSource& src : suite.sources) {
      if (src.key == s.key) stack = src.stack;
    }
    out << "| " << s.key << " | " << stack << " | " << s.simulated.runs << " | " << Fmt("%.1f %%", 100 * s.structural.mape)
        << " | " << Fmt("%+.1f %%", 100 * s.structural.median_signed) << " | " << Fmt("%.1f %%", 100 * s.simulated.mape)
        << " | " << Fmt("%+.1f %%", 100 * s.simulated.median_signed) << " | " << Fmt("%.1f %%", 100 * s.loso.mape) << " | "
        << Fmt("%+.1f %%", 100 * s.loso.median_signed) << " | " << Fmt("%.1f %%", 100 * s.simulated.max_abs) << " | "
        << Fmt("%.1f %%", 100 * s.estimate.mape) << " |\n";
  }
  out << "\n**Over " << report.simulated.runs << " runs from " << report.sources.size()
      << " sources: simulation MAPE " << Fmt("%.1f", 100 * report.simulated.mape) << " % fitted, "
      << Fmt("%.1f", 100 * report.structural.mape) << " % structural, " << Fmt("%.1f", 100 * report.loso.mape)
      << " % left one source out; estimate MAPE " << Fmt("%.1f", 100 * report.estimate.mape)
      << " %**. Median signed error: fitted " << Fmt("%+.1f %%", 100 * report.simulated.median_signed) << ", structural "
      << Fmt("%+.1f %%", 100 * report.structural.median_signed) << ", left out " << Fmt("%+.1f %%", 100 * report.loso.median_signed)
      << "; fitted mean signed " << Fmt("%+.1f %%", 100 * report.simulated.mean_signed) << ", largest "
      << Fmt("%.1f %%", 100 * report.simulated.max_abs) << ".";
  if (report.failed > 0) out << " " << report.failed << " runs could not be replayed (listed above).";
  if (report.memory_only > 0) {
    out << " " << report.memory_only << " more runs are checked for their peak memory only (their source publishes no "
        << "throughput on a GPU whose rate is known).";
  }
  out << "\n\n## Fitted parameter\n\n"
      << "`efficiency.sustained_compute`, per GPU architecture (`gpu.architecture`): the share of the kernel benchmarks' GEMM and "
      << "attention rates (MAMF, the GEMM shape table, FlashAttention's tables) that the runs "
      << "sustained. For each run the simulation at 1 and at " << Fmt("%.2f", 1 / kProbeComputeTime)
      << " gives the line on which the factor that makes it exact is read; the fit is the median "
      << "over the architecture's sources of each source's median of those (a source is one vote, "
      << "whatever its number of runs: its runs share a stack, a cluster and a way of measuring, and "
      << "leave-one-source-out holds them out together), made only where two or more sources give runs. It is what the structural model leaves "
      << "out, not one measured effect: clocks under a node's power limit, kernels between the "
      << "modelled ones, per-stack overheads. `estimate`, `simulate` and `plan` apply it "
      << "(`docs/validation/compute-fits.yaml`) to a description that does not set the field; "
      << "`--unfitted` gives the structural model.\n\n"
      << "| architecture | GPUs | sustained_compute | runs | sources | structural MAPE / median | fitted MAPE / median | left-out MAPE / median | factor without each source |\n"
      << "|---|---|---:|---:|---:|---:|---:|---:|---|\n";
  for (const ComputeFitEstimate& f : report.fits) {
    std::string loso;
    for (const auto& [source, factor] : f.loso) loso += (loso.empty() ? "" : ", ") + source + " " + Fmt("%.3f", factor);
    out << "| " << f.architecture << " | " << f.gpus << " | " << Fmt("%.4f", f.sustained) << " | " << f.runs << " | " << f.sources << " | "
        << Fmt("%.1f %%", 100 * f.structural.mape) << " / " << Fmt("%+.1f %%", 100 * f.structural.median_signed) << " | "
        << Fmt("%.1f %%", 100 * f.fitted.mape) << " / " << Fmt("%+.1f %%", 100 * f.fitted.median_signed) << " | "
        << Fmt("%.1f %%", 100 * f.held_out.mape) << " / " << Fmt("%+.1f %%", 100 * f.held_out.median_signed) << " | " << loso
        << " |\n";
  }
  {
    std::set<std::string> unfit;
    for (const PublishedResult& r : report.results) {
      if (!Timed(r)) continue;
      bool has = false;
      for (const ComputeFitEstimate& f : report.fits) has = has || f.architecture == r.architecture;
      if (!has) unfit.insert(r.architecture);
    }
    for (const std::string& g : unfit) out << "\n" << g << ": not fitted (its runs come from one source).\n";
  }
  out << "\n\n## Peak memory\n\n"
      << "Where a source publishes the memory a run used per GPU, as it measured it: the **device**'s "
      << "use (FlagPerf: sampled from nvidia-smi, `base/vendors/nvidia/nvidia_monitor.py`, the caching "
      << "allocator's holding included) or the caching **allocator**'s reserved peak (torchtitan: "
      << "torch.cuda's reserved_bytes.all.peak, `torchtitan/components/metrics.py`, without the CUDA "
      << "context and NCCL's own buffers). Beside it the simulation's peak (the busiest rank's "
      << "weights, gradients, optimizer states, activations and buffers, with the hardware "
      << "description's reserved memory and NCCL's buffers for the layout's communicators) and that "
      << "peak as the source measures it: on the device reserved + (peak - reserved) / (1 - "
      << "memory_fragmentation), the same allocator share the fit verdict takes off the capacity "
      << "(docs/hardware.md); in the allocator (peak - reserved - NCCL's buffers) / (1 - "
      << "memory_fragmentation). Error = predicted / measured - 1.\n\n"
      << "| run | measured | as | predicted peak | predicted as measured | error |\n"
      << "|---|---:|---|---:|---:|---:|\n";
  for (const PublishedResult& r : report.results) {
    if (!r.failure.empty() || !r.run->measured_memory_bytes) continue;
    const bool allocator = r.run->measured_memory_kind == PublishedRun::MemoryKind::kAllocatorReserved;
    out << "| " << r.run->id << " | " << Fmt("%.1f GiB", *r.run->measured_memory_bytes / kGiB) << " | "
        << (allocator ? "allocator" : "device") << " | " << Fmt("%.1f GiB", r.peak_memory_bytes / kGiB) << " | "
        << Fmt("%.1f GiB", r.predicted_memory_bytes / kGiB) << " | " << Fmt("%+.1f %%", 100 * r.memory_error) << " |\n";
  }
  out << "\n**Peak memory over " << report.memory.runs << " runs: MAPE "
      << Fmt("%.1f %%", 100 * report.memory.mape) << ", mean signed " << Fmt("%+.1f %%", 100 * report.memory.mean_signed)
      << ", largest " << Fmt("%.1f %%", 100 * report.memory.max_abs) << ".**";
  {
    // By source, in the file's order: issue 14's memory goal is per published peak.
    std::vector<std::string> parts;
    for (const PublishedSource& src : suite.sources) {
      std::vector<double> errors;
      for (const PublishedResult& r : report.results) {
        if (r.failure.empty() && r.run->measured_memory_bytes && r.run->source == src.key) errors.push_back(r.memory_error);
      }
      if (errors.empty()) continue;
      const ErrorStats st = StatsOf(errors);
      parts.push_back(src.key + " " + std::to_string(st.runs) + " runs, MAPE " + Fmt("%.1f %%", 100 * st.mape) +
                      ", mean signed " + Fmt("%+.1f %%", 100 * st.mean_signed));
    }
    if (!parts.empty()) out << " By source: " << Join(parts, "; ") << ".";
  }
  if (const MemoryBandEstimate band = MemoryBandOf(report); band.runs > 0) {
    out << "\n\nThe memory band `estimate`, `simulate` and `plan` print beside a predicted peak (as the device "
        << "would show it in use): measured / predicted, the 80 % prediction interval for a run from an unseen "
        << "source over these runs (`PredictionBandOf`, as the error bands below), **"
        << Fmt("%.2f", band.p10) << "-" << Fmt("%.2f", band.p90) << "x** (middle " << Fmt("%.2f", band.p50) << "; "
        << band.runs << " runs from " << band.sources << " sources: " << band.source_runs
        << "). Nothing in the memory model is fitted, so these ratios are out of sample as they are; "
        << "leave-one-source-out coverage, each source's runs against the band of the others': "
        << Fmt("%.1f %%", 100 * band.loso_coverage) << " of " << band.loso_runs << " runs.";
  }
  out << "\n\n## Error bands\n\n"
      << "Measured / simulated step time per GPU architecture (the fit's class: one band for H100 and H200) "
      << "and precision, each run predicted with the fit made "
      << "without its source (the \"left out\" column: the error to expect on a stack or cluster the fit "
      << "has not seen, as a user's is); what `estimate`, `simulate` and `plan` print as the prediction's "
      << "band, from `docs/validation/error-bands.yaml`. A ratio above 1 means the run was slower than "
      << "predicted. The band is the 80 % prediction interval for one run from a source not here "
      << "(`PredictionBandOf`, src/report/published_suite.h): log ratios as a source's own shift plus a "
      << "run's spread within its source; with k sources of means m_j, their mean mu and sample variance "
      << "sigma_b^2 and the pooled within-source variance sigma_w^2, exp(mu +- t_{0.9, k-1} "
      << "sqrt(sigma_b^2 (1 + 1/k) + sigma_w^2)) (the prediction interval for a new observation of a normal "
      << "sample; Higgins, Thompson & Spiegelhalter 2009 for a new study of a random-effects meta-analysis), "
      << "p50 exp(mu). Until 2026-12-08 it was the p10-p90 of the pooled runs, which covered 58-78 % of each "
      << "held-out source's runs: sources differ by more than runs within one do. Leave-one-source-out "
      << "coverage, nested: the share of runs, each predicted without its source, inside the band the other "
      << "sources give when that source is left out of their fits too (each other source's runs at the fit "
      << "made without both; a calibrated band covers about 80 %).\n\n"
      << "| architecture | GPUs | precision | runs | sources | p10 | p50 | p90 | leave-one-source-out coverage |\n"
      << "|---|---|---|---:|---:|---:|---:|---:|---:|\n";
  for (const ErrorBandEstimate& b : ErrorBandsOf(report)) {
    out << "| " << b.architecture << " | " << b.gpus << " | " << b.dtype << " | " << b.runs << " | " << b.sources << " | " << Fmt("%.3f", b.p10)
        << " | " << Fmt("%.3f", b.p50) << " | " << Fmt("%.3f", b.p90) << " | "
        << (b.loso_runs ? Fmt("%.1f %%", 100 * (b.loso_coverage)) + " of " + std::to_string(b.loso_runs) : std::string("(one source)"))
        << " |\n";
  }
  const RankingTolerance ranking = RankingToleranceOf(report);
  out << "\nRanking tolerance: over the " << ranking.pairs << " pairs of runs from one source of the same model on "
      << "the same GPU at the same precision (another layout or GPU count), the median relative error of one's "
      << "prediction against the other's is " << Fmt("%.1f", 100 * ranking.tolerance) << " %: `plan` treats "
      << "layouts closer than that as ties and picks the most robust (docs/planner.md).\n";
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
      j.Field("timed", r.run->timed());
      if (r.run->timed()) {
        j.Field("measured_step_s", r.measured_step_s).Field("estimate_s", r.estimate_s);
        j.Field("estimate_error", r.estimate_error).Field("simulated_s", r.simulated_s);
        j.Field("simulated_error", r.simulated_error).Field("mfu", r.mfu);
        j.Field("sustained_compute", r.sustained).Field("structural_s", r.structural_s);
        j.Field("structural_error", r.structural_error).Field("left_out_s", r.loso_s).Field("left_out_error", r.loso_error);
      }
      j.Field("peak_memory_bytes", r.peak_memory_bytes).Field("device_memory_bytes", r.device_memory_bytes);
      j.Field("fits", r.fits);
      if (r.run->measured_memory_bytes) {
        j.Field("measured_memory_bytes", *r.run->measured_memory_bytes);
        j.Field("measured_memory_kind", r.run->measured_memory_kind == PublishedRun::MemoryKind::kAllocatorReserved
                                            ? "allocator_reserved" : "device");
        j.Field("predicted_memory_bytes", r.predicted_memory_bytes).Field("memory_error", r.memory_error);
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
    StatsJson(j, "structural", s.structural);
    StatsJson(j, "left_out", s.loso);
    StatsJson(j, "estimate", s.estimate);
    j.EndObject();
  }
  j.EndArray();
  StatsJson(j, "simulated", report.simulated);
  StatsJson(j, "structural", report.structural);
  StatsJson(j, "left_out", report.loso);
  StatsJson(j, "estimate", report.estimate);
  StatsJson(j, "memory", report.memory);
  j.Key("fits").BeginArray();
  for (const ComputeFitEstimate& f : report.fits) {
    j.BeginObject().Field("architecture", f.architecture).Field("gpus", f.gpus).Field("sustained_compute", f.sustained);
    j.Field("runs", static_cast<int64_t>(f.runs)).Field("sources", static_cast<int64_t>(f.sources));
    StatsJson(j, "structural", f.structural);
    StatsJson(j, "fitted", f.fitted);
    StatsJson(j, "left_out", f.held_out);
    j.EndObject();
  }
  j.EndArray();
  j.Field("failed", static_cast<int64_t>(report.failed));
  j.Field("memory_only", static_cast<int64_t>(report.memory_only));
  j.EndObject();
  return j.str();
}

}  // namespace shardsim
