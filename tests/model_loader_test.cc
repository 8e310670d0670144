// Tests of the model loaders (src/model/model_yaml.cc, hf_config.cc) and of the parameter
// counts in src/model/model_spec.cc, against counts derived by hand from each config.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "src/model/model_spec.h"
#include "tests/contains.h"

namespace shardsim {
namespace {

namespace fs = std::filesystem;
using testing::Contains;

const std::string kSource = SHARDSIM_SOURCE_DIR;

ModelSpec MustLoad(const std::string& path_or_name) {
  StatusOr<ModelSpec> m = LoadModel(path_or_name);
  EXPECT_TRUE(m.ok()) << m.status().message();
  return m.ok() ? *m : ModelSpec{};
}

TEST(ModelLoader, EveryBundledModelLoads) {
  int loaded = 0;
  for (const auto& entry : fs::directory_iterator(kSource + "/models")) {
    if (entry.path().extension() != ".yaml") continue;
    SCOPED_TRACE(entry.path().string());
    StatusOr<ModelSpec> m = LoadModel(entry.path().string());
    ASSERT_TRUE(m.ok()) << m.status().message();
    // docs/models.md: `name` equals the file name without .yaml.
    EXPECT_EQ(m->name, entry.path().stem().string());
    EXPECT_FALSE(m->source.empty());
    EXPECT_GT(m->TotalParams(), 0);
    EXPECT_LE(m->ActiveParams(), m->TotalParams());
    // A bare name finds the same file.
    StatusOr<ModelSpec> by_name = LoadModel(entry.path().stem().string());
    ASSERT_TRUE(by_name.ok()) << by_name.status().message();
    EXPECT_EQ(by_name->TotalParams(), m->TotalParams());
    ++loaded;
  }
  // 17 files ship today (10 Megatron GPT sizes, gpt3-175b, 3 Llama 3, Mixtral, tiny, tiny-moe).
  EXPECT_GE(loaded, 17);
}

TEST(ModelLoader, UnknownBundledNameSuggestsTheClosest) {
  StatusOr<ModelSpec> m = LoadModel("llama3-8");
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(Contains(m.status().message(), "did you mean 'llama3-8b'"));
  EXPECT_TRUE(Contains(m.status().message(), "bundled: "));
}

// Megatron's eq. 2 (Narayanan et al. 2021): P = 12*l*h^2*(1 + 13/(12h) + (V+s)/(12*l*h))
//                                             = 12*l*h^2 + 13*l*h + (V+s)*h.
// model_spec.cc counts, per layer with biases, LayerNorm and a 4h GELU MLP:
//   attention QKV h*3h + 3h, output h*h + h          = 4h^2 + 4h
//   MLP up h*4h + 4h, down 4h*h + h                  = 8h^2 + 5h
//   two LayerNorms 2 * 2h                            = 4h
//   layer                                            = 12h^2 + 13h
// plus the token and position tables (V + s)*h (tied: the LM head adds nothing) and the final
// LayerNorm 2h. So TotalParams = eq. 2 + 2h.
int64_t MegatronEq2(int64_t l, int64_t h, int64_t v, int64_t s) {
  return 12 * l * h * h + 13 * l * h + (v + s) * h;
}

TEST(ModelParams, Gpt3IsMegatronEq2PlusFinalLayerNorm) {
  const ModelSpec m = MustLoad("gpt3-175b");
  ASSERT_TRUE(m.tied_embeddings);
  // l = 96, h = 12288, V = 50257, s = 2048:
  //   12*96*12288^2 = 173,946,175,488; 13*96*12288 = 15,335,424;
  //   (50257 + 2048)*12288 = 642,723,840; sum = 174,604,234,752 (the file's "174.6B");
  //   + final LayerNorm 2*12288 = 24,576 -> 174,604,259,328.
  EXPECT_EQ(MegatronEq2(96, 12288, 50257, 2048), 174604234752);
  EXPECT_EQ(m.TotalParams(), 174604234752 + 2 * 12288);
  EXPECT_EQ(m.TotalParams(), 174604259328);
  EXPECT_EQ(m.DenseLayerParams(), 12 * 12288LL * 12288 + 13 * 12288);
  EXPECT_EQ(m.ActiveParams(), m.TotalParams());  // dense: every parameter is active
}

TEST(ModelParams, MegatronScalingFilesFollowEq2) {
  // Table 1 of Narayanan et al. 2021 (V = 51,200, s = 2048, tied embeddings).
  struct Row {
    const char* name;
    int64_t l, h;
    double published;  // billions, Table 1
  };
  const Row rows[] = {{"gpt-1.7b", 24, 2304, 1.7},     {"gpt-3.6b", 30, 3072, 3.6},
                      {"gpt-7.5b", 36, 4096, 7.5},     {"gpt-18b", 40, 6144, 18.4},
                      {"gpt-39b", 48, 8192, 39.1},     {"gpt-76b", 60, 10240, 76.1},
                      {"gpt-145b", 80, 12288, 145.6},  {"gpt-310b", 96, 16384, 310.1},
                      {"gpt-530b", 105, 20480, 529.6}, {"gpt-1t", 128, 25600, 1008.0}};
  for (const Row& r : rows) {
    SCOPED_TRACE(r.name);
    const ModelSpec m = MustLoad(r.name);
    EXPECT_EQ(m.layers, r.l);
    EXPECT_EQ(m.hidden, r.h);
    EXPECT_EQ(m.TotalParams(), MegatronEq2(r.l, r.h, 51200, 2048) + 2 * r.h);
    // Table 1 gives billions to one decimal, so the count must round to it: within 0.05B
    // (the tightest rows: 1.652B -> "1.7", 18.450B -> "18.4").
    EXPECT_NEAR(m.TotalParams() / 1e9, r.published, 0.05);
  }
}

TEST(ModelParams, Llama3With8bExact) {
  const ModelSpec m = MustLoad("llama3-8b");
  // h = 4096, 32 heads of 128, 8 KV heads (kv_dim 1024), ffn 14336, V = 128256, untied.
  //   attention: 4096*(4096 + 2*1024) + 4096*4096 = 25,165,824 + 16,777,216 = 41,943,040
  //   MLP (SwiGLU, gate+up+down): 3*4096*14336                            = 176,160,768
  //   two RMSNorms: 2*4096                                                = 8,192
  //   layer = 218,112,000; 32 layers                                      = 6,979,584,000
  //   embedding + untied LM head: 2*128256*4096                           = 1,050,673,152
  //   final RMSNorm                                                       = 4,096
  //   total                                                               = 8,030,261,248
  // (Hugging Face reports 8,030,261,248 for Meta-Llama-3-8B.)
  EXPECT_EQ(m.AttentionParams(), 41943040);
  EXPECT_EQ(m.MlpParams(m.ffn_hidden), 176160768);
  EXPECT_EQ(m.DenseLayerParams(), 218112000);
  EXPECT_EQ(m.EmbeddingParams(), 128256LL * 4096);
  EXPECT_EQ(m.HeadParams(), 128256LL * 4096 + 4096);
  EXPECT_EQ(m.TotalParams(), 8030261248);
}

TEST(ModelParams, MixtralTotalAndActiveExact) {
  const ModelSpec m = MustLoad("mixtral-8x7b");
  ASSERT_TRUE(m.moe.has_value());
  // Attention as Llama 3 8B (h 4096, 8 KV heads of 128)               = 41,943,040
  // one SwiGLU expert 3*4096*14336                                     = 176,160,768
  // 8 experts                                                          = 1,409,286,144
  // router 4096*8                                                      = 32,768
  // two RMSNorms                                                       = 8,192
  // MoE layer = 1,451,270,144; 32 layers (interval 1: all MoE)         = 46,440,644,608
  // embedding + untied head 2*32000*4096                               = 262,144,000
  // final RMSNorm                                                      = 4,096
  // total                                                              = 46,702,792,704 (~46.7e9)
  // Active: each token uses 2 of 8 experts, so 6 experts per layer idle:
  //   46,702,792,704 - 32*6*176,160,768 = 46,702,792,704 - 33,822,867,456
  //                                     = 12,879,925,248 (~12.9e9)
  EXPECT_EQ(m.MoeLayerCount(), 32);
  EXPECT_EQ(m.MoeLayerParams(), 1451270144);
  EXPECT_EQ(m.TotalParams(), 46702792704);
  EXPECT_EQ(m.ActiveParams(), 12879925248);
}

TEST(ModelParams, MoeIntervalMakesEveryOtherLayerMoe) {
  // tiny-moe with interval 2: layers 0 and 2 of 4 are MoE, 1 and 3 dense.
  StatusOr<ModelSpec> m = ParseModelYaml(R"(name: t
source: test
layers: 4
hidden: 64
heads: 4
kv_heads: 2
ffn_hidden: 256
vocab: 512
seq_len: 64
activation: swiglu
norm: rmsnorm
moe: {experts: 4, top_k: 2, ffn_hidden: 128, interval: 2}
)",
                                         "inline");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->MoeLayerCount(), 2);
  EXPECT_TRUE(m->IsMoeLayer(0));
  EXPECT_FALSE(m->IsMoeLayer(1));
  // attention: 64*(64 + 2*32) + 64*64 = 8192 + 4096 = 12,288; norms 2*64 = 128
  // dense layer: 12,288 + 3*64*256 (49,152) + 128           = 61,568
  // MoE layer:   12,288 + 4*3*64*128 (98,304) + 64*4 + 128  = 110,976
  // embedding + head 2*512*64 = 65,536; final norm 64
  // total = 2*61,568 + 2*110,976 + 65,536 + 64 = 410,688
  EXPECT_EQ(m->DenseLayerParams(), 61568);
  EXPECT_EQ(m->MoeLayerParams(), 110976);
  EXPECT_EQ(m->TotalParams(), 410688);
  // active: 2 MoE layers x (4 - 2) idle experts x 24,576 = 98,304 fewer
  EXPECT_EQ(m->ActiveParams(), 410688 - 98304);
}

