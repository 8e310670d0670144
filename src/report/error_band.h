// The error band every answer carries (issue 14, item 6): how far measured step times of
// published runs on the same GPU and precision fell from shardsim's simulation of them
// (docs/validation/error-bands.yaml, written by `shardsim validate --published --bands-out`).
// A band is a statement about the model's track record, not a correction: the prediction is
// printed as computed, and beside it the range the measured time fell in for comparable runs.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "src/hardware/hardware_spec.h"
#include "src/util/json_writer.h"
#include "src/util/status.h"

namespace shardsim {

struct ErrorBand {
  std::string architecture;  // GpuSpec::FitKey(): the band is of every GPU of it
  std::string gpus;          // the GPUs its runs ran on, for the reader
  std::string dtype;
  int64_t runs = 0, sources = 0;
  double p10 = 0, p50 = 0, p90 = 0;  // measured / simulated step time
  double sustained_compute = 1;      // of the predictions it was measured on (compute_fit.h)
  double loso_coverage = 0;
};

struct ErrorBands {
  std::vector<ErrorBand> bands;
  double ranking_tolerance = 0;  // published_suite.h's RankingTolerance
  int64_t ranking_pairs = 0;
};

// Reads a bands file (strict: unknown keys and bad values are located errors).
StatusOr<ErrorBands> LoadErrorBands(const std::string& file);

// The bundled ranking tolerance, or nullopt (and *why) when there is no bands file.
std::optional<double> BundledRankingTolerance(std::string* why);

// The bundled bands (docs/validation/error-bands.yaml under the data root, bundled.h), read once.
// The band of `architecture` (GpuSpec::FitKey()) at `dtype` for predictions made
// with `sustained` as efficiency.sustained_compute, or nullopt when no published run is on
// record for them or the band is of another factor (the fit, when this prediction is
// --unfitted); *why is then set to the reason.
std::optional<ErrorBand> FindErrorBand(const std::string& architecture, DType dtype, double sustained, std::string* why);

// "measured step time 1.09-1.52x this prediction (7.2-10.1 s), p10-p90 of 22 published runs
// on <architecture> GPUs (<names>) at <dtype> from 4 sources, each predicted without its
// source's fit (docs/validation/published-runs.md)", or the reason there is no band.
std::string ErrorBandText(const HardwareSpec& hw, DType dtype, double iteration_time_s);
// The JSON field "error_band": its figures, or only a "note" saying why there is none.
void ErrorBandJson(JsonWriter& j, const HardwareSpec& hw, DType dtype, double iteration_time_s);

}  // namespace shardsim
