// The published validation suite (issue 14, item 4): training runs whose step time or
// throughput a framework's authors published with the layout they ran, replayed through the
// estimate and the symmetric simulation with that layout, and the errors per run, per source
// and overall. The runs live in a YAML file (docs/validation/published-runs.yaml, format in
// docs/cli.md, "validate --published"); `shardsim validate --published FILE` prints the table.
//
// Sign convention: error = predicted throughput / measured throughput - 1 = measured step time
// / predicted step time - 1, so a positive error is an optimistic prediction (the issue's
// "predicts more throughput than measured").
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "src/report/compute_fit.h"
#include "src/util/status.h"

namespace shardsim {

struct PublishedSource {
  std::string key;       // the rows' `source`
  std::string citation;  // where the figures were read (document, table, commit)
  std::string stack;     // the software stack as the source names it
};

struct PublishedRun {
  std::string id;
  std::string source;    // a PublishedSource key
  std::string model;     // bundled model name or a path
  std::string hardware;  // bundled hardware name or a path
  int64_t gpus = 0;
  std::optional<int64_t> seq_len;  // when the run's sequence differs from the model file's
  std::string layout;    // shardsim layout spec: what the source states plus `assumed`
  std::string stack;     // optional: the stacks/ description of the framework that ran it
  std::string assumed;   // the layout fields the source does not state, and why they were chosen
  std::string published;  // the measured figure exactly as published
  // At most one of the two, as published: step time, or tokens per second per GPU. A run with
  // neither is checked for memory only (measured_memory is then required): its source publishes
  // a peak but a throughput on a GPU whose rate is not known (docs/cli.md).
  std::optional<double> measured_step_s;
  std::optional<double> measured_tokens_per_s_per_gpu;
  bool timed() const { return measured_step_s.has_value() || measured_tokens_per_s_per_gpu.has_value(); }
  // Peak memory per GPU as published, where the source gives one: what the predicted peak is
  // checked against, as the source measured it (measured_memory_kind): the device's use
  // (FlagPerf's "mem", nvidia-smi) or the caching allocator's reserved peak (torchtitan's
  // "Memory(GiB)", torch.cuda's reserved_bytes.all.peak).
  std::optional<double> measured_memory_bytes;
  enum class MemoryKind { kDevice, kAllocatorReserved };
  MemoryKind measured_memory_kind = MemoryKind::kDevice;
  std::string notes;
};

struct PublishedSuite {
  std::vector<PublishedSource> sources;
  std::vector<PublishedRun> runs;
};

// Reads and checks the file: every field located on error, unknown keys rejected, each run's
// source defined, ids unique, exactly one measured figure per run.
StatusOr<PublishedSuite> LoadPublishedSuite(const std::string& file);

struct PublishedResult {
  const PublishedRun* run = nullptr;
  std::string gpu;    // the replayed cluster's GPU name
  std::string dtype;  // the layout's precision
  std::string architecture;  // GpuSpec::FitKey(): the fit's class
  std::string failure;  // non-empty: the run could not be replayed (why); no figures below
  double measured_step_s = 0;   // the published figure as a step time (0: a memory-only run)
  // With the GPU's fitted sustained_compute (1 where the GPU has no fit): what the commands
  // predict.
  double estimate_s = 0, simulated_s = 0;
  double estimate_error = 0, simulated_error = 0;  // fractions, sign convention above
  double mfu = 0;               // the simulation's
  double peak_memory_bytes = 0;  // the simulation's, peak rank
  // That peak as the device shows it in use (GpuSpec::DeviceMemoryInUse: the allocator's
  // holding included), what sources that read nvidia-smi publish.
  double device_memory_bytes = 0;
  // The predicted figure of the run's measured_memory_kind: device_memory_bytes, or the
  // allocator's reserved peak (GpuSpec::AllocatorReserved).
  double predicted_memory_bytes = 0;
  double memory_error = 0;  // predicted_memory_bytes / measured - 1, when the run has a measured peak
  bool fits = false;
  // The structural model (sustained_compute 1), and the fit made without this run's source.
  double structural_s = 0, structural_error = 0;
  double loso_s = 0, loso_error = 0;
  double sustained = 1;  // the factor the fitted prediction used
  // d simulated_s / d (1 / sustained_compute) at 1, from a second simulation at 1 / 1.25: how
  // much of the step is the scaled math (the fit's linearisation).
  double compute_slope_s = 0;
};

struct ErrorStats {
  size_t runs = 0;
  double mape = 0;          // mean |error|, fraction
  double mean_signed = 0;   // mean error
  double median_signed = 0;
  double max_abs = 0;
};

struct SourceStats {
  std::string key;
  ErrorStats estimate, simulated, structural, loso;
};

// The fitted parameter of one GPU architecture (compute_fit.h): the median over its sources of
// each source's median of the sustained_compute that makes a run's simulation equal its
// measurement (linearised with compute_slope_s; a source is one vote, whatever its runs), fitted only where runs from two or more sources allow a
// leave-one-source-out error and the factor is within the hardware field's bounds [0.05, 2];
// `loso` gives the factor fitted without each source (1 where that leaves no fit).
struct ComputeFitEstimate {
  std::string architecture;
  std::string gpus;  // comma-separated names of the GPUs its runs ran on
  double sustained = 1;
  size_t runs = 0, sources = 0;
  std::vector<std::pair<std::string, double>> loso;  // source, factor fitted without it
  ErrorStats structural, fitted, held_out;
};

struct PublishedReport {
  std::vector<PublishedResult> results;  // in the file's order
  std::vector<SourceStats> sources;      // in the file's order, sources with runs only
  ErrorStats estimate, simulated;        // over every replayed timed run, with the fit
  ErrorStats structural, loso;           // the same without it, and left one source out
  ErrorStats memory;                     // predicted against measured peak memory, where published
  std::vector<ComputeFitEstimate> fits;  // per architecture with runs from >= 2 sources
  size_t failed = 0;                     // runs that could not be replayed
  size_t memory_only = 0;                // replayed runs with a measured peak and no time
};

// Replays every run (estimate, then the symmetric simulation) structurally and at a probe
// factor, fits each GPU's sustained_compute, and replays again with the fit and with each
// source's leave-one-source-out fit.
// `progress`, when given, hears of each run as its replay begins: the pass ("structural" or
// "fitted"), the run's index (from 0) and the count, and its id.
using PublishedProgress = std::function<void(const std::string& pass, size_t run, size_t runs, const std::string& id)>;
PublishedReport EvaluatePublishedSuite(const PublishedSuite& suite, const PublishedProgress& progress = {});
// The fits as compute_fit.h's records (the file the commands read).
std::vector<ComputeFit> ComputeFitsOf(const PublishedReport& report);
ErrorStats StatsOf(const std::vector<double>& errors);

// The 80 % prediction interval of measured / predicted for one run from a source the suite does
// not hold: log ratios as a source's own shift plus a run's spread within its source. With k
// sources of means m_j (each source weighs one, whatever its runs), their mean mu and sample
// variance sigma_b^2, and the pooled within-source variance sigma_w^2 (n runs: over n - k
// degrees of freedom), a new source's mean is a new draw, mu +- t sigma_b sqrt(1 + 1/k) (the
// prediction interval for one new observation of a normal sample), and its run adds sigma_w^2:
// exp(mu +- t_{0.9, k-1} sqrt(sigma_b^2 (1 + 1/k) + sigma_w^2)), mid exp(mu). With one source
// nothing is known of the spread between sources: its runs' own (t over n - 1); with fewer than
// two runs there is no band (all zero), and no class, suite or held-out check gets one. A random-effects
// view of the sources (Higgins, Thompson & Spiegelhalter 2009, JRSS A 172(1), the prediction
// interval of a new study); the p10-p90 of the pooled runs it replaced covered 58-78 % of each
// held-out source's runs, as sources differ by more than runs within one do.
struct PredictionBand {
  double lo = 0, mid = 0, hi = 0;
};
PredictionBand PredictionBandOf(const std::vector<std::vector<double>>& ratios_by_source);
double StudentT90(int64_t df);  // Student's t one-sided 90 % critical value, df >= 1

// The band of measured / simulated step time over the replayed runs of one GPU architecture
// (the fit's class, so H100 and H200 together) and precision (issue 14, item 6), each run
// predicted with the fit made without its source (the band is of errors on a stack the fit has
// not seen, as a user's run is, and the in-sample residuals understate those):
// PredictionBandOf over the sources, its lo and hi as p10 and p90 (of the predictive
// distribution), mid as p50. And how often a run falls inside the band computed without its
// own source (leave-one-source-out coverage, nested; 0.8 is what a calibrated band gives): the
// held-out run predicted with the fit made without its source, against the band of the other
// sources' runs, each source's at the fit made without it and the held-out one (linearised with
// compute_slope_s; structural where none is left).
struct ErrorBandEstimate {
  std::string architecture;  // GpuSpec::FitKey(), the fit's class: a band per (architecture, dtype)
  std::string gpus;          // comma-separated names of the GPUs its runs ran on
  std::string dtype;
  size_t runs = 0, sources = 0;
  double p10 = 0, p50 = 0, p90 = 0;
  double sustained = 1;      // the sustained_compute of the predictions the band is of
  double loso_coverage = 0;  // fraction of runs inside their leave-one-source-out band
  size_t loso_runs = 0;      // runs whose class has another source to compute it from
};
std::vector<ErrorBandEstimate> ErrorBandsOf(const PublishedReport& report);

// How far apart two predictions can be and still not be told apart (issue 14, item 6): over
// every pair of replayed runs from the same source, of the same model on the same GPU at the
// same precision (so a different layout or GPU count), the relative error of the one's
// prediction against the other's, exp(|ln(r_i / r_j)|) - 1 with r = measured / simulated; the
// median of those. The planner treats layouts closer than that as ties.
struct RankingTolerance {
  double tolerance = 0;
  size_t pairs = 0;
};
RankingTolerance RankingToleranceOf(const PublishedReport& report);
double Percentile(std::vector<double> values, double p);  // p in [0, 1]

// The spread of measured / predicted peak memory per GPU over the runs whose source publishes
// one, each against the prediction of what the source measured (PublishedResult::
// predicted_memory_bytes: the device's use or the allocator's reserved peak): the 80 %
// prediction interval for a run from an unseen source (PredictionBandOf: lo, mid, hi as p10,
// p50, p90), and its nested leave-one-source-out coverage (each source's runs against the band
// of the others'; the p10-p90 of the pooled runs it replaced covered 77 %). The memory model has no fitted
// parameter, so the ratios are out of sample as they stand; one band for every GPU and stack
// (too few published peaks to split them).
struct MemoryBandEstimate {
  size_t runs = 0, sources = 0;
  std::string source_runs;  // "<source> <runs>, ...", in the file's order
  double p10 = 0, p50 = 0, p90 = 0;
  double loso_coverage = 0;
  size_t loso_runs = 0;  // runs with another source to compute a band from
};
MemoryBandEstimate MemoryBandOf(const PublishedReport& report);

// The bands as the YAML file the commands read (src/report/error_band.h).
std::string ErrorBandsYaml(const std::vector<ErrorBandEstimate>& bands, const RankingTolerance& ranking,
                           const MemoryBandEstimate& memory, const std::string& command);

// The Markdown table with the per-source and overall figures; `command` is the line that
// regenerates it.
std::string PublishedReportMarkdown(const PublishedSuite& suite, const PublishedReport& report,
                                    const std::string& command);  // includes ErrorBandsOf's table
std::string PublishedReportJson(const PublishedReport& report);

}  // namespace shardsim
