// Hugging Face import as issue 16 asks: the sequence length a config does not state (a default
// with its notice, never max_position_embeddings silently), the model's name, a model folder and
// a Hub id, what a config holds that is not modelled, and the Qwen3 families (their Q/K norms).
// Parameter counts are derived by hand in the comments from each shape.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "src/model/model_spec.h"

namespace shardsim {
namespace {

namespace fs = std::filesystem;

ModelSpec Parse(const std::string& json, const std::string& name = "x.json") {
  StatusOr<ModelSpec> m = ParseHfConfig(json, name);
  EXPECT_TRUE(m.ok()) << m.status().message();
  return m.ok() ? *m : ModelSpec{};
}

// A Llama-family config of `context` positions, with `extra` keys spliced in.
std::string Llama(int64_t context, const std::string& extra = "") {
  return R"({"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
             "intermediate_size": 512, "vocab_size": 1000, "max_position_embeddings": )" +
         std::to_string(context) + extra + "}";
}

// max_position_embeddings is the context a config allows, not what the model was trained on.
TEST(HfImport, SequenceLengthIsADefaultWithANotice) {
  // Within the default (8192): the context itself, said so.
  ModelSpec m = Parse(Llama(4096));
  EXPECT_EQ(m.seq_len, 4096);
  EXPECT_NE(m.seq_len_default.find("max_position_embeddings, the context the config allows"), std::string::npos)
      << m.seq_len_default;
  // Qwen2.5-7B's 131,072 (or Mistral's 32,768): 8192, not the limit.
  m = Parse(Llama(131072));
  EXPECT_EQ(m.seq_len, 8192);
  EXPECT_NE(m.seq_len_default.find("the default for a Hugging Face config (its max_position_embeddings 131072 is a context limit)"),
            std::string::npos) << m.seq_len_default;
  EXPECT_NE(m.seq_len_default.find("--seq-len sets it"), std::string::npos);
  // Llama 3.1: 131,072 after a RoPE extension of an 8192-token pre-training context.
  m = Parse(Llama(131072, R"(, "rope_scaling": {"factor": 8.0, "original_max_position_embeddings": 8192, "rope_type": "llama3"})"));
  EXPECT_EQ(m.seq_len, 8192);
  EXPECT_NE(m.seq_len_default.find("rope_scaling.original_max_position_embeddings"), std::string::npos);
  // A smaller original context than the default wins: 4096 of 32768.
  m = Parse(Llama(32768, R"(, "rope_scaling": {"type": "yarn", "original_max_position_embeddings": 4096})"));
  EXPECT_EQ(m.seq_len, 4096);
  // A model YAML states its length: no notice.
  StatusOr<ModelSpec> yaml = LoadModel("llama3-8b");
  ASSERT_TRUE(yaml.ok());
  EXPECT_TRUE(yaml->seq_len_default.empty());
}

TEST(HfImport, NameFromTheConfigItsFolderOrItsFile) {
  // _name_or_path's last part.
  EXPECT_EQ(Parse(Llama(4096, R"(, "_name_or_path": "meta-llama/Llama-3.1-8B")"), "config.json").name, "Llama-3.1-8B");
  // A file of another name: its stem.
  EXPECT_EQ(Parse(Llama(4096), "/data/my-model.json").name, "my-model");
  // config.json: its folder's name.
  const fs::path dir = fs::temp_directory_path() / "shardsim-hf-import-test" / "Qwen3-8B";
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << Llama(4096);
  StatusOr<ModelSpec> by_file = LoadModel((dir / "config.json").string());
  ASSERT_TRUE(by_file.ok()) << by_file.status().message();
  EXPECT_EQ(by_file->name, "Qwen3-8B");
  // The folder itself is a model: its config.json.
  StatusOr<ModelSpec> by_folder = LoadModel(dir.string());
  ASSERT_TRUE(by_folder.ok()) << by_folder.status().message();
  EXPECT_EQ(by_folder->name, "Qwen3-8B");
  EXPECT_EQ(by_folder->TotalParams(), by_file->TotalParams());
  // A folder without one says so (it was read as an empty file).
  StatusOr<ModelSpec> empty = LoadModel(dir.parent_path().string());
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("is a folder without a config.json"), std::string::npos);
  fs::remove_all(dir.parent_path());
}