// --- Hugging Face config.json ---------------------------------------------------------------

std::string Hf(const std::string& file) { return kSource + "/tests/data/hf/" + file; }

TEST(HfConfig, Llama3With8bMatchesTheBundledYaml) {
  const ModelSpec hf = MustLoad(Hf("llama3-8b.json"));
  const ModelSpec yaml = MustLoad("llama3-8b");
  EXPECT_EQ(hf.layers, 32);
  EXPECT_EQ(hf.layers, yaml.layers);
  EXPECT_EQ(hf.hidden, yaml.hidden);
  EXPECT_EQ(hf.heads, yaml.heads);
  EXPECT_EQ(hf.kv_heads, 8);
  EXPECT_EQ(hf.kv_heads, yaml.kv_heads);
  EXPECT_EQ(hf.head_dim, yaml.head_dim);
  EXPECT_EQ(hf.ffn_hidden, yaml.ffn_hidden);
  EXPECT_EQ(hf.vocab, yaml.vocab);
  EXPECT_EQ(hf.seq_len, yaml.seq_len);  // max_position_embeddings 8192
  EXPECT_EQ(hf.activation, Activation::kSwiglu);
  EXPECT_EQ(hf.norm, Norm::kRmsNorm);
  EXPECT_EQ(hf.position, Position::kRope);
  EXPECT_FALSE(hf.tied_embeddings);
  EXPECT_FALSE(hf.bias);
  EXPECT_FALSE(hf.qkv_bias);
  EXPECT_EQ(hf.rotary_base, 500000.0);  // rope_theta 500000.0; the YAML cites Table 3's theta
  EXPECT_EQ(hf.rotary_base, yaml.rotary_base);
  EXPECT_FALSE(hf.moe.has_value());
  EXPECT_EQ(hf.TotalParams(), yaml.TotalParams());  // 8,030,261,248 (see Llama3With8bExact)
}

