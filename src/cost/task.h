// Task: the unit of one training iteration that both the estimate and the event simulator run:
// a compute block, a collective, a pipeline send, a host transfer or a host step, on one of a
// rank's streams, with its dependencies. The layer plan (layer_plan.h) describes every pass as
// a list of these; the simulator stamps them into per-stage programs (src/sim/program.h) and
// the estimate evaluates the same lists in closed form (src/cost/estimate.h).
#pragma once

#include <cstdint>
#include <vector>

#include "src/cost/collective.h"
#include "src/layout/layout.h"
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

// Communicating groups: the layout's dimensions plus the expert-data-parallel group and the
// embedding group (the first and last pipeline stages, which hold the two copies of a tied
// embedding table).
enum class GroupKind : uint8_t { kTp, kCp, kEp, kDp, kEdp, kEmbedding, kEtp };
inline constexpr int kGroupKindCount = 7;
const char* GroupKindName(GroupKind g);

// The ranks of `rank`'s group of kind `g`, in group order (placement.h): TP, CP, EP along the
// layout's dimensions; DP the ranks holding the same dense weights, over DP and CP together
// (Layout::dp_cp: gradients are reduced and ZeRO shards over them); EP, ETP (the experts' TP)
// and EDP (the ranks holding the same experts) in the experts' grid (ExpertCoordOf); the embedding group
// the ranks with the same TP, CP and DP coordinates on the first and last stages (one rank
// when pp = 1).
std::vector<int64_t> GroupMembers(const Layout& l, int64_t rank, GroupKind g);

struct TaskSpec {
  TaskKind kind = TaskKind::kCompute;
  Stream stream = Stream::kCompute;
  Category category = Category::kCompute;
  Pass pass = Pass::kForward;
  int32_t name = 0;  // index into the owner's names
  int32_t microbatch = -1, chunk = -1, layer = -1;
  double duration_s = 0;  // compute, host compute, host transfer
  double flops = 0;       // model FLOPs of a compute task (trace)
  // Collectives and sends.
  Collective collective = Collective::kAllReduce;
  GroupKind group = GroupKind::kTp;
  double bytes = 0;
  int32_t peer_stage = -1;  // a send's destination stage
  // Dependencies inside the owner: [dep_begin, dep_end) in its deps.
  int32_t dep_begin = 0, dep_end = 0;
  // A dependency on another stage's send: (stage, task index), -1 if none.
  int32_t remote_stage = -1, remote_task = -1;
  // Activation bytes allocated (> 0) or freed (< 0) when the task ends.
  double memory_delta = 0;
};

}  // namespace shardsim
