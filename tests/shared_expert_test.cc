// Shared experts (MoeSpec::shared_ffn_hidden, issue 16 item 1): a dense MLP beside the routed
// experts in every MoE layer, priced in parameters, memory, FLOPs and the exports. Figures for
// Qwen1.5-MoE-A2.7B's shape (HfImport.Qwen2MoeCountsItsSharedExpert derives its counts), worked
// by hand in the comments.
#include <gtest/gtest.h>

#include <string>

#include "planner/emit.h"
#include "src/cost/memory.h"
#include "src/cost/ops.h"
#include "src/hardware/hardware_spec.h"
#include "src/io/megatron_args.h"
#include "src/io/nemo_overrides.h"
#include "src/layout/layout.h"
#include "src/model/model_spec.h"

namespace shardsim {
namespace {

ModelSpec Qwen15Moe() {
  StatusOr<ModelSpec> m = ParseHfConfig(R"({"model_type": "qwen2_moe", "hidden_size": 2048, "num_hidden_layers": 24,
      "num_attention_heads": 16, "num_key_value_heads": 16, "intermediate_size": 5632, "moe_intermediate_size": 1408,
      "num_experts": 60, "num_experts_per_tok": 4, "shared_expert_intermediate_size": 5632, "vocab_size": 151936,
      "max_position_embeddings": 8192, "tie_word_embeddings": false})", "qwen1.5-moe.json");
  EXPECT_TRUE(m.ok()) << m.status().message();
  return m.ok() ? *m : ModelSpec{};
}

Layout Resolved(const std::string& spec, int64_t gpus) {
  static const HardwareSpec h100 = *LoadHardware("dgx-h100");
  StatusOr<Layout> l = ResolveLayoutFor(*ParseLayout(spec), gpus, h100);
  EXPECT_TRUE(l.ok());
  return *l;
}

// The shared expert's parameters are dense: replicated over EP, sharded by ZeRO over DP x CP.
// Experts on a rank at ep 4: 24 layers x 15 experts x 3 x 2048 x 1408 = 3,114,270,720; dense:
// the total 14,315,784,192 less the 24 x 519,045,120 = 12,457,082,880 of all experts =
// 1,858,701,312, the shared experts' 24 x 34,605,056 = 830,521,344 among them.
TEST(SharedExperts, AreDenseParameters) {
  const ModelSpec m = Qwen15Moe();
  const StageParams p = ParamsOnStage(m, Resolved("ep=4,mbs=1,gbs=4", 4), 0);
  EXPECT_EQ(p.expert, 3114270720.0);
  EXPECT_EQ(p.dense, 1858701312.0);
  EXPECT_EQ(SharedExpertParamsOnRank(m, Resolved("tp=2,mbs=1,gbs=1", 2)), 3.0 * 2048 * 5632 / 2 + 2048);
}

// Forward FLOPs of one MoE layer's shared expert at 8192 tokens (mbs 1, tp 1): gate and up
// 2 x 8192 x (2 x 5632) x 2048 = 377,957,122,048, down 2 x 8192 x 2048 x 5632 = 188,978,561,024,
// the gate 2 x 8192 x 1 x 2048 = 33,554,432; a dense layer has none of them.
TEST(SharedExperts, AreOpsOfTheMoeLayer) {
  const ModelSpec m = Qwen15Moe();
  const Layout l = Resolved("mbs=1,gbs=1", 1);
  double gate_up = 0, down = 0, gate = 0;
  for (const Op& op : LayerOps(m, l, true)) {
    if (op.name == "shared_gate_up") gate_up = op.flops;
    if (op.name == "shared_down") down = op.flops;
    if (op.name == "shared_gate") gate = op.flops;
  }
  EXPECT_EQ(gate_up, 377957122048.0);
  EXPECT_EQ(down, 188978561024.0);
  EXPECT_EQ(gate, 33554432.0);
  for (const Op& op : LayerOps(m, l, false)) EXPECT_EQ(op.name.rfind("shared_", 0), std::string::npos) << op.name;
}

// Activations: the shared MLP keeps its gate and up outputs (2 x 2 bytes) and the SwiGLU output
// fc2 reads (2 bytes) for its 5632 columns, at 8192 tokens: 8192 x 5632 x 6 = 276,824,064 bytes
// more than the same layer without it.
TEST(SharedExperts, KeepTheirActivations) {
  ModelSpec m = Qwen15Moe();
  const Layout l = Resolved("mbs=1,gbs=1", 1);
  const double with = LayerActivationBytes(m, l, true);
  m.moe->shared_ffn_hidden = 0;
  m.moe->shared_gate = false;
  EXPECT_EQ(with - LayerActivationBytes(m, l, true), 276824064.0);
}

// The Megatron-LM export writes the size and reads it back (the gate it cannot express is a
// comment); NeMo writes both.
TEST(SharedExperts, GoThroughTheExports) {
  const ModelSpec m = Qwen15Moe();
  const Layout l = Resolved("ep=4,mbs=1,gbs=4", 4);
  const std::string megatron = planner::EmitMegatron(m, l);
  EXPECT_NE(megatron.find("--moe-shared-expert-intermediate-size 5632"), std::string::npos);
  EXPECT_NE(megatron.find("# not expressible in Megatron-LM: the shared expert's sigmoid gate"), std::string::npos);
  StatusOr<MegatronRead> back = ParseMegatronArgs(megatron, "m.sh");
  ModelSpec changed;
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_TRUE(back->model.moe.has_value());
  EXPECT_EQ(back->model.moe->shared_ffn_hidden, 5632);
  StatusOr<MegatronRead> nemo = ParseNemoOverrides(planner::EmitNemo(m, l), "n.py");
  ASSERT_TRUE(nemo.ok()) << nemo.status().message();
  EXPECT_EQ(nemo->model.moe->shared_ffn_hidden, 5632);
  EXPECT_TRUE(nemo->model.moe->shared_gate);
  EXPECT_TRUE(ModelMismatches(m, back->model).empty());
  changed = back->model;
  changed.moe->shared_ffn_hidden = 4096;
  ASSERT_EQ(ModelMismatches(m, changed).size(), 1u);
  EXPECT_EQ(ModelMismatches(m, changed)[0], "--moe-shared-expert-intermediate-size 4096, the model has 5632");
}

}  // namespace
}  // namespace shardsim
