// Cost of the discrete-event simulator: the raw event engine, the max-min fair flow network,
// and whole Simulate() runs of GPT-3 175B on 1024 A100s, symmetric and full. Targets and
// measured figures are in docs/performance.md.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "bench/llama405b_case.h"
#include "src/hardware/cluster.h"
#include "src/layout/validate.h"
#include "src/sim/engine.h"
#include "src/sim/flow_network.h"
#include "src/sim/simulator.h"
#include "src/util/check.h"

namespace shardsim {
namespace {

// A small fast generator (splitmix64): the benchmark must not measure std::mt19937.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) (the modulo bias is irrelevant here).
  uint64_t Below(uint64_t n) { return Next() % n; }

 private:
  uint64_t state_;
};

// Engine throughput in steady state: state.range(0) events pending; each popped event
// schedules one new event 1 ps .. 1 us later, as a task completion schedules its successor.
// One item = one Next() plus one Schedule().
void BM_EngineEvents(benchmark::State& state) {
  const int64_t pending = state.range(0);
  Engine engine;
  Rng rng(42);
  for (int64_t i = 0; i < pending; ++i) {
    engine.Schedule(static_cast<SimTime>(rng.Below(1'000'000)), 0, static_cast<uint32_t>(i));
  }
  Event ev;
  for (auto _ : state) {
    engine.Next(&ev);
    engine.Schedule(ev.time + 1 + static_cast<SimTime>(rng.Below(1'000'000)), ev.kind, ev.target,
                    ev.tag + 1);
    benchmark::DoNotOptimize(ev);
  }
  CHECK(engine.pending() == static_cast<size_t>(pending)) << "the pending count drifted";
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EngineEvents)->Arg(1000)->Arg(100'000);

// Rate recomputation on a network of state.range(0) links carrying state.range(1)
// long-lived background coflows, each over 8 random links (a ring collective's hops). Each
// item adds one more 8-link coflow and removes it again: two Rebalance()s of the connected
// component it joins, plus the finish-time list the simulator would reschedule from.
void BM_FlowNetwork(benchmark::State& state) {
  const int64_t links = state.range(0), background = state.range(1);
  constexpr size_t kHops = 8;
  Rng rng(7);
  // Distinct links, as CollectivePlan::loads lists each link once.
  auto random_usage = [&] {
    std::vector<FlowNetwork::Usage> usage;
    while (usage.size() < kHops) {
      const auto link = static_cast<int32_t>(rng.Below(static_cast<uint64_t>(links)));
      bool seen = false;
      for (const FlowNetwork::Usage& u : usage) seen = seen || u.link == link;
      if (!seen) usage.push_back({link, 1.0 + static_cast<double>(rng.Below(4))});
    }
    return usage;
  };
  FlowNetwork net(std::vector<double>(static_cast<size_t>(links), 25e9));  // 25 GB/s links
  SimTime now = 0;
  for (int64_t i = 0; i < background; ++i) net.Add(random_usage(), 1e18, now);  // never finish
  benchmark::DoNotOptimize(net.TakeChanged());
  // Pre-drawn routes, so the loop measures the network only.
  std::vector<std::vector<FlowNetwork::Usage>> routes(256);
  for (auto& r : routes) r = random_usage();
  size_t next = 0;
  for (auto _ : state) {
    now += 1000;
    const int32_t id = net.Add(routes[next], 1e9, now);
    benchmark::DoNotOptimize(net.TakeChanged());
    net.Remove(id, now + 500);
    benchmark::DoNotOptimize(net.TakeChanged());
    next = (next + 1) % routes.size();
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_FlowNetwork)
    ->ArgNames({"links", "coflows"})
    ->Args({256, 16})
    ->Args({256, 64})
    ->Args({256, 256});

// GPT-3 175B on 1024 A100s as 8 DP replicas of a 16-stage, TP-8 pipeline: 1536 sequences in
// micro-batches of 1, so 192 micro-batches per replica under 1F1B.
struct Gpt3Case {
  ModelSpec model;
  HardwareSpec hardware;
  Layout layout;
};

const Gpt3Case& Gpt3() {
  static const Gpt3Case c = [] {
    Gpt3Case g;
    StatusOr<ModelSpec> m = LoadModel("gpt3-175b");
    StatusOr<HardwareSpec> h = LoadHardware("dgx-a100-80gb");
    StatusOr<Layout> l = ParseLayout("tp=8,pp=16,dp=8,gbs=1536,mbs=1");
    CHECK(m.ok() && h.ok() && l.ok()) << "bundled inputs must load";
    StatusOr<Layout> resolved = ResolveLayoutFor(*l, 1024, *h);
    CHECK(resolved.ok()) << resolved.status().message();
    const LayoutCheck check = CheckLayout(*resolved, *m, *h, 1024);
    CHECK(check.ok()) << check.ToStatus().message();
    g.model = *m;
    g.hardware = *h;
    g.layout = *resolved;
    return g;
  }();
  return c;
}

// One whole Simulate() per iteration on a warm cluster (routes cached by a first run, as the
// planner's repeated simulations see it): building the programs, the cycle check and the
// critical path on the task DAG (SimOptions::critical_path), and the event simulation.
// Counters: events/s of the whole call and task instances executed.
void SimulateGpt3(benchmark::State& state, const SimOptions& options) {
  const Gpt3Case& g = Gpt3();
  const Cluster cluster(g.hardware);
  CHECK(Simulate(g.model, cluster, g.layout, options).ok()) << "warm-up simulation failed";
  uint64_t events = 0;
  size_t tasks = 0;
  for (auto _ : state) {
    StatusOr<SimResult> r = Simulate(g.model, cluster, g.layout, options);
    CHECK(r.ok()) << r.status().message();
    events = r->events;
    tasks = r->tasks;
    benchmark::DoNotOptimize(r->iteration_time_s);
  }
  state.counters["events_per_s"] =
      benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["events"] = static_cast<double>(events);
  state.counters["tasks"] = static_cast<double>(tasks);
}

void BM_SimulateGpt3Symmetric(benchmark::State& state) { SimulateGpt3(state, SimOptions{}); }
BENCHMARK(BM_SimulateGpt3Symmetric)->Unit(benchmark::kMillisecond)->UseRealTime();

// The same without the critical path: what the task-DAG analysis adds.
void BM_SimulateGpt3SymmetricNoCriticalPath(benchmark::State& state) {
  SimOptions options;
  options.critical_path = false;
  SimulateGpt3(state, options);
}
BENCHMARK(BM_SimulateGpt3SymmetricNoCriticalPath)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_SimulateGpt3Full(benchmark::State& state) {
  SimOptions options;
  options.full = true;
  SimulateGpt3(state, options);
}
BENCHMARK(BM_SimulateGpt3Full)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(2);

// The same with every rank run: tp = 8 fills a dgx-a100-80gb node, whose GPUs each have a NIC
// on a rail-optimized fabric, so the full run above runs one rank per TP group
// (TpPeersInLockstep) and gives the same result.
void BM_SimulateGpt3FullEveryRank(benchmark::State& state) {
  SimOptions options;
  options.full = true;
  options.tp_lockstep = false;
  SimulateGpt3(state, options);
}
BENCHMARK(BM_SimulateGpt3FullEveryRank)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(2);

// Llama 3 405B, tp 8, pp 2, dp = GPUs / 16, 2 sequences per GPU (dgx-h100 with GPUs / 8
// nodes), cold: the cluster graph built and every route found, as one command pays. Arg = GPUs:
// how a symmetric simulation grows from 1,024 to 131,072 GPUs.
void BM_SimulateLlama405bSymmetricScale(benchmark::State& state) {
  const Llama405bCase c = Llama405bOn(state.range(0));
  SimOptions so;
  so.critical_path = false;
  for (auto _ : state) {
    const Cluster cluster(c.hardware);
    StatusOr<SimResult> r = Simulate(c.model, cluster, c.layout, so);
    CHECK(r.ok()) << r.status().message();
    benchmark::DoNotOptimize(r->iteration_time_s);
  }
}
BENCHMARK(BM_SimulateLlama405bSymmetricScale)->Arg(1024)->Arg(16384)->Arg(131072)
    ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);

// A fixed 1,024-GPU job (Llama 3 405B, tp 8, pp 2, dp 64) on ever larger descriptions: Arg =
// dgx-h100 nodes. The cluster is built for the job's nodes (Cluster(hw, gpus)), as the
// commands build it, so neither the graph nor the simulation grows with the description.
void BM_SimulateFixedJobGrowingCluster(benchmark::State& state) {
  Llama405bCase c = Llama405bOn(1024);
  c.hardware.nodes = state.range(0);
  SimOptions so;
  so.critical_path = false;
  for (auto _ : state) {
    const Cluster cluster(c.hardware, 1024);
    StatusOr<SimResult> r = Simulate(c.model, cluster, c.layout, so);
    CHECK(r.ok()) << r.status().message();
    benchmark::DoNotOptimize(r->iteration_time_s);
  }
}
BENCHMARK(BM_SimulateFixedJobGrowingCluster)->Arg(128)->Arg(2048)->Arg(16384)
    ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);

}  // namespace
}  // namespace shardsim
