// Multi-head latent attention and dense-first MoE (issue 16 item 1, DeepSeek-V2/V3) through the
// single layer plan: FLOPs of each projection, the TP split of parameters (down-projections
// replicated), activations (latents whole on every rank), and the Megatron-LM and NeMo exports
// read back. Figures for models/deepseek-v3.yaml, worked by hand in the comments.
#include <gtest/gtest.h>

#include <map>
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

ModelSpec DeepseekV3() {
  StatusOr<ModelSpec> m = LoadModel("deepseek-v3");
  EXPECT_TRUE(m.ok()) << m.status().message();
  return m.ok() ? *m : ModelSpec{};
}

Layout Resolved(const std::string& spec, int64_t gpus) {
  static const HardwareSpec h100 = *LoadHardware("dgx-h100");
  StatusOr<Layout> l = ResolveLayoutFor(*ParseLayout(spec), gpus, h100);
  EXPECT_TRUE(l.ok()) << l.status().message();
  return l.ok() ? *l : Layout{};
}

std::map<std::string, double> Flops(const ModelSpec& m, const Layout& l) {
  std::map<std::string, double> f;
  for (const Op& op : LayerOps(m, l, false)) f[op.name] = op.flops;
  return f;
}

// One dense layer's attention at 4096 tokens (mbs 1), tp 1, forward:
//   down-projections 2 x 4096 x (1536 + 512 + 64) x 7168 = 124,017,180,672
//   q_up 2 x 4096 x (128 x 192) x 1536 = 309,237,645,312
//   kv_up 2 x 4096 x (128 x 128 + 128 x 128) x 512 = 137,438,953,472 (keys' no-RoPE part, values)
//   attention 2 x 4096 x 4096 x (192 + 128) x 128 = 1,374,389,534,720 (full-matrix convention)
//   proj 2 x 4096 x 7168 x (128 x 128) = 962,072,674,304
// At tp 8 the down-projections stay whole (duplicated), q_up is 16 heads: 38,654,705,664.
TEST(Mla, PricesEachProjection) {
  const ModelSpec m = DeepseekV3();
  std::map<std::string, double> f = Flops(m, Resolved("mbs=1,gbs=1", 1));
  EXPECT_EQ(f["qkv_down"], 124017180672.0);
  EXPECT_EQ(f["q_up"], 309237645312.0);
  EXPECT_EQ(f["kv_up"], 137438953472.0);
  EXPECT_EQ(f["attention"], 1374389534720.0);
  EXPECT_EQ(f["proj"], 962072674304.0);
  EXPECT_EQ(f.count("qkv"), 0u);
  f = Flops(m, Resolved("tp=8,mbs=1,gbs=1", 8));
  EXPECT_EQ(f["qkv_down"], 124017180672.0);
  EXPECT_EQ(f["q_up"], 38654705664.0);
}

// Attention parameters on a rank at tp 8: the split part (187,107,328 - 15,140,864) / 8 =
// 21,495,808 plus the replicated down-projections and their norms 15,140,864 = 36,636,672.
TEST(Mla, SplitsTheUpProjectionsNotTheDownOnes) {
  const ModelSpec m = DeepseekV3();
  EXPECT_EQ(AttentionParamsOnRank(m, Resolved("tp=8,mbs=1,gbs=1", 8)), 36636672.0);
  EXPECT_EQ(AttentionParamsOnRank(m, Resolved("mbs=1,gbs=1", 1)), 187107328.0);
}

// The latents are kept whole on every TP rank: 512 more query-latent columns keep
// 4096 tokens x 512 x (2 bytes before the norm + 2 after) = 8,388,608 bytes more at tp 1 and at
// tp 8 with SP alike (the up-projection's output grows too, 0 bytes: its width is heads x
// head_dim, unchanged).
TEST(Mla, KeepsTheLatentsWholeOnEveryRank) {
  const ModelSpec m = DeepseekV3();
  ModelSpec wider = m;
  wider.mla->q_lora_rank += 512;
  for (const char* spec : {"mbs=1,gbs=1,recompute=none", "tp=8,sp=on,mbs=1,gbs=1,recompute=none"}) {
    const Layout l = Resolved(spec, spec[0] == 't' ? 8 : 1);
    EXPECT_EQ(LayerActivationBytes(wider, l, false) - LayerActivationBytes(m, l, false), 8388608.0) << spec;
  }
}

