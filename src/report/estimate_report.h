// Renders an Estimate as a human-readable report or as JSON with fixed key names
// (parameters, peak_memory_bytes, memory_breakdown{weights, gradients, optimizer,
// activations, other}, estimated_iteration_time_s, layout, ...): see docs/cli.md.
#pragma once

#include <string>

#include "src/cost/estimate.h"
#include "src/hardware/hardware_spec.h"
#include "src/model/model_spec.h"

namespace shardsim {

std::string EstimateText(const ModelSpec& m, const HardwareSpec& hw, const Estimate& e);
std::string EstimateJson(const ModelSpec& m, const HardwareSpec& hw, const Estimate& e);

}  // namespace shardsim
