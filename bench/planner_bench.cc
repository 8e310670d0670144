// Planner wall time for issue 4's case: GPT-3 175B on 1024 A100-80GB (dgx-a100-80gb), global
// batch 1536, the full space, analytical ranking plus event simulation of the top 10.
// Counters: layouts enumerated and layouts evaluated (analytically) per second.
#include <benchmark/benchmark.h>

#include "planner/planner.h"
#include "src/util/check.h"

namespace shardsim::planner {
namespace {

void Run(benchmark::State& state, bool cold) {
  const ModelSpec m = *LoadModel("gpt3-175b");
  const HardwareSpec hw = *LoadHardware("dgx-a100-80gb");
  PlanOptions o;
  o.gpus = 1024;
  o.global_batch = 1536;
  o.top_k = 10;
  const Cluster warm(hw);
  if (!cold) CHECK(Plan(m, warm, o).ok());  // routes and collective costs cached
  PlanResult last;
  for (auto _ : state) {
    if (cold) {
      const Cluster cluster(hw);  // what one `shardsim plan` command pays
      last = *Plan(m, cluster, o);
    } else {
      last = *Plan(m, warm, o);
    }
  }
  state.counters["enumerated"] = static_cast<double>(last.enumerated);
  state.counters["estimated"] = static_cast<double>(last.estimated);
  state.counters["simulated"] = static_cast<double>(last.simulated);
  state.counters["layouts_per_s"] = benchmark::Counter(
      static_cast<double>(last.enumerated) * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

void BM_PlanGpt3Cold(benchmark::State& state) { Run(state, true); }
void BM_PlanGpt3Warm(benchmark::State& state) { Run(state, false); }
BENCHMARK(BM_PlanGpt3Cold)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(2);
BENCHMARK(BM_PlanGpt3Warm)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(2);

}  // namespace
}  // namespace shardsim::planner
