// overlap_tp off / backward / on in the simulator and the estimate, on one node
// whose compute and link speeds are chosen so that each expected difference is a sum of
// collective and weight-gradient times the test reads from the cost model:
//   off       every TP collective blocks: per layer and micro-batch 2 forward + 2 backward
//             all-reduces (SP: the forward's all-gather + reduce-scatter pairs, and in
//             backward per branch the output gradient's all-gather, the norm output's
//             re-gather and the input gradient's reduce-scatter);
//   backward  each backward branch's input-gradient reduction runs under its column-parallel
//             weight-gradient GEMMs (qkv; the MLP's up), and SP's re-gather under the
//             input-gradient GEMMs: hidden = min(C, W) per branch; forward unchanged;
//   on        nothing waits for a TP collective until the pass's end, where only the last
//             one (if no compute follows it) is exposed.
#include <gtest/gtest.h>

#include <algorithm>

#include "src/cost/estimate.h"
#include "src/cost/op_time.h"
#include "src/cost/ops.h"
#include "src/sim/simulator.h"
#include "tests/test_hardware.h"
#include "tests/test_models.h"

namespace shardsim {
namespace {

// The ideal 2-GPU node (tests/test_hardware.h); the fabric's bandwidth sets the TP collective
// time C.
HardwareSpec Node(const std::string& fabric_bandwidth) {
  return testing::TwoGpuNode(fabric_bandwidth);
}

// L = 2 layers, h = 1024, 16 heads, 1024-token sequences, vocabulary 8 (a negligible head).
constexpr int64_t kLayers = 2;
ModelSpec Model() { return testing::GptModel(kLayers, 1024, 16, 8, 1024); }

Layout Tp2(TpOverlap o, bool sp, int64_t microbatches = 1) {
  Layout l;
  l.tp = 2;
  l.dp = 1;
  l.sp = sp;
  l.mbs = 1;
  l.gbs = microbatches;
  l.schedule_given = true;
  l.dtype_given = true;
  l.overlap_tp = o;
  return l;
}

struct SimRun {
  double iteration_s, compute_s, tp_s;
};

SimRun SimulateTp(const std::string& bw, const Layout& l) {
  const Cluster cluster(Node(bw));
  StatusOr<SimResult> r = Simulate(Model(), cluster, l, SimOptions{});
  CHECK(r.ok()) << r.status().message();
  const RankResult& c = r->ranks[r->critical];
  return {r->iteration_time_s, c.breakdown_s[static_cast<int>(Category::kCompute)],
          c.breakdown_s[static_cast<int>(Category::kTp)]};
}

// One layer's column-parallel weight-gradient time per branch, W = backward / 2 of qkv (the
// attention) and of the MLP's up projection: at h = 1024, tp = 2, T = 1024 tokens,
// qkv 2·T·(3h/2)·h = 3.2 GFLOP -> 32 us, up 2·T·(4h/2)·h = 4.3 GFLOP -> 43 us at 100 TFLOP/s.
std::pair<double, double> Windows(const HardwareSpec& hw, const Layout& l) {
  double attention = 0, mlp = 0;
  for (const Op& op : LayerOps(Model(), l, false)) {
    if (!op.column_parallel) continue;
    (op.role == OpRole::kQkv ? attention : mlp) += OpBackwardTime(hw.gpu, l.dtype, op) / 2;
  }
  return {attention, mlp};
}

// overlap_tp=on (Transformer Engine's userbuffers) runs each row-parallel forward GEMM (the
// attention's output projection, the MLP's down projection) beside the communication kernels
// of its pipelined reduce-scatter, which hold 16 SMs: on the test GPU's 100 SMs it takes
// 100 / 84 as long, so compute grows by 16 / 84 of those GEMMs' forward time, per layer and
// micro-batch (src/cost/layer_plan.cc, kTpOverlapPipelineSms).
double RowParallelSlowdown(const HardwareSpec& hw, const Layout& l) {
  double row = 0;
  for (const Op& op : LayerOps(Model(), l, false)) {
    if (op.role == OpRole::kProjection || op.role == OpRole::kMlpDown) row += OpForwardTime(hw.gpu, l.dtype, op);
  }
  return static_cast<double>(kLayers) * static_cast<double>(l.microbatches()) * row * 16.0 / 84.0;
}

// The vocab-parallel cross-entropy's statistics all-gather, X: 3 floats per row of T = 1024
// from each of the 2 ranks (tp x 3 x T x 4 bytes in all).
double CrossEntropyGather(const std::string& bw) {
  const Cluster cluster(Node(bw));
  return CollectiveModel(cluster).Estimate(Collective::kAllGather, {0, 1}, 2.0 * 3 * 1024 * 4).time_s;
}

// Fabric 200 GB/s: an all-reduce of T·h·2 B = 2 MiB over 2 GPUs moves 2(n-1)/n · 2 MiB at
// 200 GB/s, C ≈ 10.5 us, below both windows and below every compute block. Besides the
// layers' TP collectives, the embedding's output is all-reduced (vocab-parallel), the head's
// input gradient too, each costing C, and the cross-entropy's statistics all-gathered (X).
TEST(TpOverlapSim, BackwardHidesTheBackwardReductionsOnly) {
  const SimRun off = SimulateTp("200 GB/s", Tp2(TpOverlap::kOff, false));
  const SimRun bwd = SimulateTp("200 GB/s", Tp2(TpOverlap::kBackward, false));
  const SimRun on = SimulateTp("200 GB/s", Tp2(TpOverlap::kOn, false));
  const auto [wa, wm] = Windows(Node("200 GB/s"), Tp2(TpOverlap::kOff, false));
  const double x = CrossEntropyGather("200 GB/s");
  // off: 4 all-reduces per layer and the embedding's and head's, all exposed:
  // tp = (4 L + 2) C + X.
  const double c = (off.tp_s - x) / (4 * kLayers + 2);
  ASSERT_GT(c, 5e-6);
  ASSERT_LT(c, std::min(wa, wm));
  // The split moves compute between tasks, it adds none; on slows the row-parallel GEMMs.
  const double slow = RowParallelSlowdown(Node("200 GB/s"), Tp2(TpOverlap::kOn, false));
  ASSERT_GT(slow, 0);
  EXPECT_NEAR(bwd.compute_s, off.compute_s, 1e-9);
  EXPECT_NEAR(on.compute_s, off.compute_s + slow, 1e-9);
  // backward: the layers' 2 L backward reductions hidden (C < W); the forward ones, the
  // embedding's and the head's exposed.
  EXPECT_NEAR(bwd.tp_s, (2 * kLayers + 2) * c + x, 1e-9);
  EXPECT_NEAR(off.iteration_s - bwd.iteration_s, 2 * kLayers * c, 1e-9);
  // on: only the last all-reduce of each pass (forward, backward) is exposed, 2 C, and the
  // statistics, which the loss needs before the backward: 2 C + X.
  EXPECT_NEAR(on.tp_s, 2 * c + x, 1e-9);
  EXPECT_NEAR(off.iteration_s - on.iteration_s, 4 * kLayers * c - slow, 1e-9);
}

// With SP, backward also hides each branch's re-gather under its input-gradient GEMMs: of the
// 10 collectives per layer (forward 2 all-gathers + 2 reduce-scatters; backward per branch an
// output-gradient all-gather, a re-gather and a reduce-scatter), each costing C (all-gather
// and reduce-scatter move (n-1)/n of the same T·h bytes), backward exposes 6. Either way 5 more
// cost C each (the embedding's reduce-scatter and its gradient's gather; the head's input
// gathered forward and again backward, its gradient reduce-scattered), X is the
// cross-entropy's statistics, and after the backward SP's gradients of the replicated tensors
// are summed over TP in one all-reduce S: per layer 2 LayerNorms (2 x 2h) and the two
// row-parallel biases (2h), plus the final norm (2h): (6 L + 2) h fp32 gradients.
TEST(TpOverlapSim, BackwardWithSpAlsoHidesTheReGathers) {
  const SimRun off = SimulateTp("200 GB/s", Tp2(TpOverlap::kOff, true));
  const SimRun bwd = SimulateTp("200 GB/s", Tp2(TpOverlap::kBackward, true));
  const Cluster cluster(Node("200 GB/s"));
  const double s = CollectiveModel(cluster)
                       .Estimate(Collective::kAllReduce, {0, 1}, (6.0 * kLayers + 2) * 1024 * 4)
                       .time_s;
  const double x = CrossEntropyGather("200 GB/s");
  const double c = (off.tp_s - s - x) / (10 * kLayers + 5);
  EXPECT_NEAR(bwd.tp_s, (6 * kLayers + 5) * c + s + x, 1e-9);
  EXPECT_NEAR(off.iteration_s - bwd.iteration_s, 4 * kLayers * c, 1e-9);
}

// Fabric 20 GB/s: C ≈ 105 us exceeds both windows, so backward hides W per branch:
// off - backward = L (W_attention + W_mlp).
TEST(TpOverlapSim, BackwardHidesAtMostTheWeightGradientTime) {
  const SimRun off = SimulateTp("20 GB/s", Tp2(TpOverlap::kOff, false));
  const SimRun bwd = SimulateTp("20 GB/s", Tp2(TpOverlap::kBackward, false));
  const auto [wa, wm] = Windows(Node("20 GB/s"), Tp2(TpOverlap::kOff, false));
  ASSERT_GT(off.tp_s / (4 * kLayers), std::max(wa, wm));
  EXPECT_NEAR(off.iteration_s - bwd.iteration_s, kLayers * (wa + wm), 1e-9);
}

// Zero-bubble defers the weight gradients to the W pass: nothing left to hide under.
TEST(TpOverlapSim, BackwardUnderZeroBubbleIsOff) {
  Layout off = Tp2(TpOverlap::kOff, false, 4);
  off.schedule = Schedule::kZeroBubble;
  Layout bwd = off;
  bwd.overlap_tp = TpOverlap::kBackward;
  EXPECT_DOUBLE_EQ(SimulateTp("200 GB/s", off).iteration_s,
                   SimulateTp("200 GB/s", bwd).iteration_s);
}

// The estimate evaluates the simulator's own tasks without contention, and on this node the
// TP stream is the only one that moves data: so it agrees with the simulation for every mode,
// and with 4 micro-batches off - backward = 4 L (min(C, W_attention) + min(C, W_mlp)) (C
// below both windows at 200 GB/s, above both at 20 GB/s).
TEST(TpOverlapEstimate, EqualsTheSimulationAndHidesMinOfReductionAndWeightGradient) {
  for (const std::string bw : {"200 GB/s", "20 GB/s"}) {
    SCOPED_TRACE(bw);
    const Cluster cluster(Node(bw));
    for (bool sp : {false, true}) {
      for (TpOverlap o : {TpOverlap::kOff, TpOverlap::kBackward, TpOverlap::kOn}) {
        const SimRun sim = SimulateTp(bw, Tp2(o, sp, 4));
        const Estimate est = EstimateIteration(Model(), cluster, Tp2(o, sp, 4));
        // The simulator rounds each task up to the picosecond: at most 1 ns over these tasks.
        EXPECT_NEAR(est.iteration_time_s, sim.iteration_s, 1e-9);
        EXPECT_NEAR(est.time.tp_comm, sim.tp_s, 1e-9);
        EXPECT_NEAR(est.time.compute, sim.compute_s, 1e-9);
      }
    }
    const Estimate off = EstimateIteration(Model(), cluster, Tp2(TpOverlap::kOff, false, 4));
    const Estimate bwd = EstimateIteration(Model(), cluster, Tp2(TpOverlap::kBackward, false, 4));
    const auto [wa, wm] = Windows(cluster.hardware(), Tp2(TpOverlap::kOff, false));
    // 4 micro-batches, each (4 L + 2) C + X of TP time (TpOverlapSim above).
    const double c = (off.time.tp_comm / 4 - CrossEntropyGather(bw)) / (4 * kLayers + 2);
    EXPECT_NEAR(off.iteration_time_s - bwd.iteration_time_s,
                4 * kLayers * (std::min(c, wa) + std::min(c, wm)), 1e-9);
  }
}

}  // namespace
}  // namespace shardsim
