// recompute=op: torchtitan's per-op selective activation checkpointing (src/cost/ops.h
// OpCheckpoint): a block keeps attention's output and every other aten.mm's output in forward
// order and recomputes the rest. Every expected value is worked by hand in the comment before it.
#include <gtest/gtest.h>

#include <string>

#include "src/cost/estimate.h"
#include "src/cost/memory.h"
#include "src/hardware/cluster.h"
#include "src/cost/ops.h"
#include "src/layout/layout.h"
#include "src/layout/stack.h"
#include "src/model/model_spec.h"
#include "tests/find_op.h"
#include "tests/test_models.h"

namespace shardsim {
namespace {

Layout OpLayout(int64_t tp = 1) {
  Layout l;
  l.tp = tp;
  l.dp = 1;
  l.mbs = 1;
  l.gbs = 1;
  l.recompute = Recompute::kOp;
  return l;
}

// TinyModel: q = 4 heads x 16 = 64, kv = 2 x 16 = 32, SwiGLU f = 256. torchtitan's block runs
// wq (mm 1), wk (2), wv (3), attention, wo (4), w1 (5), w3 (6), w2 (7); the even ones are
// recomputed. The fused qkv (n = 64 + 2 x 32 = 128) recomputes wk's 32 columns: 32 / 128 =
// 0.25; proj (wo) whole: 1; gate_up (w1, w3 of 256 each) w3's half: 0.5; down (w2): 0; the
// attention kernel is saved: 0; the norms, SwiGLU and residual adds are recomputed: 1.
TEST(RecomputeOp, RecomputesEveryOtherMatmulOfTheBlock) {
  const ModelSpec m = testing::TinyModel(32);
  const std::vector<Op> ops = LayerOps(m, OpLayout(), false);
  EXPECT_DOUBLE_EQ(testing::FindOp(ops, "qkv").op_recomputed, 0.25);
  EXPECT_DOUBLE_EQ(testing::FindOp(ops, "proj").op_recomputed, 1.0);
  EXPECT_DOUBLE_EQ(testing::FindOp(ops, "mlp_gate_up").op_recomputed, 0.5);
  EXPECT_DOUBLE_EQ(testing::FindOp(ops, "mlp_down").op_recomputed, 0.0);
  EXPECT_DOUBLE_EQ(testing::FindOp(ops, "attention").op_recomputed, 0.0);
  for (const char* name : {"norm1", "norm2", "residual1", "residual2", "mlp_swiglu"}) {
    EXPECT_DOUBLE_EQ(testing::FindOp(ops, name).op_recomputed, 1.0) << name;
  }
  // Under any other recompute nothing is marked.
  Layout none = OpLayout();
  none.recompute = Recompute::kFull;
  for (const Op& op : LayerOps(m, none, false)) EXPECT_EQ(op.op_recomputed, 0.0) << op.name;
}

// GELU MLP (no gate): wq wk wv wo up down are mm 1-6, so wk, wo and down are recomputed and up
// kept. GptModel(2, 64, 4, ...): q = kv = 64 (MHA), the fused qkv recomputes 64 / 192 = 1/3.
TEST(RecomputeOp, AGeluMlpRecomputesItsDownProjection) {
  const ModelSpec m = testing::GptModel(2, 64, 4, 512, 32);
  const std::vector<Op> ops = LayerOps(m, OpLayout(), false);
  EXPECT_DOUBLE_EQ(testing::FindOp(ops, "qkv").op_recomputed, 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(testing::FindOp(ops, "proj").op_recomputed, 1.0);
  EXPECT_DOUBLE_EQ(testing::FindOp(ops, "mlp_up").op_recomputed, 0.0);
  EXPECT_DOUBLE_EQ(testing::FindOp(ops, "mlp_down").op_recomputed, 1.0);
}

// The hardware FLOPs add the recomputed matmuls: per token and layer 2 h kv (wk) + 2 q h (wo) +
// 2 h f (w3) = 2 x 64 x (32 + 64 + 256) = 45,056; 32 tokens, 4 layers, gbs 3: 17,301,504.
TEST(RecomputeOp, HardwareFlopsAddTheRecomputedMatmuls) {
  const ModelSpec m = testing::TinyModel(32);
  Layout l = OpLayout();
  l.gbs = 3;
  EXPECT_DOUBLE_EQ(IterationFlops(m, l, true) - IterationFlops(m, l, false), 45056.0 * 32 * 4 * 3);
}

// What a layer keeps, bf16 (2 bytes), T = 32 tokens: its input 32 x 64 x 2 = 4,096; the kept
// matmul outputs wq 32 x 64 x 2 = 4,096, wv 32 x 32 x 2 = 2,048, w1 32 x 256 x 2 = 16,384, w2
// 32 x 64 x 2 = 4,096; attention's output 32 x 64 x 2 = 4,096 and its log-sum-exp 4 bytes x 32
// rows x 4 heads = 512. Sum 35,328. With tp = 2 and SP: the input 2,048, wq 2,048 (32 of 64
// columns), wv 1,024 (one KV head), w1 8,192, w2 4,096 (whole rows, the partial output), the
// attention's 2,048 + 256: 19,712.
TEST(RecomputeOp, ALayerKeepsItsInputTheSavedMatmulsAndAttention) {
  const ModelSpec m = testing::TinyModel(32);
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, OpLayout(), false), 35328.0);
  Layout tp = OpLayout(2);
  tp.sp = true;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, tp, false), 19712.0);
}

