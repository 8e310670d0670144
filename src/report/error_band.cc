// See error_band.h.
#include "src/report/error_band.h"

#include <cmath>


#include "src/io/bundled.h"
#include "src/io/yaml_reader.h"
#include "src/util/strings.h"

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
         " s), p10-p90 of " + std::to_string(band->runs) + " published runs on " + band->architecture + " GPUs (" + band->gpus + ") at " + band->dtype + " from " +
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

}  // namespace shardsim
