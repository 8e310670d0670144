// IterationProgram: the task graph of one training iteration, as one program per pipeline
// stage (every rank of a stage runs the same program; only its groups differ): the layer
// plan's pass lists (src/cost/layer_plan.h) stamped in the order the stage's schedule runs its
// passes, one per (micro-batch, chunk, pass), then the iteration's tail, with the pipeline
// sends joined to the receives of the stages they feed.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "src/cost/layer_plan.h"
#include "src/cost/memory.h"
#include "src/cost/task.h"
#include "src/hardware/hardware_spec.h"
#include "src/layout/layout.h"
#include "src/layout/pipeline.h"
#include "src/model/model_spec.h"

namespace shardsim {

struct StageProgram {
  std::vector<TaskSpec> tasks;
  std::vector<int32_t> deps;
  std::vector<std::string> names;
  // The local tasks waiting on each task, all in one array: task i's are
  // dependents[dependents_begin[i] .. dependents_begin[i + 1]) (SetDependents).
  std::vector<int32_t> dependents_begin, dependents;
  std::vector<uint8_t> stream_of;                  // each task's stream, packed (the runner's hot loop)
  std::vector<std::vector<int32_t>> stream_order;  // task indices per stream, in issue order
  MemoryBreakdown static_memory;  // weights, gradients, optimizer, other (activations 0)

  std::span<const int32_t> DependentsOf(int32_t task) const {
    return {dependents.data() + dependents_begin[task], dependents.data() + dependents_begin[task + 1]};
  }
  // Fills dependents_begin, dependents, stream_of and stream_order from the tasks and deps.
  void Index();
};

struct IterationProgram {
  std::vector<StageProgram> stages;
  // For each stage and task: the (stage, task) pairs on other stages that wait on it.
  std::vector<std::vector<std::vector<std::pair<int32_t, int32_t>>>> remote_dependents;
  size_t task_count() const;
};

// Builds the program; `l` must be resolved and valid for `m` on `hw`.
IterationProgram BuildIteration(const ModelSpec& m, const HardwareSpec& hw, const Layout& l);
// The same from a plan already built for `l`.
IterationProgram BuildIteration(const IterationPlan& plan, const Layout& l);

}  // namespace shardsim
