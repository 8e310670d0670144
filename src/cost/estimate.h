// The estimate of one training iteration: the layer plan (layer_plan.h) evaluated as the
// simulation's closed form (plan_eval.h): the very program the event simulator runs, every
// collective at its cost on the cluster graph, each pass's transfers slowed where they share
// links with the rank's other transfers of that pass and the ones just before and after it
// (pass_contention.h). Beside it the critical path without contention, a lower bound of the
// simulated time, which is what the planner ranks and prunes by (EstimateTime). Also: memory
// per stage (static states from memory.h plus the activation peak of the schedule's running
// sum, as the simulator counts it), the per-op and per-collective tables, and the breakdown of
// the busiest stage.
#pragma once

#include <string>
#include <vector>

#include "src/cost/collective.h"
#include "src/cost/memory.h"
#include "src/cost/ops.h"
#include "src/hardware/cluster.h"
#include "src/layout/layout.h"
#include "src/model/model_spec.h"

namespace shardsim {

struct OpTiming {
  Op op;
  int64_t count = 0;  // per micro-batch on the reported stage
  double forward_s = 0, backward_s = 0;  // one instance
};

struct CollectiveTiming {
  std::string purpose;  // the task's name: "tp all-gather", "dp gradient reduce-scatter", ...
  std::string group;    // tp, cp, ep, dp, edp, embedding, pp (sends)
  int64_t count = 0;    // calls per iteration on the reported stage's rank
  CollectiveCost cost;  // one call
};

// Iteration time split into parts that sum to the total (docs/cost-model.md).
struct TimeBreakdown {
  double compute = 0, recompute = 0;
  double tp_comm = 0, cp_comm = 0, ep_comm = 0, pp_comm = 0, dp_comm = 0;
  double bubble = 0, optimizer = 0, offload = 0;
  double total() const {
    return compute + recompute + tp_comm + cp_comm + ep_comm + pp_comm + dp_comm + bubble +
           optimizer + offload;
  }
};

struct Estimate {
  Layout layout;
  int64_t parameters = 0;
  std::vector<MemoryBreakdown> stage_memory;  // per pipeline stage, activations at their peak
  int64_t peak_stage = 0;                     // stage with the largest total
  int64_t reported_stage = 0;                 // the busiest stage: its ops, collectives, time
  std::vector<OpTiming> ops;
  std::vector<CollectiveTiming> collectives;
  TimeBreakdown time;
  double iteration_time_s = 0;  // with each pass's transfers sharing links
  double critical_path_s = 0;   // without contention: a lower bound of the simulation
  // Of the reported stage's compute and recompute, the time NCCL's kernels add by holding SMs
  // beside it (src/cost/sm_contention.h).
  double sm_contention_s = 0;
  double tokens_per_s = 0;
  double model_flops = 0, hardware_flops = 0;  // per iteration, all GPUs
  double model_tflops_per_gpu = 0, hardware_tflops_per_gpu = 0, mfu = 0;
  bool fits = false;
  std::vector<std::string> warnings;
  const MemoryBreakdown& peak_memory() const { return stage_memory[peak_stage]; }
};

// `l` must be resolved and valid (CheckLayout) for this model, cluster and GPU count.
Estimate EstimateIteration(const ModelSpec& m, const Cluster& cluster, const Layout& l);
// The same, pricing collectives with `comm` (whose cache of priced groups then serves many
// estimates: the planner shares one across all the layouts it ranks).
Estimate EstimateIteration(const ModelSpec& m, const CollectiveModel& comm, const Layout& l);

// What the planner ranks by: the critical path without contention (Estimate::critical_path_s,
// a lower bound of the simulated time) and the peak memory, without the breakdown and tables
// (plan_eval.h's kTime).
struct QuickEstimate {
  double iteration_time_s = 0;
  double peak_memory_bytes = 0;
  bool fits = false;
};
QuickEstimate EstimateTime(const ModelSpec& m, const CollectiveModel& comm, const Layout& l);
// A lower bound of that time (plan_eval.h's BoundPlan), with the same exact peak memory, in
// a fraction of the time: what the planner orders by before it estimates.
QuickEstimate EstimateBound(const ModelSpec& m, const CollectiveModel& comm, const Layout& l);

// Whether `mem` (one rank) fits: within the GPU's usable memory (GpuSpec::UsableMemoryBytes:
// capacity less the allocator's fragmentation), and the node's GPUs' offloaded states in host
// memory.
bool MemoryFits(const HardwareSpec& hw, const MemoryBreakdown& mem);

}  // namespace shardsim
