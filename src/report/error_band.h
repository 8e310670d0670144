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
  // measured / simulated step time: the 80 % prediction interval's ends and its middle
  // (published_suite.h PredictionBandOf), the 10th, 50th and 90th percentiles it predicts
  double p10 = 0, p50 = 0, p90 = 0;
  double sustained_compute = 1;      // of the predictions it was measured on (compute_fit.h)
  double loso_coverage = 0;
};

// Measured / predicted peak memory per GPU over the published runs with a measured peak
// (published_suite.h MemoryBandOf): one band for every GPU and stack.
struct MemoryBand {
  int64_t runs = 0, sources = 0;
  std::string source_runs;  // "<source> <runs>, ..."
  double p10 = 0, p50 = 0, p90 = 0;
  double loso_coverage = 0;
};

struct ErrorBands {
  std::vector<ErrorBand> bands;
  std::optional<MemoryBand> memory;  // absent when no run publishes a peak
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

// "measured step time 1.09-1.52x this prediction (7.2-10.1 s), the 80 % prediction interval for
// a run from an unseen source, from 22 published runs on <architecture> GPUs (<names>) at
// <dtype> from 4 sources, each predicted without its source's fit
// (docs/validation/published-runs.md)", or the reason there is no band.
std::string ErrorBandText(const HardwareSpec& hw, DType dtype, double iteration_time_s);
// The JSON field "error_band": its figures, or only a "note" saying why there is none.
void ErrorBandJson(JsonWriter& j, const HardwareSpec& hw, DType dtype, double iteration_time_s);

// The bundled memory band for predictions on `gpu`, or nullopt (and *why): none for a device
// that names no GPU architecture (a CPU host), the published peaks being of GPUs.
std::optional<MemoryBand> FindMemoryBand(const GpuSpec& gpu, std::string* why);
// The memory band applied to a predicted peak of `peak_bytes` (the fit verdict's figure) as the
// device would show it in use (GpuSpec::DeviceMemoryInUse), against the device's capacity:
// "memory band: 71.6-96.7 GiB in use of 80.00 GiB (measured peaks ran 0.89-1.20x the
// prediction, the 80 % prediction interval for an unseen source, from 18 published runs from 2
// sources: ...); at p10 it would fit: it may
// run", or the reason there is none. The last clause: a layout that fits but would not at p90
// is "tight"; one that does not fit but would at p10 "may run".
std::string MemoryBandText(const HardwareSpec& hw, double peak_bytes);
// The JSON field "memory_band": its figures, or only a "note".
void MemoryBandJson(JsonWriter& j, const HardwareSpec& hw, double peak_bytes);

}  // namespace shardsim
