// The Hugging Face families of issue 16 beyond Llama and Qwen: Gemma 2/3, Phi-3, Falcon, OLMo,
// OLMo 2, DeepSeek-V2/V3. Configs shipped under tests/data/hf are real; the Falcon, OLMo and
// DeepSeek ones below are built from each model's published sizes (no verbatim copy could be
// found, tests/data/hf/README.md), so the counts test the reader's architecture, derived by
// hand in the comments from the modelling code cited in src/model/hf_config.cc.
#include <gtest/gtest.h>

#include <string>

#include "src/io/moe_layer_freq.h"
#include "src/model/model_spec.h"

namespace shardsim {
namespace {

ModelSpec Parse(const std::string& json) {
  StatusOr<ModelSpec> m = ParseHfConfig(json, "x.json");
  EXPECT_TRUE(m.ok()) << m.status().message();
  return m.ok() ? *m : ModelSpec{};
}

ModelSpec Load(const std::string& file) {
  StatusOr<ModelSpec> m = LoadModel("tests/data/hf/" + file);
  EXPECT_TRUE(m.ok()) << m.status().message();
  return m.ok() ? *m : ModelSpec{};
}

bool Warns(const ModelSpec& m, const std::string& what) {
  for (const std::string& w : m.not_modelled) {
    if (w.find(what) != std::string::npos) return true;
  }
  return false;
}

TEST(HfFamilies, Gemma2) {
  ModelSpec m = Load("gemma-2-9b.json");
  // 42 layers, h 3584, 16 heads of 256 (head_dim != h / heads), 8 KV heads, GELU-gated MLP of
  // 14336, 4 RMSNorms a layer, tied vocabulary of 256000:
  //   attention 3584 x (4096 + 2 x 2048) + 4096 x 3584 = 44,040,192; MLP 3 x 3584 x 14336 =
  //   154,140,672; norms 4 x 3584 = 14,336; a layer 198,195,200, x 42 = 8,324,198,400;
  //   embedding 256000 x 3584 = 917,504,000; final norm 3584: 9,241,705,984.
  EXPECT_EQ(m.head_dim, 256);
  EXPECT_EQ(m.norms_per_layer, 4);
  EXPECT_TRUE(m.tied_embeddings);
  EXPECT_EQ(m.activation, Activation::kSwiglu);  // a gated MLP, priced alike (GELU gate)
  EXPECT_EQ(m.TotalParams(), 9241705984);
  // Every other layer attends a 4096-token window (Gemma2DecoderLayer is_sliding = not layer_idx % 2).
  EXPECT_EQ(m.sliding_window, 4096);
  EXPECT_EQ(m.full_attention_layers, 21);
  // At 8192 tokens a windowed layer meets, per query, w(w+1)/2 + (s-w)w of s(s+1)/2 causal
  // pairs, scaled to s: 8192 x (8,390,656 + 16,777,216) / 33,558,528 = 6143.75003 keys; the
  // mean with the 21 full layers' 8192: (6143.75003 + 8192) / 2 = 7167.87502.
  m.seq_len = 8192;
  EXPECT_NEAR(m.AttentionSpan(), 7167.87502, 1e-4);
  EXPECT_TRUE(Warns(m, "attn_logit_softcapping 50"));
  // The logits' cap is read and priced (LogitSoftcap.*), no longer a warning.
  EXPECT_EQ(m.final_logit_softcap, 30.0);
  EXPECT_FALSE(Warns(m, "final_logit_softcapping"));
}

TEST(HfFamilies, Gemma3HasPerHeadQkNormsAndOneGlobalLayerInSix) {
  ModelSpec m = Load("gemma-3-1b.json");
  // 26 layers, h 1152, 4 heads of 256, 1 KV head, MLP 6912, vocab 262144, tied, 4 norms and
  // per-head Q/K norms (2 x 256) a layer:
  //   attention 1152 x (1024 + 512) + 1024 x 1152 + 512 = 2,949,632; MLP 3 x 1152 x 6912 =
  //   23,887,872; norms 4,608: a layer 26,842,112, x 26 = 697,894,912; embedding
  //   262144 x 1152 = 301,989,888; final norm 1152: 999,885,952.
  EXPECT_TRUE(m.qk_norm);
  EXPECT_FALSE(m.qk_norm_full);
  EXPECT_EQ(m.TotalParams(), 999885952);
  // sliding_window_pattern 6: layers 5, 11, 17, 23 attend fully.
  EXPECT_EQ(m.sliding_window, 512);
  EXPECT_EQ(m.full_attention_layers, 4);
}

TEST(HfFamilies, Phi3TakesItsTopLevelOriginalContext) {
  ModelSpec m = Load("phi-3.5-mini.json");
  // 32 layers, h 3072, 32 heads, MLP 8192, vocab 32064, untied: a layer 4 x 3072^2 +
  // 3 x 3072 x 8192 + 2 x 3072 = 113,252,352, x 32 = 3,624,075,264; embedding and head
  // 2 x 32064 x 3072 = 197,001,216; final norm 3072: 3,821,079,552.
  EXPECT_EQ(m.TotalParams(), 3821079552);
  // original_max_position_embeddings 4096 of 131072, stated at the top level.
  EXPECT_EQ(m.seq_len, 4096);
  EXPECT_NE(m.seq_len_default.find("original_max_position_embeddings, the context before"), std::string::npos);
}

TEST(HfFamilies, Falcon) {
  // tiiuae/falcon-7b's sizes: 32 layers, h 4544, 71 heads of 64, multi-query, parallel
  // attention (one LayerNorm a layer), GELU MLP of 4h, no linear biases, vocab 65024, tied.
  ModelSpec m = Parse(R"({"model_type": "falcon", "hidden_size": 4544, "num_hidden_layers": 32,
      "num_attention_heads": 71, "multi_query": true, "parallel_attn": true, "new_decoder_architecture": false,
      "bias": false, "alibi": false, "vocab_size": 65024})");
  EXPECT_EQ(m.kv_heads, 1);
  EXPECT_EQ(m.norms_per_layer, 1);
  EXPECT_EQ(m.seq_len, 2048);  // FalconConfig's max_position_embeddings default
  // QKV 4544 x (4544 + 2 x 64) = 21,229,568; dense 4544^2 = 20,647,936; MLP 2 x 4544 x 18176
  // = 165,183,488; one LayerNorm 9,088: a layer 207,070,080, x 32 = 6,626,242,560; embedding
  // 65024 x 4544 = 295,469,056; final LayerNorm 9,088: 6,921,720,704 (transformers' count
  // of falcon-7b).
  EXPECT_EQ(m.TotalParams(), 6921720704);
  EXPECT_TRUE(Warns(m, "parallel_attn"));
  // falcon-40b's: new_decoder_architecture, 8 KV heads, two LayerNorms (ln_attn, ln_mlp), h 8192,
  // 60 layers, 128 heads: QKV 8192 x (8192 + 2 x 512) = 75,497,472; dense 67,108,864; MLP
  // 2 x 8192 x 32768 = 536,870,912; norms 4 x 8192 = 32,768: a layer 679,510,016, x 60 =
  // 40,770,600,960; embedding 65024 x 8192 = 532,676,608; final 16,384: 41,303,293,952.
  m = Parse(R"({"model_type": "falcon", "hidden_size": 8192, "num_hidden_layers": 60, "num_attention_heads": 128,
      "num_kv_heads": 8, "new_decoder_architecture": true, "parallel_attn": true, "bias": false, "vocab_size": 65024})");
  EXPECT_EQ(m.kv_heads, 8);
  EXPECT_EQ(m.norms_per_layer, 2);
  EXPECT_EQ(m.TotalParams(), 41303293952);
}

