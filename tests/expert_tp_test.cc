// The experts' tensor parallel size (Layout::etp, Megatron-Core's --expert-tensor-parallel-size)
// in parameters, activations and the plan table: the experts split over etp, not tp, and the
// expert-data-parallel group folded out of the stage's TP x CP x DP ranks. Every expected value
// is worked by hand in the comment before it.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "planner/plan_report.h"
#include "planner/planner.h"
#include "src/layout/stack.h"
#include "src/layout/validate.h"
#include "src/cost/layer_plan.h"
#include "src/cost/memory.h"
#include "src/hardware/hardware_spec.h"
#include "src/layout/layout.h"
#include "src/model/model_spec.h"
#include "tests/test_models.h"

namespace shardsim {
namespace {

// Resolved on dgx-h100 (tests/test_models.h).
Layout Resolved(const std::string& spec, int64_t gpus) { return testing::ResolvedOnH100(spec, gpus); }

// Mixtral 8x7B (models/mixtral-8x7b.yaml: 32 layers, hidden 4096, 8 SwiGLU experts of 14336, no
// biases) on 64 GPUs, tp 2, pp 4 (8 layers a stage), dp 8, ep 8: one expert a rank, whose MLP
// has 3 x 4096 x 14336 = 176,160,768 parameters. With the experts' TP the dense TP (2) a rank
// holds half: 8 x 88,080,384 = 704,643,072 on a stage; with etp 1 the whole expert: 8 x
// 176,160,768 = 1,409,286,144. The expert-data-parallel group: tp 2 x dp 8 / (etp x ep) = 2 / 2
// = 1 with etp 2, 16 / 8 = 2 with etp 1.
TEST(ExpertTensorParallel, SplitsTheExpertsOverEtp) {
  const ModelSpec m = *LoadModel("mixtral-8x7b");
  const Layout split = Resolved("tp=2,pp=4,ep=8,sp=on,mbs=1,gbs=64", 64);
  const Layout whole = Resolved("tp=2,pp=4,ep=8,etp=1,sp=on,mbs=1,gbs=64", 64);
  EXPECT_DOUBLE_EQ(ParamsOnStage(m, split, 0).expert, 704643072.0);
  EXPECT_DOUBLE_EQ(ParamsOnStage(m, whole, 0).expert, 1409286144.0);
  EXPECT_EQ(split.edp(), 1);
  EXPECT_EQ(whole.edp(), 2);
  // The dense part does not move: attention, norms and router over TP as before.
  EXPECT_DOUBLE_EQ(ParamsOnStage(m, split, 0).dense, ParamsOnStage(m, whole, 0).dense);
}

// The experts' saved intermediates: with etp 2 (the dense TP) a rank's experts take its own
// and its TP peer's routed copies, T x top_k = 32768 x 2 rows, at 14336 / 2 wide; with etp 1 its
// own T / tp x top_k = 16384 x 2 rows at the whole 14336: the same 32768 x 14336 elements. The
// experts' first GEMM keeps the rows it runs as its input: with etp 2 the gathered 32768 x 2,
// with etp 1 this rank's 16384 x 2; so etp 2 keeps 32768 x 4096 x 2 bytes = 268,435,456 more.
TEST(ExpertTensorParallel, KeepsTheSameIntermediatesPerRank) {
  const ModelSpec m = *LoadModel("mixtral-8x7b");
  const Layout split = Resolved("tp=2,pp=4,ep=8,sp=on,mbs=1,gbs=64", 64);
  const Layout whole = Resolved("tp=2,pp=4,ep=8,etp=1,sp=on,mbs=1,gbs=64", 64);
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, split, true) - LayerActivationBytes(m, whole, true), 268435456.0);
  // And a dense layer is untouched by etp.
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, split, false), LayerActivationBytes(m, whole, false));
}

// The plan table names the experts' TP where it is not tp (etp1), and only then.
TEST(ExpertTensorParallel, ShowsInThePlanTable) {
  EXPECT_EQ(planner::ShortLayout(Resolved("tp=2,pp=4,ep=8,etp=1,sp=on,mbs=1,gbs=64,zero=1", 64)),
            "tp2 pp4 dp8 ep8 etp1 mbs1 z1 sp none 1f1b");
  EXPECT_EQ(planner::ShortLayout(Resolved("tp=2,pp=4,ep=8,etp=2,sp=on,mbs=1,gbs=64,zero=1", 64)),
            "tp2 pp4 dp8 ep8 mbs1 z1 sp none 1f1b");
}

