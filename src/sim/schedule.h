// The order in which one pipeline stage runs its forward and backward passes under a layout's
// schedule (GPipe, 1F1B, interleaved, zero-bubble's B/W split). Shared by the simulator's
// programs (program.h) and the runtime's executor, so both run the same order.
#pragma once

#include <cstdint>
#include <vector>

#include "src/layout/layout.h"

namespace shardsim {

enum class Pass : uint8_t { kForward, kBackward, kWeightGrad, kRecompute, kStep };

// One pass of one micro-batch through one model chunk (chunk < vpp; 0 without interleaving).
struct PipelineStep {
  Pass pass = Pass::kForward;
  int32_t mb = 0;
  int32_t chunk = 0;
};

// The passes `stage` runs, in order, for one iteration of `l` (resolved and valid).
// Interleaved: micro-batch m of chunk c lives on model chunk c * pp + stage.
std::vector<PipelineStep> ScheduleOrder(const Layout& l, int32_t stage);

}  // namespace shardsim
