// Every collective and pipeline send one pipeline stage's rank issues in one iteration, read
// off the layer plan (layer_plan.h): each pass the schedule runs, with its deferred buckets,
// and the tail. What the estimate's collective table prices (estimate.h) and what the
// runtime's executed collectives are checked against (tests/runtime_priced_collectives_test.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/cost/layer_plan.h"

namespace shardsim {

struct StageCall {
  std::string name;  // the task's: "tp all-gather", "dp gradient reduce-scatter", ...
  TaskKind kind = TaskKind::kCollective;  // kCollective or kSend
  Collective collective = Collective::kAllReduce;  // a send's is kSendRecv
  GroupKind group = GroupKind::kTp;                // unused for a send
  double bytes = 0;  // collective.h's convention (AG/RS the group's total)
  int32_t peer_stage = -1;  // a send's destination
  int64_t count = 0;        // calls per iteration
};

// In order of first issue; calls alike in every field but the count are merged.
std::vector<StageCall> StageCalls(const Layout& l, const IterationPlan& plan, const StagePlan& stage);

// Bytes the stage's rank moves between device and host memory in one iteration (offload: the
// gradients down, the updated weights up; layer_plan.cc's kHostTransfer tasks), which the
// runtime's offload phase must move too.
double StageHostTransferBytes(const Layout& l, const IterationPlan& plan, const StagePlan& stage);

}  // namespace shardsim