TEST(HfFamilies, OlmoNormsHaveNoWeights) {
  // allenai/OLMo-7B-hf's sizes: 32 layers, h 4096, 32 heads, SwiGLU 11008, vocab 50304, untied,
  // clip_qkv 8 (not priced), non-parametric LayerNorm.
  ModelSpec m = Parse(R"({"model_type": "olmo", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
      "intermediate_size": 11008, "max_position_embeddings": 2048, "vocab_size": 50304, "clip_qkv": 8.0,
      "tie_word_embeddings": false})");
  EXPECT_FALSE(m.norm_weights);
  // A layer 4 x 4096^2 + 3 x 4096 x 11008 = 202,375,168, x 32 = 6,476,005,376; embedding and
  // head 2 x 50304 x 4096 = 412,090,368: 6,888,095,744 (the OLMo paper's 6.88B... within its digits).
  EXPECT_EQ(m.TotalParams(), 6888095744);
  EXPECT_TRUE(Warns(m, "clip_qkv 8"));
}

TEST(HfFamilies, Olmo2NormalisesAllQueriesAndKeys) {
  // allenai/OLMo-2-1124-7B's sizes: 32 layers, h 4096, 32 heads, SwiGLU 11008, vocab 100352.
  ModelSpec m = Parse(R"({"model_type": "olmo2", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
      "num_key_value_heads": 32, "intermediate_size": 11008, "max_position_embeddings": 4096, "vocab_size": 100352})");
  EXPECT_TRUE(m.qk_norm && m.qk_norm_full);
  // A layer 4 x 4096^2 + 3 x 4096 x 11008 + two norms 2 x 4096 + q_norm 4096 + k_norm 4096 =
  // 202,391,552, x 32 = 6,476,529,664; embedding and head 2 x 100352 x 4096 = 822,083,584;
  // final norm 4096: 7,298,617,344 (the card's 7.30B ... 7.3B).
  EXPECT_EQ(m.TotalParams(), 7298617344);
  // Full-width Q/K norms split with the heads: none replicated.
  EXPECT_EQ(m.AttentionReplicatedParams(), 0);
}