// Op keeps less than none and more than full (a layer's input alone: 4,096 bytes).
TEST(RecomputeOp, KeepsBetweenNoneAndFull) {
  const ModelSpec m = testing::TinyModel(32);
  Layout none = OpLayout(), full = OpLayout();
  none.recompute = Recompute::kNone;
  full.recompute = Recompute::kFull;
  const double op = LayerActivationBytes(m, OpLayout(), false);
  EXPECT_LT(op, LayerActivationBytes(m, none, false));
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, full, false), 4096.0);
  EXPECT_GT(op, 4096.0);
}

// In the iteration: op's recompute is a part of full's (a third of the matmul FLOPs and every
// elementwise op against the whole forward), so the step and its recompute time order none <
// op < full, and none recomputes nothing (GqaTestModel on 8 H100, data parallel).
TEST(RecomputeOp, TheStepOrdersBetweenNoneAndFull) {
  const ModelSpec m = testing::GqaTestModel();
  StatusOr<HardwareSpec> hw = LoadHardware("dgx-h100");
  ASSERT_TRUE(hw.ok());
  const Cluster cluster(*hw);
  double step[3], recompute[3];
  const char* kinds[3] = {"none", "op", "full"};
  for (int i = 0; i < 3; ++i) {
    const Layout l = testing::ResolvedOnH100(std::string("dp=8,mbs=1,gbs=16,zero=1,recompute=") + kinds[i], 8);
    const Estimate e = EstimateIteration(m, cluster, l);
    step[i] = e.iteration_time_s;
    recompute[i] = e.time.recompute;
  }
  EXPECT_EQ(recompute[0], 0.0);
  EXPECT_GT(recompute[1], 0.0);
  EXPECT_LT(recompute[1], recompute[2]);
  EXPECT_LT(step[0], step[1]);
  EXPECT_LT(step[1], step[2]);
}

// The layout spelling, and the stacks: torchtitan runs op and no attention-core recompute;
// Megatron-Core runs no op.
TEST(RecomputeOp, LayoutAndStacks) {
  StatusOr<Layout> l = ParseLayout("recompute=op");
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_EQ(l->recompute, Recompute::kOp);
  EXPECT_NE(FormatLayout(*l).find("recompute=op"), std::string::npos);
  StatusOr<Layout> bad = ParseLayout("recompute=ops");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("did you mean 'op'"), std::string::npos) << bad.status().message();

  StatusOr<StackSpec> titan = LoadStack("torchtitan-fsdp2");
  StatusOr<StackSpec> mcore = LoadStack("megatron-core-2024");
  ASSERT_TRUE(titan.ok() && mcore.ok());
  Layout sel = *l;
  sel.recompute = Recompute::kSelective;
  Layout titan_op = *l;  // torchtitan runs its own kernels, eager (its default) or compiled
  titan_op.kernels = Kernels::kEager;
  EXPECT_FALSE(StackRefusal(*titan, titan_op).has_value());
  EXPECT_TRUE(StackRefusal(*titan, sel).has_value());
  EXPECT_TRUE(StackRefusal(*mcore, *l).has_value());
  EXPECT_FALSE(StackRefusal(*mcore, sel).has_value());
}

}  // namespace
}  // namespace shardsim
