// Reads a DeepSpeed config JSON (what planner/emit.h's EmitDeepSpeed writes, or a user's own)
// into the layout keys it holds, over a base layout for those it cannot hold (tensor and
// pipeline sizes are Megatron-DeepSpeed command-line arguments; the schedule, sequence and
// context parallelism and the recompute choice live in the model code).
//
// Keys and defaults: deepspeedai/DeepSpeed edaa72212, deepspeed/runtime/constants.py and
// deepspeed/runtime/zero/config.py (DeepSpeedZeroConfig). Inside zero_optimization an unknown
// key is an error with a "did you mean", as DeepSpeed's own config models forbid extra fields
// (deepspeed/runtime/config_utils.py, extra="forbid"); other top-level sections (optimizer,
// scheduler, logging) are listed in `ignored`.
#pragma once

#include <string>
#include <vector>

#include "src/layout/layout.h"
#include "src/util/status.h"

namespace shardsim {

struct DeepSpeedRead {
  // `base` with what the config sets: mbs, gbs and dp (train_batch_size = micro batch x
  // accumulation steps x data-parallel ranks, any two of the three given), zero, overlap_dp
  // (overlap_comm; DeepSpeed's default is on for stage 3 only), offload, bucket_params
  // (reduce_bucket_size, when given), prefetch and live_params (stage 3), dtype.
  Layout layout;
  std::vector<std::string> ignored;  // top-level keys read but not modelled
  std::vector<std::string> warnings;
};

StatusOr<DeepSpeedRead> ParseDeepSpeedConfig(const std::string& text, const std::string& name,
                                             const Layout& base);

}  // namespace shardsim
