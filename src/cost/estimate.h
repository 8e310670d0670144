// Analytical estimate of one training iteration: per-op compute times, per-collective times
// on the cluster graph, memory per stage, and a closed-form step time (pipeline bubble by
// schedule, exposed communication by overlap switch). The discrete-event simulator (issue 3)
// replaces the closed form; it uses the same op and collective prices.
#pragma once

#include <string>
#include <vector>

#include "src/cost/collective.h"
#include "src/cost/memory.h"
#include "src/cost/ops.h"
#include "src/hardware/cluster.h"
#include "src/layout/layout.h"
#include "src/layout/placement.h"
#include "src/model/model_spec.h"

namespace shardsim {

struct OpTiming {
  Op op;
  int64_t count = 0;  // per micro-batch on the slowest stage
  double forward_s = 0, backward_s = 0;  // one instance
};

struct CollectiveTiming {
  std::string purpose;  // "tp forward (per layer)", "dp gradients", ...
  ParallelDim group = ParallelDim::kTp;
  int64_t count = 0;    // calls per iteration on the slowest stage's rank
  CollectiveCost cost;  // one call
  double exposed_s = 0;  // total over the iteration on the critical path
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
  std::vector<MemoryBreakdown> stage_memory;  // per pipeline stage
  int64_t peak_stage = 0;                     // stage with the largest total
  std::vector<OpTiming> ops;
  std::vector<CollectiveTiming> collectives;
  TimeBreakdown time;
  double iteration_time_s = 0;
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

}  // namespace shardsim
