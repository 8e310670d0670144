// Gemma 2's soft-capped logits (ModelSpec::final_logit_softcap, issue 16 item 1): cap x
// tanh(logits / cap) over the vocabulary shard in fp32 before the loss, priced as a
// memory-bound op on the head's stage with its tanh's output kept for backward; the exports
// say they cannot express it and the CPU runtime refuses it. Values worked by hand.
#include <gtest/gtest.h>

#include <string>

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

}  // namespace
}  // namespace shardsim