// No network here: a Hub id gets an error that says where to put the file.
TEST(HfImport, AHubIdSaysWhereToPutTheConfig) {
  StatusOr<ModelSpec> m = LoadModel("meta-llama/Llama-3.1-8B");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("Hugging Face Hub id"), std::string::npos) << m.status().message();
  EXPECT_NE(m.status().message().find("huggingface-cli download meta-llama/Llama-3.1-8B config.json --local-dir Llama-3.1-8B"),
            std::string::npos);
  EXPECT_NE(m.status().message().find("--model Llama-3.1-8B"), std::string::npos);
  // A path with more parts is a missing file, not a Hub id.
  StatusOr<ModelSpec> path = LoadModel("no/such/dir/config.json");
  ASSERT_FALSE(path.ok());
  EXPECT_EQ(path.status().message().find("Hub id"), std::string::npos) << path.status().message();
}

// What a config holds that is not priced is listed, not dropped.
TEST(HfImport, WhatIsNotModelledIsListed) {
  // Qwen2's window from layer max_window_layers on (use_sliding_window true): priced, layer 0
  // of 2 attending fully (Qwen2Attention: the window from layer_idx >= max_window_layers).
  ModelSpec qwen_window = Parse(R"({"model_type": "qwen2", "hidden_size": 256, "num_hidden_layers": 2,
      "num_attention_heads": 4, "intermediate_size": 512, "vocab_size": 1000, "max_position_embeddings": 32768,
      "sliding_window": 4096, "use_sliding_window": true, "max_window_layers": 1})");
  EXPECT_TRUE(qwen_window.not_modelled.empty());
  EXPECT_EQ(qwen_window.sliding_window, 4096);
  EXPECT_EQ(qwen_window.full_attention_layers, 1);
  // Qwen2 leaves its window off (use_sliding_window false): nothing to say.
  EXPECT_TRUE(Parse(R"({"model_type": "qwen2", "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
      "intermediate_size": 512, "vocab_size": 1000, "max_position_embeddings": 4096, "sliding_window": 4096,
      "use_sliding_window": false})").not_modelled.empty());
  // Llama's attention_bias: Q, K, V biases counted, O's said missing.
  ModelSpec biased = Parse(Llama(4096, R"(, "attention_bias": true)"));
  EXPECT_TRUE(biased.qkv_bias);
  ASSERT_EQ(biased.not_modelled.size(), 1u);
  EXPECT_NE(biased.not_modelled[0].find("output projection's bias (256 parameters a layer)"), std::string::npos);
}

// Qwen1.5-MoE-A2.7B's shape (hidden 2048, 24 layers, 16 heads with Q/K/V biases, 60 experts
// of 1408, top 4, a shared expert of 5632 with a sigmoid gate, vocab 151936, untied): per layer
// attention 3 x 2048^2 + 3 x 2048 + 2048^2 = 16,783,360; experts 60 x 3 x 2048 x 1408 =
// 519,045,120; router 2048 x 60 = 122,880; shared expert 3 x 2048 x 5632 + 2048 (the gate) =
// 34,605,056; norms 4096: 570,560,512, x 24 + 2048 + 2 x 151936 x 2048 = 14,315,784,192 (the
// model card's 14.3B). Active: 4 experts, 34,603,008 instead of 519,045,120: 2,689,173,504
// (2.7B). Without the shared expert it read 13.49B / 1.86B (issue 16's measurement).
TEST(HfImport, Qwen2MoeCountsItsSharedExpert) {
  const ModelSpec m = Parse(R"({"model_type": "qwen2_moe", "hidden_size": 2048, "num_hidden_layers": 24,
      "num_attention_heads": 16, "num_key_value_heads": 16, "intermediate_size": 5632, "moe_intermediate_size": 1408,
      "num_experts": 60, "num_experts_per_tok": 4, "shared_expert_intermediate_size": 5632, "decoder_sparse_step": 1,
      "vocab_size": 151936, "max_position_embeddings": 8192, "tie_word_embeddings": false})");
  ASSERT_TRUE(m.moe.has_value());
  EXPECT_EQ(m.moe->shared_ffn_hidden, 5632);
  EXPECT_TRUE(m.moe->shared_gate);
  EXPECT_TRUE(m.not_modelled.empty());
  EXPECT_EQ(m.MoeLayerParams(), 570560512);
  EXPECT_EQ(m.TotalParams(), 14315784192);
  EXPECT_EQ(m.ActiveParams(), 2689173504);
}