TEST(HfConfig, Gpt2) {
  const ModelSpec m = MustLoad(Hf("gpt2.json"));
  EXPECT_EQ(m.layers, 12);
  EXPECT_EQ(m.hidden, 768);
  EXPECT_EQ(m.heads, 12);
  EXPECT_EQ(m.kv_heads, 12);
  EXPECT_EQ(m.head_dim, 64);
  EXPECT_EQ(m.ffn_hidden, 3072);  // no n_inner key: 4 * n_embd
  EXPECT_EQ(m.vocab, 50257);
  EXPECT_EQ(m.seq_len, 1024);  // n_positions
  EXPECT_EQ(m.position, Position::kLearned);
  EXPECT_EQ(m.norm, Norm::kLayerNorm);
  EXPECT_EQ(m.activation, Activation::kGelu);
  EXPECT_TRUE(m.tied_embeddings);  // no tie_word_embeddings key: GPT-2 ties by default
  EXPECT_TRUE(m.bias);
  // Eq. 2 with l 12, h 768, V 50257, s 1024: 12*12*768^2 + 13*12*768 + 51281*768
  //   = 84,934,656 + 119,808 + 39,383,808 = 124,438,272; + final LayerNorm 1,536
  //   = 124,439,808, the count Hugging Face reports for GPT2LMHeadModel.
  EXPECT_EQ(m.TotalParams(), 124439808);
}

TEST(HfConfig, Gpt2NInnerNullOrGiven) {
  // n_inner: null means 4 * n_embd; an integer replaces it.
  const std::string base = R"({"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4,
    "n_positions": 128, "vocab_size": 1000, "n_inner": )";
  StatusOr<ModelSpec> null_inner = ParseHfConfig(base + "null}", "null.json");
  ASSERT_TRUE(null_inner.ok()) << null_inner.status().message();
  EXPECT_EQ(null_inner->ffn_hidden, 256);
  StatusOr<ModelSpec> given = ParseHfConfig(base + "100}", "given.json");
  ASSERT_TRUE(given.ok()) << given.status().message();
  EXPECT_EQ(given->ffn_hidden, 100);
}

