// Gradients accumulated and reduced in bf16 (Layout::grad_bf16: Megatron-LM's
// --grad-reduce-in-bf16, NeMo's grad_reduce_in_fp32 False): model-state bytes, the readers and
// the exports. Every expected value is worked by hand in the comment before it.
#include <gtest/gtest.h>

#include <string>

#include "planner/emit.h"
#include "src/cost/memory.h"
#include "src/hardware/hardware_spec.h"
#include "src/io/megatron_args.h"
#include "src/io/nemo_overrides.h"
#include "src/layout/layout.h"
#include "src/layout/validate.h"
#include "src/model/model_spec.h"
#include "tests/contains.h"
#include "tests/test_models.h"

namespace shardsim {
namespace {

using planner::EmitMegatron;
using planner::EmitNemo;
using testing::Contains;

// Resolved on dgx-h100 (tests/test_models.h).
Layout Resolved(const std::string& spec, int64_t gpus) { return testing::ResolvedOnH100(spec, gpus); }

// 1e9 dense parameters on a rank, dp 8, ZeRO-1. fp32 gradients (bf16's default): weights 2 x 1e9,
// gradients 4 x 1e9, optimizer 12 x 1e9 / 8 = 1.5e9. bf16 gradients: weights 2e9, gradients
// 2e9, optimizer (12 + 4 for the fp32 copy of the gradients, main_grad.float()) x 1e9 / 8 = 2e9.
TEST(GradBf16, HalvesTheGradientsAndAddsTheOptimizersFp32Copy) {
  const StageParams p{1e9, 0};
  const Layout fp32 = Resolved("tp=1,zero=1,mbs=1,gbs=8,dtype=bf16", 8);
  const Layout bf16 = Resolved("tp=1,zero=1,mbs=1,gbs=8,dtype=bf16,grad_bf16=on", 8);
  const MemoryBreakdown a = ModelStateMemory(p, fp32), b = ModelStateMemory(p, bf16);
  EXPECT_DOUBLE_EQ(a.weights, 2e9);
  EXPECT_DOUBLE_EQ(a.gradients, 4e9);
  EXPECT_DOUBLE_EQ(a.optimizer, 1.5e9);
  EXPECT_DOUBLE_EQ(b.weights, 2e9);
  EXPECT_DOUBLE_EQ(b.gradients, 2e9);
  EXPECT_DOUBLE_EQ(b.optimizer, 2e9);
  // The DP reductions carry the buckets at the gradients' width: 2 bytes.
  EXPECT_DOUBLE_EQ(StateBytesPerParam(bf16).gradients, 2.0);
  // Under fp8 the same (its weights are bf16); under fp32 it is refused.
  EXPECT_DOUBLE_EQ(StateBytesPerParam(Resolved("tp=1,mbs=1,gbs=8,dtype=fp8,grad_bf16=on", 8)).gradients, 2.0);
  const ModelSpec m = *LoadModel("tiny");
  const HardwareSpec h100 = *LoadHardware("dgx-h100");
  const LayoutCheck c = CheckLayout(Resolved("tp=1,mbs=1,gbs=8,dtype=fp32,grad_bf16=on", 8), m, h100, 8);
  ASSERT_FALSE(c.errors.empty());
  EXPECT_TRUE(Contains(c.errors[0], "grad_bf16=on")) << c.errors[0];
}

// Megatron-LM's --grad-reduce-in-bf16 and NeMo's grad_reduce_in_fp32 read into the layout, and
// the exports write them back.
TEST(GradBf16, IsReadAndWritten) {
  const std::string shape = "--num-layers 8 --hidden-size 512 --num-attention-heads 8 --seq-length 128 --bf16 ";
  StatusOr<MegatronRead> on = ParseMegatronArgs(shape + "--grad-reduce-in-bf16", "args");
  ASSERT_TRUE(on.ok()) << on.status().message();
  EXPECT_TRUE(on->layout.grad_bf16);
  StatusOr<MegatronRead> off = ParseMegatronArgs(shape + "--accumulate-allreduce-grads-in-fp32", "args");
  ASSERT_TRUE(off.ok()) << off.status().message();
  EXPECT_FALSE(off->layout.grad_bf16);
  const std::string nemo =
      "recipe.model.config.num_layers = 2\nrecipe.model.config.hidden_size = 1024\n"
      "recipe.model.config.num_attention_heads = 8\nrecipe.model.config.seq_length = 2048\n";
  StatusOr<MegatronRead> n = ParseNemoOverrides(nemo + "recipe.trainer.plugins.grad_reduce_in_fp32 = False\n", "o.py");
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_TRUE(n->layout.grad_bf16);
  StatusOr<MegatronRead> d = ParseNemoOverrides(nemo, "o.py");
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_FALSE(d->layout.grad_bf16);  // bf16_mixed()'s grad_reduce_in_fp32 True
  const ModelSpec m = *LoadModel("llama3-8b");
  const Layout l = Resolved("tp=2,mbs=1,gbs=8,dtype=bf16,grad_bf16=on,sp=on,zero=1", 8);
  EXPECT_TRUE(Contains(EmitMegatron(m, l), "--grad-reduce-in-bf16"));
  EXPECT_TRUE(Contains(EmitNemo(m, l), "recipe.trainer.plugins.grad_reduce_in_fp32 = False"));
  EXPECT_FALSE(Contains(EmitMegatron(m, Resolved("tp=2,mbs=1,gbs=8,dtype=bf16", 8)), "--grad-reduce-in-bf16"));
}

}  // namespace
}  // namespace shardsim
