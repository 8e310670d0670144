// Planner wall time for issue 4's and issue 13's cases: GPT-3 175B on 1024 A100-80GB
// (dgx-a100-80gb), global batch 1536; Llama 3 405B on 16,384 H100 (dgx-h100 with 2,048
// nodes), global batch 2048; and Llama 3 405B's plan as the cluster grows from 1,024 to 65,536
// GPUs (global batch 2 sequences per GPU). The whole space, branch and bound to the best
// simulated layout, the top 10 simulated. Counters: layouts enumerated, bounded, estimated and
// simulated.
#include <benchmark/benchmark.h>

#include "planner/planner.h"
#include "src/util/check.h"

namespace shardsim::planner {
namespace {

void Run(benchmark::State& state, const std::string& model, const std::string& hardware,
         int64_t gpus, int64_t gbs, bool cold) {
  const ModelSpec m = *LoadModel(model);
  HardwareSpec hw = *LoadHardware(hardware);
  hw.nodes = std::max(hw.nodes, (gpus + hw.node.gpus - 1) / hw.node.gpus);
  PlanOptions o;
  o.gpus = gpus;
  o.global_batch = gbs;
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
  state.counters["bounded"] = static_cast<double>(last.bounded);
  state.counters["estimated"] = static_cast<double>(last.estimated);
  state.counters["simulated"] = static_cast<double>(last.simulated);
}

void BM_PlanGpt3Cold(benchmark::State& state) { Run(state, "gpt3-175b", "dgx-a100-80gb", 1024, 1536, true); }
void BM_PlanGpt3Warm(benchmark::State& state) { Run(state, "gpt3-175b", "dgx-a100-80gb", 1024, 1536, false); }
BENCHMARK(BM_PlanGpt3Cold)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(2);
BENCHMARK(BM_PlanGpt3Warm)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(2);

void BM_PlanLlama405b16kCold(benchmark::State& state) {
  Run(state, "llama3-405b", "dgx-h100", 16384, 2048, true);
}
BENCHMARK(BM_PlanLlama405b16kCold)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);

// The same model on more GPUs: Arg = GPUs.
void BM_PlanLlama405bScale(benchmark::State& state) {
  Run(state, "llama3-405b", "dgx-h100", state.range(0), 2 * state.range(0), true);
}
BENCHMARK(BM_PlanLlama405bScale)->Arg(1024)->Arg(4096)->Arg(16384)->Arg(65536)
    ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);

}  // namespace
}  // namespace shardsim::planner
