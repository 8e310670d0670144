// The auto-planner: enumerates every layout of a model on N GPUs within the user's
// constraints, prunes those that are invalid or cannot fit (a cheap memory bound), and finds
// the layout whose simulated time (or objective) is best over the whole space by branch and
// bound: three lower bounds of the simulated time, each above the last and each cheaper than
// the next (the compute alone; the layer plan's isolated passes, with the exact memory; the
// critical path, the simulation without contention, EstimateTime), examined lazily in order,
// so a layout is simulated only while its critical path could still beat the best simulated
// one. --top sets how
// many are simulated and shown at least; it cannot change the winner. Multi-threaded and
// deterministic: the result does not depend on the thread count.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "src/layout/stack.h"
#include "src/cost/estimate.h"
#include "src/io/plan_file.h"
#include "src/sim/simulator.h"
#include "src/util/status.h"

namespace shardsim::planner {

enum class Objective { kThroughput, kTimeToTrain, kCost };

struct PlanOptions {
  int64_t gpus = 0;
  int64_t global_batch = 0;  // sequences; 0 = the model's default (see Plan)
  Objective objective = Objective::kThroughput;
  double tokens = 0;          // for time-to-train and cost
  double max_memory_fraction = 1.0;  // of GPU memory a plan may use
  std::map<std::string, std::string> fixed;               // layout key -> value
  std::map<std::string, std::set<std::string>> forbidden;  // layout key -> values
  std::optional<StackSpec> stack;  // search only what it can run (src/layout/stack.h)
  bool stack_is_default = false;   // `stack` is kDefaultPlanStack, not asked for (said in reports)
  int top_k = 10;
  // Layouts whose simulated score is within this fraction of the best are ties, and the most
  // robust of them wins (RobustnessOf). 0: the fastest wins. `plan` sets the published suite's
  // ranking tolerance (src/report/error_band.h). Every layout whose estimate is inside it is
  // simulated, so the ties, like the winner, do not depend on top_k.
  double tie_tolerance = 0;
  int threads = 0;  // 0 = hardware concurrency
  std::function<void(const std::string& stage, double fraction)> progress;
};

// "tp=8,pp=4" -> {tp: 8, pp: 4}; keys and values are checked against the layout grammar.
StatusOr<std::map<std::string, std::string>> ParseFixed(const std::string& spec);
StatusOr<std::map<std::string, std::set<std::string>>> ParseForbidden(const std::string& spec);

struct Candidate {
  Layout layout;
  double memory_bytes = 0;       // analytical peak (largest stage)
  double estimated_time_s = 0;   // the last bound evaluated: the critical path once estimated
  bool simulated = false;
  SimResult sim;                 // when simulated
  double time_s() const { return simulated ? sim.iteration_time_s : estimated_time_s; }
};

// Tight on memory, for the tie-break (Robustness below): a peak above this share of the
// planner's limit. On a GPU the share comes from the memory band (src/report/error_band.h): published peaks
// ran up to p90 x the prediction, so a peak above limit / p90 is tight. Where there is no
// band (a CPU host) kTightMemoryFraction. ASSUMPTION: 0.95. The allocator share the fit
// verdict assumes is 10 % (docs/hardware.md), and GMLake measured 15 % on average, up to 33 %:
// a layout within 5 % of the limit has no room for a fragmentation above the assumption.
inline constexpr double kTightMemoryFraction = 0.95;
// The share of the memory limit above which a peak is tight on `gpu`, and *why (what it is from).
double TightMemoryFraction(const GpuSpec& gpu, std::string* why);

struct PlanResult {
  int64_t gpus = 0;
  int64_t enumerated = 0;         // layouts generated from the space
  int64_t invalid = 0;            // rejected by CheckLayout (of those the stack runs)
  std::string stack;              // the stack searched for ("" without --stack)
  int64_t stack_refused = 0;      // the stack cannot run them (not kept, so not checked)
  int64_t pruned_memory = 0;      // over the memory limit (cheap bound, or the exact peak)
  int64_t dominated = 0;          // fit, but a layout with less recompute/offload also fits
  int64_t bounded = 0;            // layer plan built: exact memory and a time bound
  int64_t estimated = 0;          // the critical path evaluated (the simulation without contention)
  int64_t simulated = 0;
  int64_t unexamined = 0;         // never bounded: their compute alone exceeds the winner's time
  std::vector<Candidate> ranked;  // the simulated top K, best first
  std::vector<Candidate> closest; // when nothing fits: the least over memory
  std::vector<std::string> advice;  // when nothing fits: which knob helps
  std::string why;                // why the winner beats the runner-up (and, with ties, why it was chosen)
  int64_t ties = 1;               // simulated layouts within tie_tolerance of the best, the winner included
  std::optional<Candidate> fastest;  // with ties: the fastest, when it is not the winner
  double memory_limit_bytes = 0;
  double tight_fraction = kTightMemoryFraction;  // TightMemoryFraction, for the tie-break
  std::string tight_why;                         // what tight_fraction is from
};

StatusOr<PlanResult> Plan(const ModelSpec& m, const Cluster& cluster, const PlanOptions& options);

// The winner of `r` (which has one) as the plan file `plan --out` writes: the inputs embedded,
// the simulated figures recorded, so `simulate --plan` reproduces them.
PlanFile WinnerPlanFile(const ModelSpec& m, const HardwareSpec& hw, const PlanResult& r,
                        const std::string& objective);

// The search space itself (before validation and pruning; without what o.stack refuses), in the
// planner's order.
std::vector<Layout> EnumerateLayouts(const ModelSpec& m, const HardwareSpec& hw, const PlanOptions& o);
// The memory figure pruning uses: the analytical peak of the first and last stages. Never
// above the simulated peak (tests/planner_test.cc), so pruning never drops a layout that fits.
double PeakMemoryBound(const ModelSpec& m, const HardwareSpec& hw, const Layout& l);

// The objective's score of a candidate (lower is better): iteration time for throughput,
// seconds to train `tokens` for time-to-train, dollars for cost.
double Score(const Candidate& c, const ModelSpec& m, const HardwareSpec& hw, const PlanOptions& o);

// Share of a simulated candidate's iteration spent in exposed communication (tp, cp, ep, pp,
// dp) on its critical rank.
double ExposedCommFraction(const Candidate& c);

// How robust a simulated layout is, for breaking ties (issue 14, item 6), compared in this
// order: not tight on memory (its peak at most `tight_fraction` of the planner's limit:
// TightMemoryFraction's), and of two tight layouts the one with more headroom by a step of 5 %
// of the limit (over the band's p90 neither may fit; the lower, the less likely it fails);
// fewer framework-specific features (each needs a framework that has it, and tuning: the
// interleaved schedule, CP, ZeRO-2/3, offload, gradient compression, TP overlap, zero-bubble
// schedules, fp8 parameters); less exposed communication (the part of the step that depends
// most on the network's real behaviour), by steps of `comm_step` of the iteration (the tie
// tolerance: a smaller difference is inside what the model resolves; 0 compares exactly);
// then the faster.
// (TightMemoryFraction above.)
struct Robustness {
  bool tight = false;
  // Of a tight layout, its peak in steps of 1 - kTightMemoryFraction (5 %) of the limit: of
  // two tight layouts the one a step lower is the more robust; within a step, the rest decides.
  int64_t tight_step = 0;
  std::vector<std::string> features;  // the framework-specific features it uses
  double exposed_comm = 0;
  double comm_key = 0;  // what is compared: exposed_comm in steps of comm_step, or itself
  double score = 0;
  bool operator<(const Robustness& o) const;  // more robust first
};
Robustness RobustnessOf(const Candidate& c, double score, double memory_limit_bytes, double tight_fraction,
                        double comm_step);

}  // namespace shardsim::planner
