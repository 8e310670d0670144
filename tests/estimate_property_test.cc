// Property test of issue 13's item 2: the estimate is the simulation's closed form. Over 1,200
// (and 150 more of an MoE model with a multi-token prediction depth) random valid layouts
// (dense MHA, GQA and MoE models; the bundled A100 and H100 clusters;
// every schedule, ZeRO stage, SP, CP, EP, recompute, offload, overlap switch, dtype and
// attention kernel the planner searches), for each layout:
//   - the critical path without contention (Estimate::critical_path_s and the planner's
//     EstimateTime, plan_eval.h's Contention::kNone) equals the critical path of the
//     simulator's own program at isolated durations (task_graph.h, an independent Boost.Graph
//     longest path), to rounding, and never exceeds the simulated time (contention only
//     delays; the simulator rounds each task up to the picosecond), so the planner may use it
//     as a bound; nor do the planner's two cheaper bounds (ComputeLowerBound, BoundPlan);
//   - the estimate (each pass's transfers sharing links with those of the passes just before and
//     after it, Contention::kWithinPass) is the same in both evaluations, never below the
//     critical path, and its breakdown adds up to it;
//   - the peak memory equals the simulator's;
// and over the sample |simulation - estimate| / simulation has a median <= 2 % and a maximum
// <= 8 % (issue 13). Measured on this sample (2026-12-08, docs/validation/estimate-vs-simulation.md,
// scripts/validate-estimate.sh; with NCCL's kernels holding SMs
// beside the compute in both, src/cost/sm_contention.h; fused attention's backward at 2.5 x
// its forward): median 0.003 %, p90 0.41 %, max 6.91 % (the simulation above: test-gqa on
// H100, tp=2, pp=2, dp=2, cp=4, interleaved, ZeRO-3 with overlap_dp, whose transfers back up
// for more passes than the estimate's window holds), the estimate at most 2.64 % above the
// simulation (a sharing the simulation's offsets avoid). The maximum depends on the sample: with
// etp=1 added to the space it samples (the planner's stack-free space, planner.cc) it reaches
// 8.05 % on a dense layout (test-gpt on A100, tp=4, pp=2, cp=4, zb-v, ZeRO-2). History of the maximum: 20.04 % when the estimate was the
// critical path, 12.06 % with the pass before sharing links (median 0.008 %), 7.95 % with the
// pass after too (a ZeRO-2 reduce-scatter the next pass's send slows, and the send of the pass
// that waits for it); 10.53 % once the simulation priced NCCL's SMs and the estimate only
// within those passes, 7.30 % with the pass before the last one kept too, and the last one
// kept whenever a transfer of it still runs when the input arrives.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "planner/planner.h"
#include "src/cost/estimate.h"
#include "src/cost/layer_plan.h"
#include "src/cost/plan_eval.h"
#include "src/layout/validate.h"
#include "src/sim/simulator.h"
#include "src/sim/task_graph.h"
#include "tests/test_models.h"