// DeepSeek-V3's published sizes (DeepSeek-V3 technical report, arXiv 2412.19437, Sec. 4.2):
// 61 layers, h 7168, 128 heads, KV compression 512, query compression 1536, per-head 128 + 64
// RoPE, the first 3 layers dense (MLP 18432), then 1 shared and 256 routed experts of 2048,
// 8 routed a token; vocabulary 129280, untied; one MTP module.
constexpr const char* kDeepseekV3 = R"({"model_type": "deepseek_v3", "hidden_size": 7168, "num_hidden_layers": 61,
    "num_attention_heads": 128, "num_key_value_heads": 128, "q_lora_rank": 1536, "kv_lora_rank": 512,
    "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "intermediate_size": 18432,
    "moe_intermediate_size": 2048, "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8,
    "first_k_dense_replace": 3, "moe_layer_freq": 1, "topk_method": "noaux_tc", "n_group": 8, "topk_group": 4,
    "num_nextn_predict_layers": 1, "vocab_size": 129280, "max_position_embeddings": 163840,
    "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096},
    "tie_word_embeddings": false})";

TEST(HfFamilies, DeepseekV3) {
  ModelSpec m = Parse(kDeepseekV3);
  ASSERT_TRUE(m.mla.has_value());
  EXPECT_EQ(m.head_dim, 192);
  EXPECT_EQ(m.v_dim(), 128 * 128);
  EXPECT_EQ(m.seq_len, 4096);
  EXPECT_EQ(m.MoeLayerCount(), 58);
  EXPECT_FALSE(m.IsMoeLayer(2));
  EXPECT_TRUE(m.IsMoeLayer(3));
  // Per range (a stage's layers): layers 3..60 are MoE, so [0, 61) holds 58, [0, 3) none,
  // [2, 5) two (3 and 4), [40, 61) 21.
  EXPECT_EQ(m.MoeLayersIn(0, 61), 58);
  EXPECT_EQ(m.MoeLayersIn(0, 3), 0);
  EXPECT_EQ(m.MoeLayersIn(2, 5), 2);
  EXPECT_EQ(m.MoeLayersIn(40, 61), 21);
  // Every second layer from 1 (interval 2): 1, 3, 5 in [0, 6); 3, 5 in [2, 6); none in [4, 5);
  // 5 in [5, 6); none in an empty range.
  ModelSpec every_other = m;
  every_other.moe->first_dense = 1;
  every_other.moe->interval = 2;
  EXPECT_EQ(every_other.MoeLayersIn(0, 6), 3);
  EXPECT_EQ(every_other.MoeLayersIn(2, 6), 2);
  EXPECT_EQ(every_other.MoeLayersIn(4, 5), 0);
  EXPECT_EQ(every_other.MoeLayersIn(5, 6), 1);
  EXPECT_EQ(every_other.MoeLayersIn(6, 6), 0);
  // Attention: q_a 7168 x 1536 + its norm 1536 + q_b 1536 x 128 x 192 = 48,760,320;
  // kv_a 7168 x 576 + its norm 512 + kv_b 512 x 128 x 256 = 20,906,496; o 128 x 128 x 7168 =
  // 117,440,512: 187,107,328. Dense layer + 3 x 7168 x 18432 + 2 x 7168 = 583,483,392.
  EXPECT_EQ(m.AttentionParams(), 187107328);
  EXPECT_EQ(m.DenseLayerParams(), 583483392);
  // MoE layer: attention + 257 MLPs of 3 x 7168 x 2048 = 44,040,192 + router 256 x 7168 +
  // norms = 11,507,286,016. Total 3 x 583,483,392 + 58 x 11,507,286,016 + 2 x 129280 x 7168
  // + 7168 = 671,026,404,352: the main model, the report's 671B.
  EXPECT_EQ(m.mtp_layers, 1);
  EXPECT_EQ(m.TotalParams() - m.MtpParams(), 671026404352);
  // The MTP depth (num_nextn_predict_layers 1): a layer of the last one's kind (MoE,
  // 11,507,286,016), eh_proj 2 x 7168 x 7168 = 102,760,448 and three norms 3 x 7168 = 21,504:
  // 11,610,067,968; its layer index 61 is MoE; total 682,636,472,320.
  EXPECT_TRUE(m.IsMoeLayer(61));
  EXPECT_EQ(m.MoeLayersIn(0, 62), 59);
  EXPECT_EQ(m.MoeLayersIn(61, 62), 1);
  EXPECT_EQ(m.MtpParams(), 11610067968);
  EXPECT_EQ(m.TotalParams(), 682636472320);
  // The model card's "685B total ... including 14B of the MTP module" counts the HF files, whose
  // layer 61 also holds copies of the embedding and the head (2 x 129280 x 7168 =
  // 1,853,358,080): 682,636,472,320 + 1,853,358,080 = 684,489,830,400, 0.07 % under 685B.
  const double files = static_cast<double>(m.TotalParams()) + 2.0 * 129280 * 7168;
  EXPECT_NEAR(files / 685e9, 1.0, 0.005);
  // Active: 248 routed experts of 58 layers idle: 671,026,404,352 - 58 x 248 x 44,040,192 =
  // 37,552,282,624 (the report's 37B; 36.6B without the input embedding's 0.93B); the MTP
  // depth's 248 too: 11,610,067,968 - 248 x 44,040,192 = 688,100,352.
  EXPECT_EQ(m.ActiveParams() - m.MtpActiveParams(), 37552282624);
  EXPECT_EQ(m.MtpActiveParams(), 688100352);
  EXPECT_EQ(m.ActiveParams(), 37552282624 + 688100352);
  EXPECT_FALSE(Warns(m, "num_nextn_predict_layers"));
  EXPECT_TRUE(Warns(m, "topk_method noaux_tc"));
  // What TP replicates: q_a and its norm, kv_a and its norm: 11,010,048 + 1536 + 4,128,768 + 512.
  EXPECT_EQ(m.AttentionReplicatedParams(), 15140864);
}

