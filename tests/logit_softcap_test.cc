// Gemma 2's soft-capped logits (ModelSpec::final_logit_softcap, issue 16 item 1): cap x
// tanh(logits / cap) over the vocabulary shard in fp32 before the loss, priced as a
// memory-bound op on the head's stage with its tanh's output kept for backward; and its
// soft-capped attention scores (ModelSpec::attn_logit_softcap), priced with unfused attention.
// The exports say they cannot express either and the CPU runtime refuses both. Values worked
// by hand.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "planner/emit.h"
#include "runtime/cpu/param_layout.h"
#include "src/cost/memory.h"
#include "src/cost/ops.h"
#include "src/hardware/hardware_spec.h"
#include "src/layout/layout.h"
#include "src/model/model_spec.h"
#include "tests/test_models.h"

namespace shardsim {
namespace {

const Op* Find(const std::vector<Op>& ops, const std::string& name) {
  for (const Op& op : ops) {
    if (op.name == name) return &op;
  }
  return nullptr;
}

// One micro-batch of 2 sequences of 1024 tokens at tp = 2 over a 51,200-word vocabulary: the
// cap reads and writes T x V / t = 2048 x 25,600 = 52,428,800 fp32 logits, 2 x 4 x that =
// 419,430,400 bytes, one tanh each; its backward 1.5 times the forward's traffic.
TEST(LogitSoftcap, IsAMemoryBoundOpOfTheHead) {
  ModelSpec m = testing::GptModel(2, 1024, 16, 51200, 1024);
  const Layout l = testing::ResolvedOnH100("tp=2,mbs=2,gbs=2", 2);
  EXPECT_EQ(Find(HeadOps(m, l), "logit_softcap"), nullptr);
  m.final_logit_softcap = 30;
  const Op* cap = Find(HeadOps(m, l), "logit_softcap");
  ASSERT_NE(cap, nullptr);
  EXPECT_EQ(cap->bytes, 419430400.0);
  EXPECT_EQ(cap->transcendentals, 52428800.0);
  EXPECT_EQ(cap->backward_factor, 1.5);
  EXPECT_EQ(cap->flops, 0.0);
}

// The head's stage keeps one more fp32 T x V / t tensor for backward: 4 x 2048 x 25,600 =
// 209,715,200 bytes more at the peak (one micro-batch in flight under 1F1B), the rest alike.
TEST(LogitSoftcap, KeepsTheTanhForBackward) {
  ModelSpec m = testing::GptModel(2, 1024, 16, 51200, 1024);
  const Layout l = testing::ResolvedOnH100("tp=2,mbs=2,gbs=2,recompute=none", 2);
  const HardwareSpec hw = *LoadHardware("dgx-h100");
  const double before = StageMemory(m, hw, l, 0).total();
  m.final_logit_softcap = 30;
  EXPECT_EQ(StageMemory(m, hw, l, 0).total() - before, 209715200.0);
}

// A Hugging Face config's cap of 0 (or null, as Gemma 3's) means none, as transformers reads it.
TEST(LogitSoftcap, AZeroCapInAHuggingFaceConfigIsNone) {
  StatusOr<ModelSpec> m = ParseHfConfig(R"({"model_type": "gemma2", "hidden_size": 256, "num_hidden_layers": 2,
      "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "intermediate_size": 512,
      "vocab_size": 1000, "max_position_embeddings": 512, "final_logit_softcapping": 0.0})", "gemma2-zero.json");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->final_logit_softcap, 0.0);
}

TEST(LogitSoftcap, ExportsSayTheyCannotAndTheRuntimeRefuses) {
  ModelSpec m = testing::TinyModel(64);
  m.final_logit_softcap = 30;
  const Layout l = testing::ResolvedOnH100("tp=1,mbs=1,gbs=8", 1);
  EXPECT_NE(planner::EmitMegatron(m, l).find("soft-cap"), std::string::npos);
  EXPECT_NE(planner::EmitNemo(m, l).find("soft-cap"), std::string::npos);
  StatusOr<runtime::ParamLayout> p = runtime::ParamLayout::ForModel(m);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("final_logit_softcap"), std::string::npos);
}

