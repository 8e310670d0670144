// Plan files: a chosen layout with everything needed to run or re-simulate it — the model
// and hardware descriptions embedded in full (so the file stands alone), the GPU count, the
// layout, and the figures predicted when it was planned. Written by `shardsim plan --out`,
// read by `simulate --plan` (and `run --plan`).
#pragma once

#include <string>

#include "src/hardware/hardware_spec.h"
#include "src/layout/layout.h"
#include "src/model/model_spec.h"
#include "src/util/status.h"

namespace shardsim {

struct PlanPrediction {
  double iteration_time_s = 0, tokens_per_s = 0, model_tflops_per_gpu = 0,
         hardware_tflops_per_gpu = 0, mfu = 0, peak_memory_bytes = 0;
  bool fits = false;
};

struct PlanFile {
  ModelSpec model;
  HardwareSpec hardware;
  int64_t gpus = 0;
  Layout layout;
  std::string objective;
  PlanPrediction predicted;
};

std::string FormatPlanFile(const PlanFile& plan);
StatusOr<PlanFile> LoadPlanFile(const std::string& path);
StatusOr<PlanFile> ParsePlanFile(const std::string& text, const std::string& name);

// The descriptions as YAML text in the schema of models/*.yaml and hardware/*.yaml, with
// quantities in base units so they read back exactly.
std::string ModelYaml(const ModelSpec& m);
std::string HardwareYaml(const HardwareSpec& hw);

}  // namespace shardsim
