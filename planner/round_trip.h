// Round trip of an export: the configuration planner/emit.h wrote for a plan is read back by
// shardsim's own reader for that format (src/io/megatron_args.h, src/io/nemo_overrides.h,
// src/io/deepspeed_config.h),
// and must give the planned layout (and, for Megatron-LM arguments, the planned model) and fit
// in GPU memory by shardsim's memory model. What a DeepSpeed config cannot hold (tp, pp, the
// schedule, sp, cp, recompute) is taken from the plan; every key it holds is reset to its
// default before reading, so each must come back from the file.
#pragma once

#include <string>
#include <vector>

#include "src/hardware/hardware_spec.h"
#include "src/layout/layout.h"
#include "src/model/model_spec.h"

namespace shardsim::planner {

struct RoundTrip {
  std::string format;                    // "megatron", "nemo" or "deepspeed"
  std::string read_back;                 // FormatLayout of the layout read back ("" on error)
  std::vector<std::string> differences;  // layout keys and model fields that differ; a read error
  std::vector<std::string> unexpressed;  // the plan's keys the format leaves to the plan (DeepSpeed)
  double memory_bytes = 0;               // peak memory of the layout read back
  double memory_limit_bytes = 0;
  bool fits() const { return memory_bytes <= memory_limit_bytes; }
  bool ok() const { return differences.empty() && fits(); }
  // One line: "round trip (megatron): read back as planned; 61.2 GiB of 79.6 GiB" or what failed.
  std::string Summary() const;
};

// `config` is what EmitMegatron, EmitNemo or EmitDeepSpeed wrote for `planned` (resolved for `gpus`).
RoundTrip CheckRoundTrip(const std::string& format, const std::string& config, const ModelSpec& m,
                         const HardwareSpec& hw, int64_t gpus, const Layout& planned,
                         double memory_limit_bytes);

}  // namespace shardsim::planner
