// Simulator: runs an IterationProgram on the cluster, event by event. Every simulated rank
// executes its stage's program on its streams (in issue order per stream, each task once its
// dependencies are done); collectives start when every simulated member of the group has
// reached them and move their bytes as coflows over the links they cross, sharing bandwidth
// max-min fairly with whatever else is on those links; memory is allocated and freed as the
// passes run. Symmetric mode simulates one rank per pipeline stage (its TP/CP/DP/EP peers do
// the same work at the same time on a homogeneous cluster); full mode simulates every rank.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/cost/collective.h"
#include "src/hardware/cluster.h"
#include "src/sim/engine.h"
#include "src/sim/program.h"
#include "src/sim/task_graph.h"
#include "src/util/status.h"

namespace shardsim {

struct SimOptions {
  bool full = false;   // every rank, not one per stage
  bool trace = false;  // keep every task's interval and the memory samples
  bool critical_path = true;  // also find the no-contention critical path (task_graph.h)
  bool check_acyclic = true;  // reject a cyclic task graph before running (a deadlock is
                              // still reported without it)
  // Prices collectives with this model (sharing its cache of priced groups) instead of a
  // fresh one; must be built on the same cluster.
  const CollectiveModel* collectives = nullptr;
};

struct TraceSpan {
  int32_t rank = 0, stage = 0, name = 0, microbatch = -1, layer = -1;
  Stream stream = Stream::kCompute;
  SimTime start = 0, end = 0;
  double bytes = 0, flops = 0;
};
struct MemorySample {
  int32_t rank = 0;
  SimTime time = 0;
  double bytes = 0;
};

struct RankResult {
  int64_t rank = 0;
  int32_t stage = 0;
  double breakdown_s[kCategoryCount] = {};  // sums to the iteration time
  double peak_activations = 0;
  MemoryBreakdown peak_memory;  // static + activations at their peak
};

struct SimResult {
  Layout layout;
  bool full = false;
  double iteration_time_s = 0;
  std::vector<RankResult> ranks;  // the simulated ranks
  size_t critical = 0;            // index in ranks whose breakdown is reported
  size_t peak_rank = 0;           // index in ranks with the largest memory
  double tokens_per_s = 0, model_flops = 0, hardware_flops = 0;
  double model_tflops_per_gpu = 0, hardware_tflops_per_gpu = 0, mfu = 0;
  double peak_memory_bytes = 0, memory_capacity_bytes = 0;
  double usable_memory_bytes = 0;  // GpuSpec::UsableMemoryBytes: what `fits` compares with
  bool fits = false;
  CriticalPath critical_path;  // when SimOptions::critical_path
  uint64_t events = 0;
  size_t tasks = 0;  // task instances executed
  std::vector<TraceSpan> trace;
  std::vector<MemorySample> memory_trace;
  std::vector<std::vector<std::string>> names;  // per stage
};

// Simulates one iteration. Errors: a cyclic task graph or a deadlock (tasks that can never
// run), with the tasks named.
StatusOr<SimResult> Simulate(const ModelSpec& m, const Cluster& cluster, const Layout& l,
                             const SimOptions& options);
// Runs a built program (tests build programs by hand through BuildIteration's pieces).
StatusOr<SimResult> RunProgram(const ModelSpec& m, const Cluster& cluster, const Layout& l,
                               const IterationProgram& program, const SimOptions& options);

}  // namespace shardsim
