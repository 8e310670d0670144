// Evaluates an iteration plan as the closed form of the simulator's program, in two ways:
//   - Contention::kNone: every task at its isolated duration (a collective at the cost the
//     collective model gives its group, as the simulator prices it before links are shared),
//     each stream in issue order, each pipeline receive after its send. That is the critical
//     path of the simulator's program (src/sim/task_graph.h) computed from the plan's pass
//     lists without stamping them, and a lower bound of the simulated time (contention only
//     delays): the bound the planner searches by.
//   - Contention::kWithinPass: the same with each pass list's transfers at their durations
//     when they share links with the rank's other transfers of that pass and the ones just
//     before and after it (pass_contention.h): the estimate `shardsim estimate` reports. Not a bound: it may
//     price a sharing the simulation's timing avoids (docs/validation/estimate-vs-simulation.md).
//
// Two evaluations, equal up to rounding: kTime applies each pass as a max-plus linear map of
// its inputs (stream free times, the previous pass's blocking send, the received send), built
// once per pass list and stage (and, with contention, per pass list before it); kBreakdown
// walks every task and also charges each stage's compute-stream time to the categories of its
// breakdown.
#pragma once

#include <vector>

#include "src/cost/collective.h"
#include "src/cost/layer_plan.h"

namespace shardsim {

struct StageEval {
  double end_s = 0;             // the stage's last task
  double peak_activations = 0;  // bytes, the running sum of the tasks' memory_delta
  double breakdown_s[kCategoryCount] = {};  // kBreakdown: sums to the iteration time
  // kBreakdown: of its compute and recompute, the time NCCL's kernels added by holding SMs
  // beside it (Contention::kWithinPass; src/cost/sm_contention.h).
  double sm_contention_s = 0;
};

struct PlanEval {
  double iteration_time_s = 0;
  std::vector<StageEval> stages;
};

enum class EvalDetail { kTime, kBreakdown };
// See the top of this file.
enum class Contention { kNone, kWithinPass };

// `plan` built for `l` on comm's cluster.
PlanEval EvaluatePlan(const IterationPlan& plan, const CollectiveModel& comm, const Layout& l,
                      EvalDetail detail, Contention contention = Contention::kNone);

// A lower bound of EvaluatePlan's time (without contention) in O(pass lists + passes) rather than O(passes x their
// inputs), and the exact activation peaks (a running sum that needs no times), for the
// planner to order and prune by before it evaluates. The bound is the longest of two chains
// per stage s, each pass counted at its isolated duration (its compute and blocking send with
// the other streams free and nothing pending: any state can only delay it):
//   fill_s + every pass of s + its tail, where fill_s is the forward of micro-batch 0 through
//     the positions before s (each to its send);
//   fill_s + the passes of s up to its last backward + that backward's send and the backward
//     chain down to position 0 (each from its receive to its send) + stage 0's passes after
//     it + stage 0's tail.
struct PlanBound {
  double time_s = 0;
  std::vector<double> peak_activations;  // per stage
};
PlanBound BoundPlan(const IterationPlan& plan, const CollectiveModel& comm, const Layout& l);

// A task's isolated duration on the representative rank of `stage` (tp = cp = dp = 0); a send
// needs its peer_stage.
double TaskDuration(const TaskSpec& t, int32_t stage, const CollectiveModel& comm, const Layout& l);

}  // namespace shardsim
