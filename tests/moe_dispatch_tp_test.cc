// An MoE layer under TP + SP with ep > 1 priced as Megatron-Core's alltoall dispatcher runs it
// (src/cost/ops.h MoeInputSplitOverTp): each TP rank dispatches its own T / tp tokens, the
// received tokens are all-gathered over TP for the experts and their outputs reduce-scattered,
// and the layer has no SP exchange of its own at its ends. Every expected value is worked by
// hand in the comment before it.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "src/cost/layer_plan.h"
#include "src/cost/ops.h"
#include "src/hardware/hardware_spec.h"
#include "src/layout/layout.h"
#include "tests/find_op.h"
#include "tests/test_models.h"

namespace shardsim {
namespace {

// A layer's collectives in one pass of stage 0, micro-batch 0: (group, collective, bytes) ->
// count, over the transformer layers (layer >= 0).
std::map<std::tuple<GroupKind, Collective, double>, int> LayerCollectives(const IterationPlan& plan, Pass pass) {
  std::map<std::tuple<GroupKind, Collective, double>, int> out;
  const StagePlan& s = plan.stages[0];
  const PassPlan& p = plan.PassFor(s, PipelineStep{pass, 0, 0}, false);
  for (const TaskSpec& t : p.tasks) {
    if (t.kind == TaskKind::kCollective && t.layer >= 0 &&
        (t.group == GroupKind::kTp || t.group == GroupKind::kEp || t.group == GroupKind::kEtp)) {
      ++out[{t.group, t.collective, t.bytes}];
    }
  }
  return out;
}

// TinyMoeModel(32) (h 64, top 2, 4 layers), mbs 1: T = 32 tokens a rank, bf16 (2 bytes).
// Dense SP exchanges carry T h e = 4,096 bytes. tp = 2, sp, ep = 2 (dp = 2): the dispatch and
// combine all-to-alls carry this rank's T / 2 x 2 x 64 x 2 = 4,096 bytes (every TP rank sent
// all T before: 8,192), the experts' tokens T x 2 x 64 x 2 = 8,192 over TP. Per layer, forward:
// the attention's SP all-gather and reduce-scatter (4,096 each), the dispatch, the experts'
// all-gather, their reduce-scatter, the combine; no SP exchange around the MoE layer.
TEST(MoeDispatchTp, TheDispatcherGathersOverTpAfterTheAllToAll) {
  const ModelSpec m = testing::TinyMoeModel(32);
  const HardwareSpec hw = *LoadHardware("dgx-h100");
  const Layout l = testing::ResolvedOnH100("tp=2,sp=on,dp=2,ep=2,mbs=1,gbs=2,dtype=bf16", 4);
  ASSERT_TRUE(MoeInputSplitOverTp(l));
  const IterationPlan plan = BuildIterationPlan(m, hw, l);
  using K = std::tuple<GroupKind, Collective, double>;
  const std::map<K, int> fwd = LayerCollectives(plan, Pass::kForward);
  const std::map<K, int> want_fwd = {
      {K{GroupKind::kTp, Collective::kAllGather, 4096.0}, 4},     {K{GroupKind::kTp, Collective::kReduceScatter, 4096.0}, 4},
      {K{GroupKind::kEp, Collective::kAllToAll, 4096.0}, 2 * 4},  {K{GroupKind::kTp, Collective::kAllGather, 8192.0}, 4},
      {K{GroupKind::kTp, Collective::kReduceScatter, 8192.0}, 4}};
  EXPECT_EQ(fwd, want_fwd);
  // Backward: the MoE branch mirrors it (the two all-to-alls, the experts' output gradient
  // gathered and their input gradient reduce-scattered) with no SP exchange of its own; the
  // attention branch keeps its output gradient's gather, its norm output's re-gather and its
  // input gradient's reduce-scatter (overlap_tp=backward, the default: split around its
  // column-parallel weight gradients).
  const std::map<K, int> bwd = LayerCollectives(plan, Pass::kBackward);
  const std::map<K, int> want_bwd = {
      {K{GroupKind::kTp, Collective::kAllGather, 4096.0}, 2 * 4}, {K{GroupKind::kTp, Collective::kReduceScatter, 4096.0}, 4},
      {K{GroupKind::kEp, Collective::kAllToAll, 4096.0}, 2 * 4},  {K{GroupKind::kTp, Collective::kAllGather, 8192.0}, 4},
      {K{GroupKind::kTp, Collective::kReduceScatter, 8192.0}, 4}};
  EXPECT_EQ(bwd, want_bwd);
}

// The router and the permutation see this rank's T / tp = 16 tokens: the router GEMM is 16 rows
// of 4 experts over h 64; each permute moves 16 x 2 rows of 64 bf16 values twice (read, write):
// 2 x 2 x 32 x 64 = 8,192 bytes. Without SP (or with ep = 1) all T = 32 tokens: 16,384.
TEST(MoeDispatchTp, TheRouterAndThePermutationSeeThisRanksTokens) {
  const ModelSpec m = testing::TinyMoeModel(32);
  Layout l;
  l.tp = 2;
  l.sp = true;
  l.ep = 2;
  l.dp = 2;
  l.mbs = 1;
  l.gbs = 2;
  const std::vector<Op> ops = LayerOps(m, l, true);
  EXPECT_EQ(testing::FindOp(ops, "router").m, 16);
  EXPECT_DOUBLE_EQ(testing::FindOp(ops, "moe_permute").bytes, 8192.0);
  l.sp = false;
  EXPECT_FALSE(MoeInputSplitOverTp(l));
  EXPECT_EQ(testing::FindOp(LayerOps(m, l, true), "router").m, 32);
  EXPECT_DOUBLE_EQ(testing::FindOp(LayerOps(m, l, true), "moe_permute").bytes, 16384.0);
  l.sp = true;
  l.ep = 1;
  EXPECT_FALSE(MoeInputSplitOverTp(l));
}

// Experts' TP 1 under tp 2 (Megatron-Core's --expert-tensor-parallel-size 1, MoE parallel
// folding): tp 2 x dp 2 ranks fold into ep 4 x etp 1. Each rank routes its own T / 2 = 16
// tokens, all-to-alls 16 x 2 x 64 x 2 = 4,096 bytes, and its one expert (4 / 4) takes 16 x 2 =
// 32 token copies at the full expert width: gate_up (32 x 256 x 64), down (32 x 64 x 128). No
// gather over any TP group; the attention keeps its SP gather and reduce-scatter (4,096 each).
TEST(MoeDispatchTp, ExpertsWholeUnderEtpOne) {
  const ModelSpec m = testing::TinyMoeModel(32);
  const HardwareSpec hw = *LoadHardware("dgx-h100");
  const Layout l = testing::ResolvedOnH100("tp=2,sp=on,dp=2,ep=4,etp=1,mbs=1,gbs=2,dtype=bf16", 4);
  ASSERT_EQ(l.expert_tp(), 1);
  EXPECT_TRUE(MoeInputSplitOverTp(l));
  EXPECT_FALSE(MoeGathersOverExpertTp(l));
  const std::vector<Op> ops = LayerOps(m, l, true);
  const Op& up = testing::FindOp(ops, "expert_gate_up");
  EXPECT_EQ(up.m, 32);
  EXPECT_EQ(up.n, 256);
  EXPECT_EQ(up.k, 64);
  const Op& down = testing::FindOp(ops, "expert_down");
  EXPECT_EQ(down.m, 32);
  EXPECT_EQ(down.k, 128);
  EXPECT_EQ(testing::FindOp(ops, "router").m, 16);
  const IterationPlan plan = BuildIterationPlan(m, hw, l);
  using K = std::tuple<GroupKind, Collective, double>;
  const std::map<K, int> want_fwd = {{K{GroupKind::kTp, Collective::kAllGather, 4096.0}, 4},
                                     {K{GroupKind::kTp, Collective::kReduceScatter, 4096.0}, 4},
                                     {K{GroupKind::kEp, Collective::kAllToAll, 4096.0}, 2 * 4}};
  EXPECT_EQ(LayerCollectives(plan, Pass::kForward), want_fwd);
  // Backward: the two all-to-alls; the attention's output-gradient gather, norm re-gather and
  // input-gradient reduce-scatter, as in the test above.
  const std::map<K, int> want_bwd = {{K{GroupKind::kTp, Collective::kAllGather, 4096.0}, 2 * 4},
                                     {K{GroupKind::kTp, Collective::kReduceScatter, 4096.0}, 4},
                                     {K{GroupKind::kEp, Collective::kAllToAll, 4096.0}, 2 * 4}};
  EXPECT_EQ(LayerCollectives(plan, Pass::kBackward), want_bwd);
}

// Experts' TP 2 without dense TP (tp 1, dp 4 -> etp 2 x ep 2): each rank routes its T = 32
// tokens and all-to-alls 32 x 2 x 64 x 2 = 8,192 bytes; the dispatcher then gathers the
// tokens its experts' TP peer received, 8,192 x 2 = 16,384 bytes over GroupKind::kEtp (ranks
// 0 and 1), and the experts' two GEMMs take 32 x 2 x 2 = 128 rows at half width: gate_up
// (128 x 2 x 128 / 2 x 64), down (128 x 64 x 64).
TEST(MoeDispatchTp, ExpertsSplitOverTheirOwnTpGroup) {
  const ModelSpec m = testing::TinyMoeModel(32);
  const HardwareSpec hw = *LoadHardware("dgx-h100");
  const Layout l = testing::ResolvedOnH100("tp=1,dp=4,ep=2,etp=2,mbs=1,gbs=4,dtype=bf16", 4);
  EXPECT_FALSE(MoeInputSplitOverTp(l));
  EXPECT_TRUE(MoeGathersOverExpertTp(l));
  const std::vector<Op> ops = LayerOps(m, l, true);
  EXPECT_EQ(testing::FindOp(ops, "expert_gate_up").m, 128);
  EXPECT_EQ(testing::FindOp(ops, "expert_gate_up").n, 128);
  EXPECT_EQ(testing::FindOp(ops, "expert_down").k, 64);
  EXPECT_EQ(GroupMembers(l, 0, GroupKind::kEtp), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(GroupMembers(l, 0, GroupKind::kEp), (std::vector<int64_t>{0, 2}));
  const IterationPlan plan = BuildIterationPlan(m, hw, l);
  using K = std::tuple<GroupKind, Collective, double>;
  const std::map<K, int> want = {{K{GroupKind::kEp, Collective::kAllToAll, 8192.0}, 2 * 4},
                                 {K{GroupKind::kEtp, Collective::kAllGather, 16384.0}, 4},
                                 {K{GroupKind::kEtp, Collective::kReduceScatter, 16384.0}, 4}};
  EXPECT_EQ(LayerCollectives(plan, Pass::kForward), want);
  EXPECT_EQ(LayerCollectives(plan, Pass::kBackward), want);
}

}  // namespace
}  // namespace shardsim
