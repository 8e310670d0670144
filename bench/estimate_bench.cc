// Cost of the analytical estimate: building the 1024-GPU cluster graph, pricing collectives
// on it, and one whole EstimateIteration for GPT-3 175B (the planner calls it per layout).
#include <benchmark/benchmark.h>

#include "bench/llama405b_case.h"

#include "src/cost/estimate.h"
#include "src/cost/layer_plan.h"
#include "src/util/check.h"

namespace shardsim {
namespace {

struct Inputs {
  ModelSpec model;
  HardwareSpec hardware;
  Layout layout;
};

const Inputs& Default() {
  static const Inputs in = [] {
    Inputs i;
    StatusOr<ModelSpec> m = LoadModel("gpt3-175b");
    StatusOr<HardwareSpec> h = LoadHardware("dgx-a100-80gb");
    StatusOr<Layout> l = ParseLayout("tp=8,pp=8,vpp=2,mbs=1,gbs=1536,sp=on,recompute=selective");
    CHECK(m.ok() && h.ok() && l.ok()) << "bundled inputs must load";
    i.model = *m;
    i.hardware = *h;
    i.layout = *ResolveLayout(*l, 1024);
    return i;
  }();
  return in;
}

void BM_BuildCluster1024(benchmark::State& state) {
  for (auto _ : state) {
    Cluster c(Default().hardware);
    benchmark::DoNotOptimize(c.gpu_count());
  }
}
BENCHMARK(BM_BuildCluster1024)->Unit(benchmark::kMillisecond);

// A fresh cluster each time: route computation (Dijkstra) is included, nothing cached.
void BM_DpAllReduceColdRoutes(benchmark::State& state) {
  std::vector<int64_t> group;
  for (int64_t i = 0; i < 128; ++i) group.push_back(8 * i);
  for (auto _ : state) {
    state.PauseTiming();
    Cluster c(Default().hardware);
    state.ResumeTiming();
    CollectiveModel model(c);
    benchmark::DoNotOptimize(model.Estimate(Collective::kAllReduce, group, 1e9).time_s);
  }
}
BENCHMARK(BM_DpAllReduceColdRoutes)->Unit(benchmark::kMillisecond);

// The whole estimate on a warm cluster (routes cached), as the planner will use it.
void BM_EstimateGpt3OnWarmCluster(benchmark::State& state) {
  const Cluster cluster(Default().hardware);
  EstimateIteration(Default().model, cluster, Default().layout);  // warm the route cache
  for (auto _ : state) {
    benchmark::DoNotOptimize(EstimateIteration(Default().model, cluster, Default().layout).iteration_time_s);
  }
}
BENCHMARK(BM_EstimateGpt3OnWarmCluster)->Unit(benchmark::kMicrosecond);

// The pieces the planner runs per layout (GPT-3 175B, tp 8, pp 8, vpp 2, 192 micro-batches):
// building the layer plan, its bound, and its estimate without the breakdown.
void BM_BuildPlanGpt3(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(BuildIterationPlan(Default().model, Default().hardware, Default().layout).stages.size());
  }
}
BENCHMARK(BM_BuildPlanGpt3)->Unit(benchmark::kMicrosecond);

void BM_BoundGpt3OnWarmCluster(benchmark::State& state) {
  const Cluster cluster(Default().hardware);
  const CollectiveModel comm(cluster);
  EstimateBound(Default().model, comm, Default().layout);
  for (auto _ : state) {
    benchmark::DoNotOptimize(EstimateBound(Default().model, comm, Default().layout).iteration_time_s);
  }
}
BENCHMARK(BM_BoundGpt3OnWarmCluster)->Unit(benchmark::kMicrosecond);

void BM_EstimateTimeGpt3OnWarmCluster(benchmark::State& state) {
  const Cluster cluster(Default().hardware);
  const CollectiveModel comm(cluster);
  EstimateTime(Default().model, comm, Default().layout);
  for (auto _ : state) {
    benchmark::DoNotOptimize(EstimateTime(Default().model, comm, Default().layout).iteration_time_s);
  }
}
BENCHMARK(BM_EstimateTimeGpt3OnWarmCluster)->Unit(benchmark::kMicrosecond);

// One estimate of Llama 3 405B (tp 8, pp 2, dp = GPUs / 16, 2 sequences per GPU) on a cluster
// of GPUs / 8 dgx-h100 nodes, every collective priced afresh (a new collective model each time;
// the cluster's routes are cached after the first). Arg = GPUs: from 1,024 to 131,072.
void BM_EstimateLlama405bScale(benchmark::State& state) {
  const Llama405bCase c = Llama405bOn(state.range(0));
  const Cluster cluster(c.hardware);
  for (auto _ : state) {
    const CollectiveModel comm(cluster);
    benchmark::DoNotOptimize(EstimateTime(c.model, comm, c.layout).iteration_time_s);
  }
}
BENCHMARK(BM_EstimateLlama405bScale)->Arg(1024)->Arg(16384)->Arg(131072)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace shardsim