// Attention scores capped as the eager models do it, unfused: per layer and micro-batch of 2
// sequences of 1024 tokens at tp = 2, heads / t x T x s = 8 x 2048 x 1024 = 16,777,216 bf16
// scores; divide, tanh, multiply each read and write them: 3 x 2 x 2 x 16,777,216 =
// 201,326,592 bytes, a tanh each, backward 7 passes against 6. A flash kernel's cap: no op.
TEST(AttentionSoftcap, IsThreeElementwisePassesOverUnfusedScores) {
  ModelSpec m = testing::GptModel(2, 1024, 16, 51200, 1024);
  const Layout unfused = testing::ResolvedOnH100("tp=2,mbs=2,gbs=2,attention=unfused,dtype=bf16", 2);
  EXPECT_EQ(Find(LayerOps(m, unfused, false), "score_softcap"), nullptr);
  m.attn_logit_softcap = 50;
  const Op* cap = Find(LayerOps(m, unfused, false), "score_softcap");
  ASSERT_NE(cap, nullptr);
  EXPECT_EQ(cap->bytes, 201326592.0);
  EXPECT_EQ(cap->transcendentals, 16777216.0);
  EXPECT_DOUBLE_EQ(cap->backward_factor, 7.0 / 6.0);
  const Layout flash = testing::ResolvedOnH100("tp=2,mbs=2,gbs=2,attention=flash,dtype=bf16", 2);
  EXPECT_EQ(Find(LayerOps(m, flash, false), "score_softcap"), nullptr);
}

// The tanh's bf16 output kept for backward: 16,777,216 x 2 = 33,554,432 bytes a layer, 2
// layers, one micro-batch in flight: 67,108,864 more; nothing with selective recompute (the
// core attention is recomputed) or a flash kernel.
TEST(AttentionSoftcap, KeepsTheTanhForBackward) {
  ModelSpec m = testing::GptModel(2, 1024, 16, 51200, 1024);
  const HardwareSpec hw = *LoadHardware("dgx-h100");
  for (const auto& [spec, added] : {std::pair{"tp=2,mbs=2,gbs=2,recompute=none,attention=unfused,dtype=bf16", 67108864.0},
                                    std::pair{"tp=2,mbs=2,gbs=2,recompute=selective,attention=unfused,dtype=bf16", 0.0},
                                    std::pair{"tp=2,mbs=2,gbs=2,recompute=none,attention=flash,dtype=bf16", 0.0}}) {
    const Layout l = testing::ResolvedOnH100(spec, 2);
    m.attn_logit_softcap = 0;
    const double before = StageMemory(m, hw, l, 0).total();
    m.attn_logit_softcap = 50;
    EXPECT_EQ(StageMemory(m, hw, l, 0).total() - before, added) << spec;
  }
}

// Gemma 2's config: read as the cap (50), with a warning for the part not priced; 0 is none.
TEST(AttentionSoftcap, ReadFromAHuggingFaceConfig) {
  const std::string base = R"({"model_type": "gemma2", "hidden_size": 256, "num_hidden_layers": 2,
      "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "intermediate_size": 512,
      "vocab_size": 1000, "max_position_embeddings": 512, "attn_logit_softcapping": )";
  StatusOr<ModelSpec> m = ParseHfConfig(base + "50.0}", "gemma2.json");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->attn_logit_softcap, 50.0);
  bool warned = false;
  for (const std::string& w : m->not_modelled) warned = warned || w.find("fused flash kernel") != std::string::npos;
  EXPECT_TRUE(warned);
  StatusOr<ModelSpec> none = ParseHfConfig(base + "0.0}", "gemma2-zero.json");
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_EQ(none->attn_logit_softcap, 0.0);
  EXPECT_TRUE(none->not_modelled.empty());
}

TEST(AttentionSoftcap, ExportsSayTheyCannotAndTheRuntimeRefuses) {
  ModelSpec m = testing::TinyModel(64);
  m.attn_logit_softcap = 50;
  const Layout l = testing::ResolvedOnH100("tp=1,mbs=1,gbs=8", 1);
  EXPECT_NE(planner::EmitMegatron(m, l).find("attention scores' soft-cap"), std::string::npos);
  EXPECT_NE(planner::EmitNemo(m, l).find("attention scores' soft-cap"), std::string::npos);
  StatusOr<runtime::ParamLayout> p = runtime::ParamLayout::ForModel(m);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("attn_logit_softcap"), std::string::npos);
}

}  // namespace
}  // namespace shardsim