// Mistral's sliding window (4096 in every layer) is priced: at 8192 tokens a sequence has
// 8192 x 8193 / 2 = 33,558,528 causal pairs and the window leaves 4096 x 4097 / 2 + 4096 x 4096 =
// 25,167,872, so attention counts 8192 x 25,167,872 / 33,558,528 = 6143.75 keys a query in the
// full-matrix convention; at 4096 tokens the window covers everything: 4096.
TEST(HfImport, MistralSlidingWindowIsPriced) {
  ModelSpec m = Parse(R"({"model_type": "mistral", "hidden_size": 256, "num_hidden_layers": 2,
      "num_attention_heads": 4, "intermediate_size": 512, "vocab_size": 1000, "max_position_embeddings": 32768,
      "sliding_window": 4096})");
  EXPECT_EQ(m.sliding_window, 4096);
  EXPECT_TRUE(m.not_modelled.empty());
  EXPECT_EQ(m.seq_len, 8192);
  EXPECT_NEAR(m.AttentionSpan(), 6143.750030513853, 1e-9);
  m.seq_len = 4096;
  EXPECT_EQ(m.AttentionSpan(), 4096);
  // Mixtral's null window: none.
  EXPECT_EQ(Parse(R"({"model_type": "mixtral", "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
      "intermediate_size": 512, "num_local_experts": 8, "num_experts_per_tok": 2, "vocab_size": 1000,
      "max_position_embeddings": 32768, "sliding_window": null})").sliding_window, 0);
}

// Qwen3-8B's shape (hidden 4096, 36 layers, 32 heads of 128, 8 KV heads, intermediate 12288,
// vocab 151936, untied): per layer Q 4096 x 4096 = 16,777,216, K and V 2 x 4096 x 1024 =
// 8,388,608, O 16,777,216, Q/K norms 2 x 128 = 256, MLP 3 x 4096 x 12288 = 150,994,944, norms
// 8192: 192,946,432; x 36 = 6,946,071,552, + the final norm 4096 = 6,946,075,648 (the model
// card's "Number of Parameters (Non-Embedding): 6.95B"); + embedding and LM head 2 x 151936 x
// 4096 = 1,244,659,712: 8,190,735,360 (the card's 8.2B).
TEST(HfImport, Qwen3DenseCountsItsQkNorms) {
  const ModelSpec m = Parse(R"({"model_type": "qwen3", "hidden_size": 4096, "num_hidden_layers": 36,
      "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 12288,
      "vocab_size": 151936, "max_position_embeddings": 40960, "tie_word_embeddings": false,
      "attention_bias": false, "rope_theta": 1000000})");
  EXPECT_TRUE(m.qk_norm);
  EXPECT_FALSE(m.qkv_bias);  // Qwen3 dropped Qwen2's Q/K/V biases
  EXPECT_EQ(m.DenseLayerParams(), 192946432);
  EXPECT_EQ(m.TotalParams(), 8190735360);
  EXPECT_EQ(m.rotary_base, 1000000);
}

// Qwen3-30B-A3B's shape (hidden 2048, 48 layers, 32 heads of 128, 4 KV heads, 128 experts of
// 768, top 8): attention 2048 x 4096 + 2 x 2048 x 512 + 4096 x 2048 = 18,874,368, + Q/K norms
// 256; experts 128 x 3 x 2048 x 768 = 603,979,776; router 2048 x 128 = 262,144; norms 4096:
// 623,120,640 a layer, x 48 + 2048 = 29,909,792,768 (the card's 29.9B non-embedding); + 2 x
// 151936 x 2048 = 622,329,856: 30,532,122,624 (30.5B). Active: 8 experts, 37,748,736 instead of
// 603,979,776: 56,889,600 a layer, x 48 + 2048 + 622,329,856 = 3,353,032,704 (3.3B activated).
TEST(HfImport, Qwen3MoeCountsTotalAndActive) {
  const ModelSpec m = Parse(R"({"model_type": "qwen3_moe", "hidden_size": 2048, "num_hidden_layers": 48,
      "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128, "intermediate_size": 6144,
      "moe_intermediate_size": 768, "num_experts": 128, "num_experts_per_tok": 8, "decoder_sparse_step": 1,
      "mlp_only_layers": [], "norm_topk_prob": true, "vocab_size": 151936, "max_position_embeddings": 40960,
      "tie_word_embeddings": false})");
  ASSERT_TRUE(m.moe.has_value());
  EXPECT_TRUE(m.not_modelled.empty());
  EXPECT_EQ(m.MoeLayerParams(), 623120640);
  EXPECT_EQ(m.TotalParams(), 30532122624);
  EXPECT_EQ(m.ActiveParams(), 3353032704);
}

}  // namespace
}  // namespace shardsim
