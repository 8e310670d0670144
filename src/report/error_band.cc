// See error_band.h.
#include "src/report/error_band.h"

#include <cmath>

#include "src/io/bundled.h"
#include "src/io/yaml_reader.h"
#include "src/util/strings.h"
#include "src/util/units.h"

namespace shardsim {

StatusOr<ErrorBands> LoadErrorBands(const std::string& file) {
  SHARDSIM_ASSIGN_OR_RETURN(YamlFile f, YamlFile::Load(file));
  YamlMap root = f.Root();
  ErrorBands all;
  all.ranking_tolerance = root.Number("ranking_tolerance", 0, 1);
  all.ranking_pairs = root.Int("ranking_pairs", 0);
  std::vector<ErrorBand>& out = all.bands;
  for (YamlMap& b : root.MapList("bands")) {
    ErrorBand band;
    band.architecture = b.String("architecture");
    band.gpus = b.String("gpus");
    band.dtype = b.Choice("dtype", {"fp32", "tf32", "fp16", "bf16", "fp8"});
    band.runs = b.Int("runs", 1);
    band.sources = b.Int("sources", 1);
    band.p10 = b.Number("p10", 0.01, 100);
    band.p50 = b.Number("p50", 0.01, 100);
    band.p90 = b.Number("p90", 0.01, 100);
    band.sustained_compute = b.Number("sustained_compute", 0.05, 2);
    band.loso_coverage = b.Number("loso_coverage", 0, 1);
    if (!b.failed() && !(band.p10 <= band.p50 && band.p50 <= band.p90)) b.Error("p50", "expected p10 <= p50 <= p90");
    b.Finish();
    out.push_back(band);
  }
  if (std::optional<YamlMap> m = root.OptionalMap("memory_band")) {
    MemoryBand band;
    band.runs = m->Int("runs", 1);
    band.sources = m->Int("sources", 1);
    band.source_runs = m->String("source_runs");
    band.p10 = m->Number("p10", 0.01, 100);
    band.p50 = m->Number("p50", 0.01, 100);
    band.p90 = m->Number("p90", 0.01, 100);
    band.loso_coverage = m->Number("loso_coverage", 0, 1);
    if (!m->failed() && !(band.p10 <= band.p50 && band.p50 <= band.p90)) m->Error("p50", "expected p10 <= p50 <= p90");
    m->Finish();
    all.memory = band;
  }
  root.Finish();
  if (!f.status().ok()) return f.status();
  return all;
}

namespace {

const BundledData<ErrorBands>& BundledBands() {
  static const BundledData<ErrorBands> bundled =
      ReadBundledData<ErrorBands>("error-bands", "docs/validation", LoadErrorBands);
  return bundled;
}

}  // namespace

std::optional<ErrorBand> FindErrorBand(const std::string& architecture, DType dtype, double sustained, std::string* why) {
  const BundledData<ErrorBands>& b = BundledBands();
  if (!b.error.empty()) {
    *why = b.error;
    return std::nullopt;
  }
  for (const ErrorBand& band : b.value.bands) {
    if (band.architecture != architecture || band.dtype != DTypeName(dtype)) continue;
    // The file keeps 4 decimals.
    if (std::fabs(band.sustained_compute - sustained) > 5.1e-5) {
      *why = "the published runs' band is of predictions with sustained_compute " + Fmt("%.4f", band.sustained_compute) +
             ", this one uses " + Fmt("%.4f", sustained);
      return std::nullopt;
    }
    return band;
  }
  *why = "no published run on " + architecture + " (the GPU architecture, or the device where none is named) at " + DTypeName(dtype) + " is in the validation suite";
  return std::nullopt;
}

std::optional<double> BundledRankingTolerance(std::string* why) {
  const BundledData<ErrorBands>& b = BundledBands();
  if (!b.error.empty()) {
    *why = b.error;
    return std::nullopt;
  }
  return b.value.ranking_tolerance;
}

std::string ErrorBandText(const HardwareSpec& hw, DType dtype, double iteration_time_s) {
  std::string why;
  const std::optional<ErrorBand> band = FindErrorBand(hw.gpu.FitKey(), dtype, hw.gpu.efficiency.sustained(), &why);
  if (!band) return "error band: none (" + why + ")";
  return "error band: measured step time " + Fmt("%.2f", band->p10) + "-" + Fmt("%.2f", band->p90) +
         "x this prediction (" + Fmt("%.4g", band->p10 * iteration_time_s) + "-" + Fmt("%.4g", band->p90 * iteration_time_s) +
         " s), the 80 % prediction interval for a run from an unseen source, from " + std::to_string(band->runs) +
         " published runs on " + band->architecture + " GPUs (" + band->gpus + ") at " + band->dtype + " from " +
         std::to_string(band->sources) + " sources, each predicted without its source's fit (docs/validation/published-runs.md)";
}

void ErrorBandJson(JsonWriter& j, const HardwareSpec& hw, DType dtype, double iteration_time_s) {
  std::string why;
  const std::optional<ErrorBand> band = FindErrorBand(hw.gpu.FitKey(), dtype, hw.gpu.efficiency.sustained(), &why);
  j.Key("error_band");
  if (!band) {
    j.BeginObject().Field("note", why).EndObject();
    return;
  }
  j.BeginObject();
  j.Field("architecture", band->architecture).Field("gpus", band->gpus);
  j.Field("runs", band->runs).Field("sources", band->sources);
  j.Field("measured_over_predicted_p10", band->p10).Field("measured_over_predicted_p50", band->p50);
  j.Field("measured_over_predicted_p90", band->p90);
  j.Field("iteration_time_s_p10", band->p10 * iteration_time_s).Field("iteration_time_s_p90", band->p90 * iteration_time_s);
  j.Field("leave_one_source_out_coverage", band->loso_coverage);
  j.EndObject();
}

std::optional<MemoryBand> FindMemoryBand(const GpuSpec& gpu, std::string* why) {
  // The published peaks are of GPUs under a framework's caching allocator, so a device
  // without a GPU architecture (a CPU host) has none.
  if (gpu.architecture.empty()) {
    *why = "the published peaks are of GPUs; " + gpu.name + " names no GPU architecture";
    return std::nullopt;
  }
  const BundledData<ErrorBands>& b = BundledBands();
  if (!b.error.empty()) {
    *why = b.error;
    return std::nullopt;
  }
  if (!b.value.memory) {
    *why = "no published run in the validation suite gives its peak memory";
    return std::nullopt;
  }
  return b.value.memory;
}

namespace {

// The verdict's clause of the band: whether the band's ends land on the other side of the
// device's capacity than the prediction does.
std::string MemoryBandVerdict(const GpuSpec& gpu, const MemoryBand& band, double in_use) {
  const bool fits = in_use <= gpu.memory_bytes;
  if (fits && band.p90 * in_use > gpu.memory_bytes) return "tight: at p90 it would not fit";
  if (!fits && band.p10 * in_use <= gpu.memory_bytes) return "at p10 it would fit: it may run";
  return "";
}

}  // namespace

std::string MemoryBandText(const HardwareSpec& hw, double peak_bytes) {
  std::string why;
  const std::optional<MemoryBand> band = FindMemoryBand(hw.gpu, &why);
  if (!band) return "memory band: none (" + why + ")";
  const double in_use = hw.gpu.DeviceMemoryInUse(peak_bytes);
  const std::string verdict = MemoryBandVerdict(hw.gpu, *band, in_use);
  return "memory band: " + Fmt("%.1f", band->p10 * in_use / kGiB) + "-" + Fmt("%.1f", band->p90 * in_use / kGiB) +
         " GiB in use of " + Fmt("%.2f", hw.gpu.memory_bytes / kGiB) + " GiB (measured peaks ran " + Fmt("%.2f", band->p10) +
         "-" + Fmt("%.2f", band->p90) + "x the prediction, the 80 % prediction interval for an unseen source, from " + std::to_string(band->runs) +
         " published runs from " + std::to_string(band->sources) + " sources: " + band->source_runs +
         "; docs/validation/published-runs.md)" + (verdict.empty() ? "" : "; " + verdict);
}

void MemoryBandJson(JsonWriter& j, const HardwareSpec& hw, double peak_bytes) {
  std::string why;
  const std::optional<MemoryBand> band = FindMemoryBand(hw.gpu, &why);
  j.Key("memory_band");
  if (!band) {
    j.BeginObject().Field("note", why).EndObject();
    return;
  }
  const double in_use = hw.gpu.DeviceMemoryInUse(peak_bytes);
  j.BeginObject();
  j.Field("runs", band->runs).Field("sources", band->sources).Field("source_runs", band->source_runs);
  j.Field("measured_over_predicted_p10", band->p10).Field("measured_over_predicted_p50", band->p50);
  j.Field("measured_over_predicted_p90", band->p90);
  j.Field("device_memory_in_use_bytes", in_use);
  j.Field("device_memory_in_use_bytes_p10", band->p10 * in_use).Field("device_memory_in_use_bytes_p90", band->p90 * in_use);
  j.Field("device_memory_bytes", hw.gpu.memory_bytes);
  j.Field("verdict", MemoryBandVerdict(hw.gpu, *band, in_use));
  j.Field("leave_one_source_out_coverage", band->loso_coverage);
  j.EndObject();
}

}  // namespace shardsim