TEST(HfFamilies, DeepseekV2LiteHasNoQueryRank) {
  // DeepSeek-V2-Lite (arXiv 2405.04434, App. B): 27 layers, h 2048, 16 heads, no query
  // compression, KV 512, the first layer dense (10944), then 2 shared + 64 routed experts of
  // 1408, 6 a token, vocabulary 102400.
  ModelSpec m = Parse(R"({"model_type": "deepseek_v2", "hidden_size": 2048, "num_hidden_layers": 27,
      "num_attention_heads": 16, "q_lora_rank": null, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
      "qk_rope_head_dim": 64, "v_head_dim": 128, "intermediate_size": 10944, "moe_intermediate_size": 1408,
      "n_routed_experts": 64, "n_shared_experts": 2, "num_experts_per_tok": 6, "first_k_dense_replace": 1,
      "moe_layer_freq": 1, "vocab_size": 102400, "max_position_embeddings": 163840})");
  ASSERT_TRUE(m.mla.has_value());
  EXPECT_EQ(m.mla->q_lora_rank, 0);
  // Attention: q 2048 x 16 x 192 = 6,291,456; kv_a 2048 x 576 + 512 + kv_b 512 x 16 x 256 =
  // 3,277,312; o 16 x 128 x 2048 = 4,194,304: 13,763,072. Dense layer + 3 x 2048 x 10944 +
  // 4096 = 81,007,104; MoE layer + 64 x 3 x 2048 x 1408 + shared 3 x 2048 x 2816 + router
  // 64 x 2048 + 4096 = 584,847,872; total 81,007,104 + 26 x 584,847,872 + 2 x 102400 x 2048
  // + 2048 = 15,706,484,224 (the paper's 15.7B). Active: minus 26 x 58 x 8,650,752 =
  // 2,661,150,208 (the paper's 2.4B counts no embedding: 2.45B).
  EXPECT_EQ(m.AttentionParams(), 13763072);
  EXPECT_EQ(m.TotalParams(), 15706484224);
  EXPECT_EQ(m.ActiveParams(), 2661150208);
}

