// Renders a SimResult: a text report, the fixed-key JSON (iteration_time_s, tokens_per_s,
// model_tflops_per_gpu, hardware_tflops_per_gpu, mfu, peak_memory_bytes, fits,
// memory_breakdown, time_breakdown, layout; docs/cli.md), and a Chrome trace-event file.
#pragma once

#include <string>

#include "src/hardware/hardware_spec.h"
#include "src/model/model_spec.h"
#include "src/sim/simulator.h"

namespace shardsim {

std::string SimulationText(const ModelSpec& m, const HardwareSpec& hw, const SimResult& r,
                           const std::vector<std::string>& warnings);
std::string SimulationJson(const ModelSpec& m, const HardwareSpec& hw, const SimResult& r,
                           const std::vector<std::string>& warnings);
// Chrome trace-event JSON (loads in Perfetto): one process per rank, one thread per stream,
// each task a complete event with its layer, micro-batch, bytes and FLOPs in args; the
// rank's activation memory as a counter track.
std::string ChromeTrace(const SimResult& r);

}  // namespace shardsim