TEST(HfConfig, MixtralHasEightExpertsTopTwo) {
  const ModelSpec hf = MustLoad(Hf("mixtral-8x7b.json"));
  ASSERT_TRUE(hf.moe.has_value());
  EXPECT_EQ(hf.moe->experts, 8);
  EXPECT_EQ(hf.moe->top_k, 2);
  EXPECT_EQ(hf.moe->ffn_hidden, 14336);
  EXPECT_EQ(hf.moe->interval, 1);
  // Same shape as models/mixtral-8x7b.yaml, so the same counts (see MixtralTotalAndActiveExact).
  EXPECT_EQ(hf.TotalParams(), 46702792704);
  EXPECT_EQ(hf.ActiveParams(), 12879925248);
}

TEST(HfConfig, PythiaIsGeluLayerNormRope) {
  const ModelSpec m = MustLoad(Hf("pythia-1.4b.json"));
  EXPECT_EQ(m.activation, Activation::kGelu);
  EXPECT_EQ(m.norm, Norm::kLayerNorm);
  EXPECT_EQ(m.position, Position::kRope);
  EXPECT_TRUE(m.bias);
  EXPECT_FALSE(m.tied_embeddings);
  // l 24, h 2048, ffn 8192 = 4h, biases, LayerNorm: 12h^2 + 13h per layer = 50,358,272;
  // 24 layers = 1,208,598,528; untied embed_in + embed_out 2*50304*2048 = 206,045,184;
  // final LayerNorm 4,096; total 1,414,647,808 (Pythia's published 1,414,647,808).
  EXPECT_EQ(m.TotalParams(), 1414647808);
}

TEST(HfConfig, Qwen2IsSwiglu) {
  const ModelSpec m = MustLoad(Hf("qwen2-7b.json"));
  EXPECT_EQ(m.activation, Activation::kSwiglu);
  EXPECT_EQ(m.norm, Norm::kRmsNorm);
  EXPECT_EQ(m.layers, 28);
  EXPECT_EQ(m.hidden, 3584);
  EXPECT_EQ(m.heads, 28);
  EXPECT_EQ(m.kv_heads, 4);
  EXPECT_EQ(m.head_dim, 128);  // 3584 / 28
  EXPECT_EQ(m.ffn_hidden, 18944);
  EXPECT_EQ(m.vocab, 152064);
  EXPECT_FALSE(m.bias);
  EXPECT_TRUE(m.qkv_bias);
  EXPECT_EQ(m.rotary_base, 1000000.0);  // the file's rope_theta
  // Per layer: Q and O 2 x 3584^2 = 25,690,112; K and V 2 x 3584 x 512 = 3,670,016; Q/K/V
  // biases 3584 + 2 x 512 = 4,608; SwiGLU 3 x 3584 x 18944 = 203,685,888; two RMSNorms 7,168:
  // 233,057,792, x 28 = 6,525,618,176. Untied embedding and head 2 x 152064 x 3584 =
  // 1,089,994,752, final norm 3,584: 7,615,616,512, Qwen2-7B's published count.
  EXPECT_EQ(m.TotalParams(), 7615616512);
}

TEST(HfConfig, Mistral7b) {
  const ModelSpec m = MustLoad(Hf("mistral-7b.json"));
  // As Llama 3 8B's layers (218,112,000 each, 32 of them = 6,979,584,000) with V = 32000:
  // 2*32000*4096 = 262,144,000, final norm 4,096 -> 7,241,732,096 (HF's published count).
  EXPECT_EQ(m.TotalParams(), 7241732096);
}

TEST(HfConfig, UnknownModelTypeListsSupportedOnes) {
  StatusOr<ModelSpec> m = LoadModel(Hf("bad-unknown-type.json"));
  ASSERT_FALSE(m.ok());
  const std::string& e = m.status().message();
  EXPECT_TRUE(Contains(e, "unsupported model_type"));
  EXPECT_TRUE(Contains(e, "falcon_mamba_xyz"));
  EXPECT_TRUE(Contains(e, "supported: llama, mistral, mixtral, qwen2, qwen2_moe, qwen3, qwen3_moe, phi3, gemma2, gemma3_text, olmo, "
                          "olmo2, falcon, deepseek_v2, deepseek_v3, llama4, llama4_text, gpt_neox, gpt2"));
  EXPECT_EQ(e.rfind(Hf("bad-unknown-type.json"), 0), 0u) << e;  // starts with the path
}

TEST(HfConfig, MissingModelType) {
  StatusOr<ModelSpec> m = ParseHfConfig(R"({"hidden_size": 64})", "x.json");
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(Contains(m.status().message(), "model_type"));
}

TEST(HfConfig, UnsupportedActivation) {
  StatusOr<ModelSpec> m = ParseHfConfig(R"({"model_type": "llama", "hidden_size": 64,
    "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128,
    "max_position_embeddings": 64, "vocab_size": 100, "hidden_act": "relu"})",
                                        "relu.json");
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(Contains(m.status().message(), "'relu' is not supported for llama"));
}

}  // namespace
}  // namespace shardsim