// Llama 4 (Llama4TextConfig under text_config): Scout's sizes (meta-llama/Llama-4-Scout-17B-16E
// model card: 17B active, 109B total with the vision encoder), 48 layers, h 5120, 40 heads, 8
// KV heads, 16 experts of 8192 top 1 plus a shared one in every layer, vocabulary 202048.
TEST(HfFamilies, Llama4ScoutAndMaverick) {
  const std::string text = R"("hidden_size": 5120, "num_hidden_layers": 48, "num_attention_heads": 40,
      "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 8192, "intermediate_size_mlp": 16384,
      "num_experts_per_tok": 1, "vocab_size": 202048, "max_position_embeddings": 10485760,
      "rope_scaling": {"factor": 8.0, "original_max_position_embeddings": 8192, "rope_type": "llama3"},
      "attention_chunk_size": 8192, "use_qk_norm": true, "tie_word_embeddings": false)";
  ModelSpec m = Parse(R"({"model_type": "llama4", "_name_or_path": "meta-llama/Llama-4-Scout-17B-16E",
      "text_config": {"model_type": "llama4_text", "num_local_experts": 16, "interleave_moe_layer_step": 1, )" + text + "}}");
  EXPECT_EQ(m.name, "Llama-4-Scout-17B-16E");
  EXPECT_EQ(m.seq_len, 8192);
  ASSERT_TRUE(m.moe.has_value());
  EXPECT_EQ(m.MoeLayerCount(), 48);
  // A layer: attention 5120 x 7168 + 5120^2 = 62,914,560; 17 MLPs (16 routed + shared) of
  // 3 x 5120 x 8192 = 125,829,120; router 16 x 5120; norms 10,240: 2,202,101,760, x 48 =
  // 105,700,884,480; embedding and head 2 x 202048 x 5120 = 2,068,971,520; final norm 5120:
  // 107,769,861,120 (the language model of the 109B). Active: one routed + the shared MLP:
  // 48 x 314,664,960 + 2,068,976,640 = 17,172,894,720 (the card's 17B).
  EXPECT_EQ(m.TotalParams(), 107769861120);
  EXPECT_EQ(m.ActiveParams(), 17172894720);
  EXPECT_TRUE(Warns(m, "attention_chunk_size 8192"));
  EXPECT_TRUE(Warns(m, "use_qk_norm"));
  // Maverick: 128 experts in every other layer ((i + 1) % 2 == 0: the odd ones), dense MLPs of
  // 16384 between: 24 x (62,914,560 + 129 x 125,829,120 + 128 x 5120 + 10,240) + 24 x
  // (62,914,560 + 3 x 5120 x 16384 + 10,240) + 2,068,976,640 = 400,711,848,960 (the card's
  // 400B); active 17,184,691,200 (17B).
  m = Parse(R"({"model_type": "llama4", "text_config": {"num_local_experts": 128, "interleave_moe_layer_step": 2, )" +
            text + "}}");
  EXPECT_FALSE(m.IsMoeLayer(0));
  EXPECT_TRUE(m.IsMoeLayer(1));
  EXPECT_FALSE(m.IsMoeLayer(46));
  EXPECT_TRUE(m.IsMoeLayer(47));
  EXPECT_EQ(m.TotalParams(), 400711848960);
  EXPECT_EQ(m.ActiveParams(), 17184691200);
  // A Llama 4 config without its text_config says where the sizes belong.
  StatusOr<ModelSpec> bare = ParseHfConfig(R"({"model_type": "llama4"})", "x.json");
  ASSERT_FALSE(bare.ok());
  EXPECT_NE(bare.status().message().find("text_config"), std::string::npos);
}

