// The one global parameter shardsim fits to measured end-to-end runs (DEVELOPERS.md's
// accuracy rules; issue 14, item 4): efficiency.sustained_compute per GPU, the share of the
// kernel benchmarks' GEMM and attention rates that the published runs on that GPU sustained
// (src/hardware/hardware_spec.h), per GPU architecture. `shardsim validate --published --fits-out` fits it on
// docs/validation/published-runs.yaml and writes docs/validation/compute-fits.yaml with the
// in-sample and leave-one-source-out errors; estimate, simulate and plan apply it to a
// hardware description that does not set the field, unless --unfitted, and say so.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "src/hardware/hardware_spec.h"
#include "src/util/json_writer.h"
#include "src/util/status.h"

namespace shardsim {

struct ComputeFit {
  std::string architecture;  // GpuSpec::FitKey(): gpu.architecture, else the GPU's name
  std::string gpus;          // the GPUs the runs ran on, comma-separated (for the report)
  double sustained_compute = 1;
  int64_t runs = 0, sources = 0;
  // Over those runs, simulated step time: MAPE (fractions) and median signed error
  // (published_suite.h's sign convention), structural (sustained 1), with the fit, and with
  // each source's runs predicted by the fit made without that source.
  double structural_mape = 0, fitted_mape = 0, loso_mape = 0;
  double structural_median = 0, fitted_median = 0, loso_median = 0;
};

// Reads a fits file (strict: unknown keys and bad values are located errors).
StatusOr<std::vector<ComputeFit>> LoadComputeFits(const std::string& file);
std::string ComputeFitsYaml(const std::vector<ComputeFit>& fits, const std::string& command);

// Sets hw->gpu.efficiency.sustained_compute from the bundled fits (docs/validation/
// compute-fits.yaml under the data root, read once) when the description leaves it unset and
// `unfitted` is false; records where the value came from in sustained_compute_origin. A
// description that sets the field keeps it; a GPU with no fit stays structural.
void ApplyComputeFit(HardwareSpec* hw, bool unfitted);

// "compute: sustained 0.83 x the kernel benchmarks' math rate, fitted on 51 published runs
// ..." or what the prediction uses instead, and the JSON field "compute_fit".
std::string ComputeFitText(const HardwareSpec& hw);
void ComputeFitJson(JsonWriter& j, const HardwareSpec& hw);

}  // namespace shardsim
