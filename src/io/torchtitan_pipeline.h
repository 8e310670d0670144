// torchtitan's pipeline split (pytorch/torchtitan v0.2.2, 73a0e6979,
// torchtitan/distributed/pipeline_parallel.py), both ways: the transformer blocks each virtual
// stage gets from its settings, and the settings that give a layout's placement
// (src/layout/pipeline.h), so `plan --emit torchtitan` writes a split torchtitan builds as
// planned and the TOML reader reads it back.
//
// torchtitan counts the embedding as `pipeline_parallel_first_stage_less_layers` blocks and
// the final norm + output as `..._last_stage_less_layers` (default 1 each): with E = layers +
// first + last effective blocks over S stages, stage i gets E / S, one more for the first E % S
// stages, the first stage `first` fewer real blocks and the last `last` fewer
// (generate_llm_fqn_per_model_part). S is pp x stages per rank: 1 for single-stage schedules
// (1F1B, GPipe), 2 for multi-stage ones, or ceil(E / pipeline_parallel_layers_per_stage)
// (pipeline_llm). Stage s sits on rank s % pp, or for the V schedules (ZBVZeroBubble,
// DualPipeV) on ranks s and 2 pp - 1 - s (pipeline_module_split): shardsim's positions.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "src/layout/layout.h"
#include "src/model/model_spec.h"
#include "src/util/status.h"

namespace shardsim {

struct TorchtitanSplit {
  int64_t first_less = 1, last_less = 1;    // the two settings; torchtitan's defaults
  std::optional<int64_t> layers_per_stage;  // unset: the schedule's default stage count
};

// The blocks of each of `stages` virtual stages (generate_llm_fqn_per_model_part); errors as
// torchtitan raises them (more stages than effective blocks, a weight above the blocks per
// stage).
StatusOr<std::vector<int64_t>> TorchtitanStageBlocks(int64_t stages, int64_t layers, int64_t first_less,
                                                     int64_t last_less);

// The virtual stages pipeline_llm builds for `pp` ranks (errors as it raises them).
StatusOr<int64_t> TorchtitanStageCount(int64_t pp, bool multi_stage_schedule, const TorchtitanSplit& split,
                                       int64_t layers);

// Whether shardsim's schedule `s` is one of torch's multi-stage schedule classes
// (Interleaved1F1B, ZBVZeroBubble); GPipe and 1F1B are single-stage.
bool MultiStageSchedule(Schedule s);

// The settings under which torchtitan places `l`'s layers (pp > 1, valid) on the positions
// PositionLayers gives, or why no settings do.
StatusOr<TorchtitanSplit> TorchtitanSplitFor(const ModelSpec& m, const Layout& l);

// The split keys of a layout (pp, vpp and schedule set in `l`) that place `blocks` (per
// position) as torchtitan does: the even split, the embedding and/or loss counted, or first/
// last stage layers; an error when no layout split places them so.
Status SetSplitFromBlocks(const ModelSpec& m, const std::vector<int64_t>& blocks, Layout* l);

}  // namespace shardsim
