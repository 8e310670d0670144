// Whole-iteration simulations on a cluster whose communication costs (almost) nothing, so
// the pipeline schedule alone sets the bubble and the activation peak:
//   bubble fraction (p-1)/(m+p-1) for GPipe and 1F1B, (p-1)/(v m + p - 1) interleaved
//   (Narayanan et al. 2021, Sec. 2.2); peak activations m micro-batches (GPipe) vs p (1F1B)
//   on the first stage.
#include <gtest/gtest.h>

#include "src/cost/memory.h"
#include "src/report/sim_report.h"
#include "src/sim/simulator.h"
#include "tests/test_models.h"

namespace shardsim {
namespace {

// 1 node x 8 GPUs; links and HBM a million TB/s with zero latency: transfers take ~0.
HardwareSpec IdealNode() {
  StatusOr<HardwareSpec> hw = ParseHardwareYaml(R"(name: ideal
source: test
nodes: 1
gpu:
  name: ideal
  peak: {bf16: "100 TFLOP/s"}
  memory: "80 GiB"
  memory_bandwidth: "1000000 TB/s"
  sm_count: 100
  efficiency: {matmul: 1.0, attention: 1.0, memory: 1.0, kernel_latency: "0 us"}
node:
  gpus: 8
  fabric: {kind: nvswitch, bandwidth: "1000000 TB/s", efficiency: 1.0, latency: "0 us"}
  host: {memory: "1 TiB", memory_bandwidth: "1000000 TB/s", link_bandwidth: "1000000 TB/s", link_latency: "0 us"}
)", "ideal");
  CHECK(hw.ok()) << hw.status().message();
  return *hw;
}

// 8 equal layers; vocabulary 8 so the LM head on the last stage is negligible (its FLOPs are
// 8 / (12 * 1024) of a layer's GEMMs).
ModelSpec EightLayers() { return testing::GptModel(8, 1024, 16, 8, 1024); }

Layout Pipeline(int64_t pp, int64_t vpp, int64_t m, Schedule s) {
  Layout l;
  l.pp = pp;
  l.vpp = vpp;
  l.dp = 1;
  l.mbs = 1;
  l.gbs = m;
  l.schedule = s;
  l.schedule_given = true;
  return l;
}

SimResult SimulateIdeal(const Layout& l, bool full = false) {
  const Cluster cluster(IdealNode());
  SimOptions o;
  o.full = full;
  StatusOr<SimResult> r = Simulate(EightLayers(), cluster, l, o);
  CHECK(r.ok()) << r.status().message();
  return *r;
}

double BubbleFraction(const SimResult& r) {
  const RankResult& c = r.ranks[r.critical];
  const double busy = c.breakdown_s[static_cast<int>(Category::kCompute)] +
                      c.breakdown_s[static_cast<int>(Category::kRecompute)] +
                      c.breakdown_s[static_cast<int>(Category::kOptimizer)];
  return 1.0 - busy / r.iteration_time_s;
}

// p = 4 stages, m = 8 micro-batches: (p-1)/(m+p-1) = 3/11.
TEST(ScheduleTest, OneFOneBBubble) {
  EXPECT_NEAR(BubbleFraction(SimulateIdeal(Pipeline(4, 1, 8, Schedule::k1F1B))), 3.0 / 11, 2e-3);
}

TEST(ScheduleTest, GpipeBubble) {
  EXPECT_NEAR(BubbleFraction(SimulateIdeal(Pipeline(4, 1, 8, Schedule::kGpipe))), 3.0 / 11, 2e-3);
}

// Interleaved, v = 2 chunks per stage: (p-1)/(v m + p - 1) = 3/19.
TEST(ScheduleTest, InterleavedBubble) {
  EXPECT_NEAR(BubbleFraction(SimulateIdeal(Pipeline(4, 2, 8, Schedule::kInterleaved))), 3.0 / 19, 2e-3);
}

// Zero-bubble sends the input gradient upstream before computing the weight gradient:
// bubble (p-1)(T_F + T_B) instead of 1F1B's (p-1)(T_F + T_B + T_W), so less.
TEST(ScheduleTest, ZeroBubbleBeatsOneFOneB) {
  const double zb = BubbleFraction(SimulateIdeal(Pipeline(4, 1, 8, Schedule::kZeroBubble)));
  const double ofob = BubbleFraction(SimulateIdeal(Pipeline(4, 1, 8, Schedule::k1F1B)));
  EXPECT_LT(zb, ofob * 0.8);
  EXPECT_GE(zb, 0.0);
}

// ZB-V (Qi et al. 2024, Sec. 6): on the ideal node (no communication cost, F, B and W of a
// layer close to equal: a layer's backward is 2 forwards, split in halves) its bubble is far
// below zero-bubble's and 1F1B's, and its peak activations on every stage are at most 1F1B's
// first stage (p = 4 micro-batches of a whole stage), the paper's claim. m = 16 >= 2p - 1.
TEST(ScheduleTest, ZeroBubbleVHasAlmostNoBubbleAtOneFOneBsMemory) {
  Layout zbv = Pipeline(4, 2, 16, Schedule::kZeroBubbleV);
  const SimResult v = SimulateIdeal(zbv);
  const SimResult zb = SimulateIdeal(Pipeline(4, 1, 16, Schedule::kZeroBubble));
  const SimResult ofob = SimulateIdeal(Pipeline(4, 1, 16, Schedule::k1F1B));
  EXPECT_LT(BubbleFraction(v), BubbleFraction(zb) / 3);
  EXPECT_LT(BubbleFraction(v), 0.05);
  const double per_stage = 2 * LayerActivationBytes(EightLayers(), Pipeline(4, 1, 16, Schedule::k1F1B), false);
  for (const RankResult& r : v.ranks) EXPECT_LE(r.peak_activations, 4 * per_stage * (1 + 1e-9)) << r.stage;
  // The V: stage 0 runs positions 0 and 7, the embedding's and the head's.
  EXPECT_EQ(PositionOf(zbv, 0, 1), 7);
  EXPECT_EQ(StageOfPosition(zbv, 4), 3);
}

// Activation peak on the first stage: 1F1B holds p = 4 micro-batches, GPipe all m = 8.
// Stage 0 has 2 layers, each LayerActivationBytes per micro-batch.
TEST(ScheduleTest, PeakActivationsFollowTheSchedule) {
  const ModelSpec m = EightLayers();
  const Layout ofob = Pipeline(4, 1, 8, Schedule::k1F1B);
  const double per_mb = 2 * LayerActivationBytes(m, ofob, false);
  EXPECT_NEAR(SimulateIdeal(ofob).ranks[0].peak_activations, 4 * per_mb, 1e-6 * per_mb);
  EXPECT_NEAR(SimulateIdeal(Pipeline(4, 1, 8, Schedule::kGpipe)).ranks[0].peak_activations, 8 * per_mb,
              1e-6 * per_mb);
  // The last stage holds one micro-batch under 1F1B.
  EXPECT_NEAR(SimulateIdeal(ofob).ranks[3].peak_activations, per_mb, 1e-6 * per_mb);
}

// Interleaved: the simulated peak agrees with Megatron's warm-up count used by the closed
// form (InFlightMicrobatches): (p-1)*2 + (v-1)*p + 1 = 11 chunks of one layer each.
TEST(ScheduleTest, InterleavedPeakMatchesClosedForm) {
  const ModelSpec m = EightLayers();
  const Layout l = Pipeline(4, 2, 8, Schedule::kInterleaved);
  const double per_layer = LayerActivationBytes(m, l, false);
  EXPECT_NEAR(SimulateIdeal(l).ranks[0].peak_activations, 11 * per_layer, 1e-6 * per_layer);
  EXPECT_NEAR(InFlightMicrobatches(l, 0) * 2 * per_layer, 11 * per_layer, 1e-6 * per_layer);
}

// Symmetric mode (one rank per stage) and full mode (all 8 ranks) agree exactly on a
// homogeneous cluster, here with TP and DP collectives too.
TEST(ScheduleTest, SymmetricAndFullAgree) {
  Layout l = Pipeline(2, 1, 8, Schedule::k1F1B);
  l.tp = 2;
  l.dp = 2;
  l.sp = true;
  l.gbs = 16;
  const HardwareSpec a100 = *LoadHardware("dgx-a100-80gb");
  const Cluster cluster(a100);
  const ModelSpec m = EightLayers();
  SimOptions sym, full;
  full.full = true;
  const SimResult a = *Simulate(m, cluster, l, sym);
  const SimResult b = *Simulate(m, cluster, l, full);
  // Equal up to the picosecond rounding of finish times (a coflow's finish is rounded up each
  // time rates are recomputed, and full mode recomputes more often).
  EXPECT_NEAR(a.iteration_time_s, b.iteration_time_s, 1e-9 * a.iteration_time_s);
  EXPECT_EQ(a.peak_memory_bytes, b.peak_memory_bytes);
  EXPECT_EQ(a.ranks.size(), 2u);
  EXPECT_EQ(b.ranks.size(), 8u);
  for (int c = 0; c < kCategoryCount; ++c) {
    EXPECT_NEAR(a.ranks[0].breakdown_s[c], b.ranks[0].breakdown_s[c], 1e-9 * a.iteration_time_s)
        << CategoryName(static_cast<Category>(c));
  }
}

// Without contention (one rank per stage, ideal links) the simulated iteration equals the
// DAG's critical path at isolated durations.
TEST(ScheduleTest, CriticalPathEqualsTheSimulationWithoutContention) {
  const SimResult r = SimulateIdeal(Pipeline(4, 1, 8, Schedule::k1F1B));
  EXPECT_NEAR(r.critical_path.length_s, r.iteration_time_s, 1e-9);
  EXPECT_GT(r.critical_path.tasks, 0u);
}

// The same simulation twice gives byte-identical JSON.
TEST(ScheduleTest, Deterministic) {
  const Layout l = Pipeline(4, 2, 8, Schedule::kInterleaved);
  const HardwareSpec hw = IdealNode();
  const ModelSpec m = EightLayers();
  EXPECT_EQ(SimulationJson(m, hw, SimulateIdeal(l), {}), SimulationJson(m, hw, SimulateIdeal(l), {}));
}

// The breakdown of every simulated rank sums to the iteration time.
TEST(ScheduleTest, BreakdownSumsToIterationTime) {
  const SimResult r = SimulateIdeal(Pipeline(4, 2, 8, Schedule::kInterleaved));
  for (const RankResult& rr : r.ranks) {
    double sum = 0;
    for (double s : rr.breakdown_s) sum += s;
    EXPECT_NEAR(sum, r.iteration_time_s, 1e-9) << "rank " << rr.rank;
  }
}

// A program whose two tasks wait on each other is reported as a deadlock naming them.
TEST(SimulatorTest, DeadlockIsReported) {
  IterationProgram prog;
  prog.stages.resize(1);
  StageProgram& p = prog.stages[0];
  p.names = {"first", "second"};
  TaskSpec a, b;
  a.name = 0;
  a.duration_s = 1e-3;
  a.dep_begin = 0;
  a.dep_end = 1;
  b.name = 1;
  b.stream = Stream::kTp;
  b.duration_s = 1e-3;
  b.dep_begin = 1;
  b.dep_end = 2;
  p.tasks = {a, b};
  p.deps = {1, 0};  // a waits on b, b on a
  p.Index();
  prog.remote_dependents = {{{}, {}}};
  Layout l = Pipeline(1, 1, 1, Schedule::k1F1B);
  const Cluster cluster(IdealNode());
  StatusOr<SimResult> r = RunProgram(EightLayers(), cluster, l, prog, SimOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("deadlock"), std::string::npos);
  // The Boost.Graph cycle check catches the same program before any simulation.
  const Status cyclic = CheckAcyclic(prog);
  ASSERT_FALSE(cyclic.ok());
  EXPECT_NE(cyclic.message().find("cycle"), std::string::npos);
  EXPECT_NE(r.status().message().find("'first'"), std::string::npos);
  EXPECT_NE(r.status().message().find("'second'"), std::string::npos);
}

}  // namespace
}  // namespace shardsim