// An expert's replicas fold over TP x CP x DP, so they exist without DP: tiny-moe (4 layers, h 64,
// 4 SwiGLU experts of 128: 3 x 64 x 128 = 24,576 parameters each) on 2 GPUs, tp 2, etp 1, dp 1:
// edp = 2 x 1 x 1 / (1 x 1) = 2, both TP ranks holding all 4 experts whole (98,304 parameters a
// layer). fp32: the last micro-batch's backward all-reduces each MoE layer's expert gradients
// over the two, 98,304 x 4 = 393,216 bytes, 4 of them; nothing over DP. Under ZeRO-1 they are
// reduce-scattered instead (same bytes) and the step all-gathers the updated experts (4 more,
// 393,216 bytes each), still nothing over DP. (These are what the runtime executes:
// tests/runtime_priced_collectives_test.cc, ExpertsWholeUnderTp.)
TEST(ExpertTensorParallel, ReducesTheExpertsOverTheirReplicasWithoutDp) {
  const ModelSpec m = testing::TinyMoeModel(32);
  const HardwareSpec hw = *LoadHardware("dgx-h100");
  for (int zero : {0, 1}) {
    SCOPED_TRACE("zero=" + std::to_string(zero));
    const Layout l = Resolved("tp=2,sp=on,etp=1,mbs=1,gbs=2,dtype=fp32,zero=" + std::to_string(zero), 2);
    ASSERT_EQ(l.dp, 1);
    ASSERT_EQ(l.edp(), 2);
    const IterationPlan plan = BuildIterationPlan(m, hw, l);
    int reduced = 0, gathered = 0, over_dp = 0;
    auto count = [&](const TaskSpec& t) {
      if (t.kind != TaskKind::kCollective) return;
      if (t.group == GroupKind::kDp) ++over_dp;
      if (t.group != GroupKind::kEdp) return;
      EXPECT_DOUBLE_EQ(t.bytes, 393216.0);
      if (t.collective == Collective::kAllGather) {
        ++gathered;
      } else {
        EXPECT_EQ(t.collective, zero == 0 ? Collective::kAllReduce : Collective::kReduceScatter);
        ++reduced;
      }
    };
    const StagePlan& s = plan.stages[0];
    for (const TaskSpec& t : plan.PassFor(s, PipelineStep{Pass::kBackward, 1, 0}, true).tasks) count(t);
    for (const auto& [t, producer] : plan.PassFor(s, PipelineStep{Pass::kBackward, 1, 0}, true).deferred) count(t);
    for (const TaskSpec& t : s.tail.tasks) count(t);
    EXPECT_EQ(reduced, 4);
    EXPECT_EQ(gathered, zero == 1 ? 4 : 0);
    EXPECT_EQ(over_dp, 0);
  }
}

// Mixtral 8x7B on one DGX H100 under megatron-core-2024, tp 8, ep 4, etp 1: dp 1, but each
// expert has tp x cp x dp / (etp x ep) = 8 / 4 = 2 replicas, over which Megatron-Core's
// distributed optimizer shards its states; so the planner searches zero 1 there (not zero 2 or
// 3; with etp = tp there is no layout: ep 4 x etp 8 does not divide the 8 ranks), and the layout
// check does not warn that
// ZeRO has no effect. The rank's 2 whole experts a layer (3 x 4096 x 14336 = 176,160,768
// parameters each), 32 layers: 11,274,289,152 expert parameters, whose 12 bytes of optimizer
// state a parameter halve over the two replicas: 67.6 GB -> 11,274,289,152 x 12 / 2 =
// 67,645,734,912 bytes of the rank's optimizer states are the experts'.
TEST(ExpertTensorParallel, ThePlannerShardsTheExpertsOverTheirReplicasWithoutDp) {
  const ModelSpec m = *LoadModel("mixtral-8x7b");
  const HardwareSpec hw = *LoadHardware("dgx-h100");
  planner::PlanOptions o;
  o.gpus = 8;
  o.global_batch = 64;
  o.stack = *LoadStack("megatron-core-2024");
  o.fixed = {{"tp", "8"}, {"ep", "4"}};
  std::set<std::pair<int64_t, int>> zeros;  // (etp, zero)
  for (const Layout& l : planner::EnumerateLayouts(m, hw, o)) zeros.insert({l.expert_tp(), l.zero});
  EXPECT_EQ(zeros, (std::set<std::pair<int64_t, int>>{{1, 0}, {1, 1}}));
  const Layout z1 = Resolved("tp=8,ep=4,etp=1,sp=on,mbs=1,gbs=64,zero=1", 8);
  const LayoutCheck check = CheckLayout(z1, m, hw, 8);
  EXPECT_TRUE(check.ok()) << check.ToStatus().message();
  for (const std::string& w : check.warnings) EXPECT_EQ(w.find("has no effect"), std::string::npos) << w;
  const Layout z0 = Resolved("tp=8,ep=4,etp=1,sp=on,mbs=1,gbs=64,zero=0", 8);
  const double saved = ModelStateMemory(ParamsOnStage(m, z0, 0), z0).optimizer -
                       ModelStateMemory(ParamsOnStage(m, z1, 0), z1).optimizer;
  EXPECT_DOUBLE_EQ(saved, 67645734912.0);
}

}  // namespace
}  // namespace shardsim