namespace shardsim {
namespace {

ModelSpec Gqa() {  // Llama-style: GQA 4:1, SwiGLU, RMSNorm, RoPE, untied, no biases
  ModelSpec m = testing::TinyModel(2048);
  m.name = "test-gqa";
  m.layers = 8;
  m.hidden = 2048;
  m.heads = 16;
  m.kv_heads = 4;
  m.head_dim = 128;
  m.ffn_hidden = 5632;
  m.vocab = 32000;
  return m;
}

ModelSpec Moe() {  // Mixtral-style: 8 experts, top 2, every layer
  ModelSpec m = Gqa();
  m.name = "test-moe";
  m.hidden = 1024;
  m.heads = 16;
  m.kv_heads = 8;
  m.head_dim = 64;
  m.ffn_hidden = 3584;
  m.moe = MoeSpec{8, 2, 3584, 1};
  return m;
}

ModelSpec MoeMtp() {  // the same with one multi-token prediction depth (DeepSeek-V3's)
  ModelSpec m = Moe();
  m.name = "test-moe-mtp";
  m.mtp_layers = 1;
  return m;
}

struct Case {
  ModelSpec model;
  const Cluster* cluster;
  int64_t gpus, gbs;
};

TEST(EstimateProperty, EqualsTheCriticalPathAndBoundsTheSimulation) {
  const Cluster a100(*LoadHardware("dgx-a100-80gb"));
  const Cluster h100(*LoadHardware("dgx-h100"));
  const std::vector<ModelSpec> models = {testing::GptModel(8, 2048, 16, 32000, 2048), Gqa(), Moe()};
  std::mt19937 rng(20261201);
  auto pick = [&](auto& v) -> decltype(v[0])& {
    return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)];
  };
  std::vector<double> gaps;          // (sim - est) / sim
  std::vector<double> path_gaps;     // (sim - critical path) / sim
  std::vector<double> bound_gaps;    // (critical path - bound) / critical path
  std::vector<double> compute_gaps;  // (critical path - compute bound) / critical path
  int checked = 0;
  // 1,200 layouts of the three models, then 150 of the MoE model with an MTP depth, each from
  // its own seed (so adding the second set left the first's sample as it was).
  int kLayouts = 1200;
  std::vector<ModelSpec> set = models;
  for (int round = 0; round < 2; ++round) {
    if (round == 1) {
      set = {MoeMtp()};
      kLayouts += 150;
      rng.seed(20261206);
    }
    while (checked < kLayouts) {
      Case c{set[checked % set.size()], checked % 2 ? &h100 : &a100, 0, 0};
      std::vector<int64_t> gpus = {8, 16, 32, 64};
      std::vector<int64_t> gbs = {16, 32, 64};
      c.gpus = pick(gpus);
      c.gbs = pick(gbs);
      const HardwareSpec& hw = c.cluster->hardware();
      planner::PlanOptions o;
      o.gpus = c.gpus;
      o.global_batch = c.gbs;
      std::vector<Layout> space = planner::EnumerateLayouts(c.model, hw, o);
      std::shuffle(space.begin(), space.end(), rng);
      int taken = 0;
      for (Layout l : space) {
        if (taken == 25 || checked == kLayouts) break;
        // The switches the planner does not search, at random.
        l.overlap_dp = rng() % 4 != 0;
        l.overlap_tp = static_cast<TpOverlap>(rng() % 3);
        l.overlap_pp = rng() % 2 == 0;
        l.prefetch = rng() % 4 != 0;
        l.attention = rng() % 4 == 0 ? AttentionImpl::kUnfused : AttentionImpl::kFlash;
        l.dtype = rng() % 5 == 0 ? DType::kFp32 : DType::kBf16;
        if (!CheckLayout(l, c.model, hw, c.gpus).ok()) continue;
        ++taken;
        ++checked;
        SCOPED_TRACE(c.model.name + " on " + hw.name + ": " + FormatLayout(l));
        const CollectiveModel comm(*c.cluster);
        const Estimate est = EstimateIteration(c.model, comm, l);
        const QuickEstimate quick = EstimateTime(c.model, comm, l);
        const IterationProgram program = BuildIteration(c.model, hw, l);
        const double path = FindCriticalPath(program, *c.cluster, l).length_s;
        SimOptions so;
        so.critical_path = false;
        so.collectives = &comm;
        StatusOr<SimResult> sim = Simulate(c.model, *c.cluster, l, so);
        ASSERT_TRUE(sim.ok()) << sim.status().message();
        const double t = est.critical_path_s;
        ASSERT_NEAR(t, path, 1e-9 * path);
        ASSERT_NEAR(quick.iteration_time_s, t, 1e-9 * t);
        const QuickEstimate bound = EstimateBound(c.model, comm, l);
        ASSERT_LE(bound.iteration_time_s, t * (1 + 1e-12));
        ASSERT_NEAR(bound.peak_memory_bytes, quick.peak_memory_bytes,
                    1e-9 * quick.peak_memory_bytes);
        bound_gaps.push_back((t - bound.iteration_time_s) / t);
        const double compute_bound = ComputeLowerBound(c.model, comm, l);
        ASSERT_LE(compute_bound, t * (1 + 1e-12));
        {
          // The planner prepares each layer shape once: a layout that differs only in what
          // LayerShapeKey leaves out (pipeline, DP side, schedule, overlap but overlap_tp=on, whose
          // reduce-scatters hold SMs of the row-parallel GEMMs) gives the same bound.
          Layout other = l;
          other.pp = l.pp * 2;
          other.dp = l.dp + 3;
          other.vpp = l.vpp + 1;
          other.gbs = l.gbs * 5;
          other.zero = (l.zero + 1) % 4;
          other.schedule = l.schedule == Schedule::kGpipe ? Schedule::k1F1B : Schedule::kGpipe;
          other.offload = l.offload == Offload::kNone ? Offload::kOptimizer : Offload::kNone;
          other.overlap_dp = !l.overlap_dp;
          other.overlap_pp = !l.overlap_pp;
          other.prefetch = !l.prefetch;
          if (l.overlap_tp != TpOverlap::kOn) {
            other.overlap_tp =
                l.overlap_tp == TpOverlap::kOff ? TpOverlap::kBackward : TpOverlap::kOff;
          }
          other.bucket_params = l.bucket_params + 777;
          other.live_params = l.live_params / 2 + 1;
          other.grad_compression = 4;
          ASSERT_EQ(LayerShapeKey(other), LayerShapeKey(l));
          ASSERT_EQ(
              ComputeLowerBound(c.model, comm, l, PrepareLayerShape(c.model, hw, other).get()),
              compute_bound);
        }
        compute_gaps.push_back((t - compute_bound) / t);
        // The simulator rounds every task up to the picosecond: 1 ps per task at most.
        ASSERT_LE(t, sim->iteration_time_s + 1e-12 * static_cast<double>(program.task_count()));
        // The estimate: both evaluations of the contended plan agree, never below the bound.
        const double e = est.iteration_time_s;
        const IterationPlan plan = BuildIterationPlan(c.model, hw, l);
        ASSERT_NEAR(EvaluatePlan(plan, comm, l, EvalDetail::kTime, Contention::kWithinPass)
                        .iteration_time_s,
                    e, 1e-9 * e);
        ASSERT_GE(e, t * (1 - 1e-12));
        ASSERT_NEAR(est.peak_memory().total(), sim->peak_memory_bytes,
                    1e-9 * sim->peak_memory_bytes);
        ASSERT_NEAR(quick.peak_memory_bytes, sim->peak_memory_bytes, 1e-9 * sim->peak_memory_bytes);
        EXPECT_EQ(est.fits, sim->fits);
        double sum = 0;
        for (double x : {est.time.compute, est.time.recompute, est.time.tp_comm, est.time.cp_comm,
                         est.time.ep_comm, est.time.pp_comm, est.time.dp_comm, est.time.bubble,
                         est.time.optimizer, est.time.offload}) {
          ASSERT_GE(x, -1e-12);
          sum += x;
        }
        ASSERT_NEAR(sum, e, 1e-9 * e);  // the breakdown adds up
        path_gaps.push_back(std::max(0.0, sim->iteration_time_s - t) / sim->iteration_time_s);
        gaps.push_back((sim->iteration_time_s - e) / sim->iteration_time_s);
        if (std::getenv("SHARDSIM_PROPERTY_VERBOSE") && std::abs(gaps.back()) > 0.02) {
          std::printf("gap %.2f %% (critical path %.2f %%) %s on %s: %s\n", 100 * gaps.back(),
                      100 * path_gaps.back(), c.model.name.c_str(), hw.name.c_str(),
                      FormatLayout(l).c_str());
        }
      }
    }
  }
  // |gap| order; the signed extremes apart.
  const auto [lowest, highest] = std::minmax_element(gaps.begin(), gaps.end());
  const double below = *lowest, above = *highest;
  std::sort(gaps.begin(), gaps.end(), [](double a, double b) { return std::abs(a) < std::abs(b); });
  const double median = std::abs(gaps[gaps.size() / 2]), worst = std::abs(gaps.back());
  std::printf(
      "estimate vs simulation over %zu layouts: |sim - est| / sim median %.3f %%, p90 %.3f %%, max "
      "%.3f %%; "
      "simulation above by at most %.3f %%, below by at most %.3f %%\n",
      gaps.size(), 100 * median, 100 * std::abs(gaps[gaps.size() * 9 / 10]), 100 * worst,
      100 * std::max(0.0, above), 100 * std::max(0.0, -below));
  std::sort(path_gaps.begin(), path_gaps.end());
  std::printf("critical path vs simulation: median %.3f %%, p90 %.3f %%, max %.3f %%\n",
              100 * path_gaps[path_gaps.size() / 2], 100 * path_gaps[path_gaps.size() * 9 / 10],
              100 * path_gaps.back());
  std::sort(bound_gaps.begin(), bound_gaps.end());
  std::printf("planner's bound vs critical path: median %.3f %%, p90 %.3f %%, max %.3f %%\n",
              100 * bound_gaps[bound_gaps.size() / 2], 100 * bound_gaps[bound_gaps.size() * 9 / 10],
              100 * bound_gaps.back());
  std::sort(compute_gaps.begin(), compute_gaps.end());
  std::printf(
      "planner's compute bound vs critical path: median %.3f %%, p90 %.3f %%, max %.3f %%\n",
      100 * compute_gaps[compute_gaps.size() / 2], 100 * compute_gaps[compute_gaps.size() * 9 / 10],
      100 * compute_gaps.back());
  EXPECT_LE(median, 0.02);
  EXPECT_LE(worst, 0.08);
}

}  // namespace
}  // namespace shardsim
