// IterationProgram: the task graph of one training iteration, as one program per pipeline
// stage (every rank of a stage runs the same program; only its groups differ). Tasks are
// compute blocks, collectives, pipeline sends, optimizer and offload steps, each on a
// stream, in the order the layout's pipeline schedule (GPipe, 1F1B, interleaved, zero-bubble B/W split)
// issues them, with the dependencies between them. Prices come from the cost model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/cost/collective.h"
#include "src/cost/memory.h"
#include "src/hardware/hardware_spec.h"
#include "src/layout/layout.h"
#include "src/model/model_spec.h"
#include "src/layout/pipeline.h"

namespace shardsim {

// Streams of a rank, as the frameworks use them: one compute stream and one per kind of
// communication (pipeline sends split by direction so they never wait on each other).
enum class Stream : uint8_t { kCompute, kTp, kCp, kEp, kPpForward, kPpBackward, kDp, kOffload };
inline constexpr int kStreamCount = 8;
const char* StreamName(Stream s);

enum class TaskKind : uint8_t { kCompute, kCollective, kSend, kHostTransfer, kHostCompute };
// Where a task's time goes in the breakdown.
enum class Category : uint8_t { kCompute, kRecompute, kTp, kCp, kEp, kPp, kDp, kBubble,
                                kOptimizer, kOffload };
inline constexpr int kCategoryCount = 10;
const char* CategoryName(Category c);

// Communicating groups: the layout's dimensions plus the expert-data-parallel group.
enum class GroupKind : uint8_t { kTp, kCp, kEp, kDp, kEdp };


struct TaskSpec {
  TaskKind kind = TaskKind::kCompute;
  Stream stream = Stream::kCompute;
  Category category = Category::kCompute;
  Pass pass = Pass::kForward;
  int32_t name = 0;  // index into StageProgram::names
  int32_t microbatch = -1, chunk = -1, layer = -1;
  double duration_s = 0;  // compute, host compute, host transfer
  double flops = 0;       // model FLOPs of a compute task (trace)
  // Collectives and sends.
  Collective collective = Collective::kAllReduce;
  GroupKind group = GroupKind::kTp;
  double bytes = 0;
  int32_t peer_stage = -1;  // a send's destination stage
  // Dependencies inside the stage program: [dep_begin, dep_end) in StageProgram::deps.
  int32_t dep_begin = 0, dep_end = 0;
  // A dependency on another stage's send: (stage, task index), -1 if none.
  int32_t remote_stage = -1, remote_task = -1;
  // Activation bytes allocated (> 0) or freed (< 0) when the task ends.
  double memory_delta = 0;
};

struct StageProgram {
  std::vector<TaskSpec> tasks;
  std::vector<int32_t> deps;
  std::vector<std::string> names;
  std::vector<std::vector<int32_t>> dependents;   // local tasks waiting on each task
  std::vector<std::vector<int32_t>> stream_order;  // task indices per stream, in issue order
  MemoryBreakdown static_memory;  // weights, gradients, optimizer, other (activations 0)
};

struct IterationProgram {
  std::vector<StageProgram> stages;
  // For each stage and task: the (stage, task) pairs on other stages that wait on it.
  std::vector<std::vector<std::vector<std::pair<int32_t, int32_t>>>> remote_dependents;
  size_t task_count() const;
};

// Builds the program; `l` must be resolved and valid for `m` on `hw`.
IterationProgram BuildIteration(const ModelSpec& m, const HardwareSpec& hw, const Layout& l);

}  // namespace shardsim
