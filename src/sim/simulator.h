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
#include <functional>
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
  // With trace: the ranks whose spans are kept (simulated ones; full mode only); empty: every
  // simulated rank. `simulate --full --trace` keeps one rank per stage by default.
  std::vector<int64_t> trace_ranks;
  bool critical_path = true;  // also find the no-contention critical path (task_graph.h)
  bool check_acyclic = true;  // reject a cyclic task graph before running (a deadlock is
                              // still reported without it)
  bool tp_lockstep = true;    // full mode: run TP peers in lockstep once where that is exact
                              // (TpPeersInLockstep); off, every rank is run
  // Prices collectives with this model (sharing its cache of priced groups) instead of a
  // fresh one; must be built on the same cluster.
  const CollectiveModel* collectives = nullptr;
  // Called now and then (every 2^16 events) with the share of the simulated tasks done, from 0
  // to 1, and once with 1 at the end: `simulate`'s progress line.
  std::function<void(double)> progress;
};

// Full mode on a cluster where a TP group is a whole node whose every GPU has its own NIC on
// a rail-optimized network (and no trace is kept, or only ranks of TP index 0 are traced): the
// TP peers of a rank then run in lockstep, exactly. Each GPU's transfers other than TP's leave the node on its own rail
// (every other group has one member per node, at the same local index), so the transfers of
// different TP indices share no link, and TP's collectives use only the node's fabric links,
// which nothing else loads: the peers' transfers are translations of the first's, on
// disjoint links, and take the same times. So full mode simulates the ranks of TP index 0
// and reports each result for its peers too (docs/simulator.md, "TP peers in lockstep").
bool TpPeersInLockstep(const HardwareSpec& hw, const Layout& l, const SimOptions& options);

// What a simulation would hold, computed from its program before any of it is allocated.
struct SimulationSize {
  double ranks = 0;        // simulated ranks
  double tasks = 0;        // their tasks, in all
  double bytes = 0;        // the runner's memory, about
  double trace_bytes = 0;  // the Chrome trace's size (0 without options.trace)
  double traced_tasks = 0;  // the tasks whose spans are kept
};
// Bytes per simulated task, measured (docs/performance.md, "Size guard"): the growth of the
// process's peak resident memory from symmetric to full simulation over the growth in tasks
// (GPT-3 175B on 1,024 and 4,096 A100, Llama 3 405B on 16,384 H100: 15.4-17.6 bytes; with
// --trace, 917 bytes: the spans, the trace's JSON text and its copy); and the trace file's
// bytes per task (289, for 64 and 256 GPUs).
inline constexpr double kSimBytesPerTask = 18;
inline constexpr double kSimBytesPerTracedTask = 920;
inline constexpr double kTraceBytesPerTask = 290;
// The most a simulation may hold: a third of this 24 GiB development host; a layout above it
// gets an error saying so (symmetric mode, one rank per stage, is the answer for symmetric
// layouts) instead of paging or bad_alloc.
inline constexpr double kMaxSimulationBytes = 8.0 * 1024 * 1024 * 1024;
// `hw`, when given, lets full mode count TP peers in lockstep once (TpPeersInLockstep).
SimulationSize SizeOfSimulation(const IterationProgram& program, const Layout& l, const SimOptions& options,
                                const HardwareSpec* hw = nullptr);

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
  // Of the compute in breakdown_s, the time NCCL's kernels added by holding SMs beside it
  // (src/cost/sm_contention.h).
  double sm_contention_s = 0;
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
  size_t tasks = 0;  // task instances executed (in full mode, TP peers in lockstep counted too)
  int64_t simulated_ranks = 0;  // ranks run by the event loop (full mode with TP peers in
                                // lockstep: one per TP group; `ranks` lists every rank)
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