// Dense layers first: 3 dense layers then 58 MoE ones, in the model and the exports.
TEST(Mla, DenseLayersFirst) {
  const ModelSpec m = DeepseekV3();
  EXPECT_EQ(m.MoeLayerCount(), 58);
  // 3 x 583,483,392 + 58 x 11,507,286,016 + 2 x 129280 x 7168 + 7168 (HfFamilies.DeepseekV3),
  // the main model; the MTP depth's 11,610,067,968 beside it (HfFamilies.DeepseekV3).
  EXPECT_EQ(m.mtp_layers, 1);
  EXPECT_EQ(m.TotalParams() - m.MtpParams(), 671026404352);
  EXPECT_EQ(m.MtpParams(), 11610067968);
}

TEST(Mla, GoesThroughTheExportsAndBack) {
  const ModelSpec m = DeepseekV3();
  const Layout l = Resolved("tp=8,ep=8,mbs=1,gbs=64", 64);
  const std::string megatron = planner::EmitMegatron(m, l);
  for (const char* flag : {"--multi-latent-attention", "--q-lora-rank 1536", "--kv-lora-rank 512",
                           "--qk-head-dim 128", "--qk-pos-emb-head-dim 64", "--v-head-dim 128",
                           "--moe-layer-freq '([0]*3+[1]*58)'", "--mtp-num-layers 1"}) {
    EXPECT_NE(megatron.find(flag), std::string::npos) << flag << "\n" << megatron;
  }
  EXPECT_EQ(megatron.find("--kv-channels"), std::string::npos);
  StatusOr<MegatronRead> back = ParseMegatronArgs(megatron, "m.sh");
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_TRUE(back->model.mla.has_value());
  EXPECT_EQ(back->model.mla->q_lora_rank, 1536);
  EXPECT_EQ(back->model.head_dim, 192);
  EXPECT_EQ(back->model.moe->first_dense, 3);
  EXPECT_TRUE(ModelMismatches(m, back->model).empty());
  // The layers come back whole (the vocabulary comes from the tokenizer, not the arguments).
  EXPECT_EQ(back->model.AttentionParams(), m.AttentionParams());
  EXPECT_EQ(back->model.MoeLayerCount(), 58);
  StatusOr<MegatronRead> nemo = ParseNemoOverrides(planner::EmitNemo(m, l), "n.py");
  ASSERT_TRUE(nemo.ok()) << nemo.status().message();
  ASSERT_TRUE(nemo->model.mla.has_value());
  EXPECT_EQ(nemo->model.mla->kv_lora_rank, 512);
  EXPECT_EQ(nemo->model.moe->first_dense, 3);
  EXPECT_EQ(nemo->model.AttentionParams(), m.AttentionParams());
  // Without a query rank (DeepSeek-V2-Lite): no --q-lora-rank (Megatron-LM's default None), and
  // NeMo's None (MLATransformerConfig's default is 512): both read back as 0.
  ModelSpec lite = m;
  lite.mla->q_lora_rank = 0;
  StatusOr<MegatronRead> lite_back = ParseMegatronArgs(planner::EmitMegatron(lite, l), "m.sh");
  ASSERT_TRUE(lite_back.ok()) << lite_back.status().message();
  EXPECT_EQ(lite_back->model.mla->q_lora_rank, 0);
  const std::string lite_nemo = planner::EmitNemo(lite, l);
  EXPECT_NE(lite_nemo.find("model.config.q_lora_rank = None"), std::string::npos) << lite_nemo;
  StatusOr<MegatronRead> lite_nemo_back = ParseNemoOverrides(lite_nemo, "n.py");
  ASSERT_TRUE(lite_nemo_back.ok()) << lite_nemo_back.status().message();
  EXPECT_EQ(lite_nemo_back->model.mla->q_lora_rank, 0);
  EXPECT_EQ(lite_nemo_back->model.AttentionParams(), lite.AttentionParams());
  // A list Megatron-LM takes but shardsim cannot hold is a located error.
  StatusOr<MegatronRead> odd = ParseMegatronArgs(
      "--num-layers 4 --hidden-size 64 --num-attention-heads 4 --seq-length 128 --num-experts 4 "
      "--moe-layer-freq '[1,1,0,1]'", "odd.sh");
  ASSERT_FALSE(odd.ok());
  EXPECT_NE(odd.status().message().find("--moe-layer-freq"), std::string::npos) << odd.status().message();
}

}  // namespace
}  // namespace shardsim