// Qwen2-MoE's decoder_sparse_step: layer i sparse when (i + 1) % step == 0: step 2 makes the odd
// layers MoE (first_dense 1, interval 2): 2 of 4.
TEST(HfFamilies, Qwen2MoeSparseStep) {
  ModelSpec m = Parse(R"({"model_type": "qwen2_moe", "hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4,
      "intermediate_size": 512, "moe_intermediate_size": 128, "num_experts": 4, "num_experts_per_tok": 2,
      "decoder_sparse_step": 2, "vocab_size": 1000, "max_position_embeddings": 4096})");
  EXPECT_FALSE(m.IsMoeLayer(0));
  EXPECT_TRUE(m.IsMoeLayer(1));
  EXPECT_FALSE(m.IsMoeLayer(2));
  EXPECT_TRUE(m.IsMoeLayer(3));
  EXPECT_EQ(m.MoeLayerCount(), 2);
}

TEST(MoeLayerFreq, ReadsIntegersAndListExpressions) {
  StatusOr<MoeLayerPattern> p = ParseMoeLayerFreq("2", 8);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->interval, 2);
  EXPECT_EQ(p->first_dense, 0);
  p = ParseMoeLayerFreq("'([0]*3+[1]*58)'", 61);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->first_dense, 3);
  EXPECT_EQ(p->interval, 1);
  // Layers 0..7 with 2 dense first and every other one after: 0 0 1 0 1 0 1 0.
  p = ParseMoeLayerFreq("[0,0,1,0,1,0,1,0]", 8);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->first_dense, 2);
  EXPECT_EQ(p->interval, 2);
  // The odd layers (Llama 4 Maverick's): first_dense 1, interval 2.
  p = ParseMoeLayerFreq("[0,1,0,1]", 4);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->first_dense, 1);
  EXPECT_EQ(p->interval, 2);
  // A pattern the description cannot hold, a wrong length, a bad item.
  EXPECT_FALSE(ParseMoeLayerFreq("[1,1,0,1]", 4).ok());
  EXPECT_NE(ParseMoeLayerFreq("([0]*3+[1]*5)", 61).status().message().find("lists 8 layers; the model has 61"),
            std::string::npos);
  EXPECT_FALSE(ParseMoeLayerFreq("[0,2]", 2).ok());
  // Written back: the expression, or the literal list.
  MoeSpec s;
  s.first_dense = 3;
  EXPECT_EQ(MoeLayerFreqText(s, 61), "([0]*3+[1]*58)");
  EXPECT_EQ(MoeLayerFreqText(s, 5, true), "[0,0,0,1,1]");
}

}  // namespace
}  // namespace shardsim
