// ModelSpec: a decoder-only transformer's shape (dense or MoE), and its parameter counts.
// Loaded from models/*.yaml (model_yaml.cc) or a Hugging Face config.json (hf_config.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "src/util/status.h"

namespace shardsim {

enum class Activation { kGelu, kSwiglu };
enum class Norm { kLayerNorm, kRmsNorm };
enum class Position { kLearned, kRope };

struct MoeSpec {
  int64_t experts = 0;     // experts per MoE layer
  int64_t top_k = 0;       // experts each token is routed to
  int64_t ffn_hidden = 0;  // inner size of each expert's MLP
  int64_t interval = 1;    // layer i is MoE when i % interval == 0
  // Shared experts: a dense MLP of this inner size (all shared experts together) that every
  // token goes through beside its routed experts (Qwen1.5/Qwen2-MoE's
  // shared_expert_intermediate_size; DeepSeek's n_shared_experts x moe_intermediate_size);
  // 0: none. Its parameters are dense: split over TP, replicated over EP, reduced over DP x CP.
  int64_t shared_ffn_hidden = 0;
  // Qwen2-MoE's sigmoid gate on the shared expert's output (shared_expert_gate, a Linear(h, 1)).
  bool shared_gate = false;
};

struct ModelSpec {
  std::string name;
  std::string source;  // citation of the numbers
  int64_t layers = 0;
  int64_t hidden = 0;
  int64_t heads = 0;     // query heads
  int64_t kv_heads = 0;  // key/value heads (== heads for MHA, < heads for GQA/MQA)
  int64_t head_dim = 0;
  int64_t ffn_hidden = 0;  // dense MLP inner size
  int64_t vocab = 0;
  int64_t seq_len = 0;
  Activation activation = Activation::kGelu;
  Norm norm = Norm::kLayerNorm;
  Position position = Position::kRope;
  bool tied_embeddings = false;
  bool bias = false;      // every linear layer has a bias (GPT-2, Megatron GPT)
  bool qkv_bias = false;  // the Q, K and V projections have biases (Qwen2; implied by bias)
  bool dropout = false;
  // RoPE's base (theta): 0 = not stated by the description. Prices nothing; the exports carry
  // it (Megatron-LM's --rotary-base, default 10000).
  double rotary_base = 0;
  // RMSNorm over each head's queries and keys (Qwen3, OLMo 2): 2 head_dim weights per layer.
  bool qk_norm = false;
  // Sliding-window attention in every layer (Mistral's sliding_window): each query meets at
  // most this many keys, itself included; 0: the whole causal prefix.
  int64_t sliding_window = 0;
  std::optional<MoeSpec> moe;
  // Where the description states no training sequence length (a Hugging Face config holds a
  // context limit, max_position_embeddings): the one-line notice of the default taken, which
  // commands print unless --seq-len sets the length; "" when the description states it.
  std::string seq_len_default;
  // What the description holds that shardsim does not price, one line each; commands print
  // them as warnings, in text and JSON.
  std::vector<std::string> not_modelled;

  int64_t q_dim() const { return heads * head_dim; }
  // The keys a query meets, in the full-matrix convention attention FLOPs are counted in
  // (Narayanan et al. 2021's 4 s^2 h per layer and sequence: seq_len, of which a causal kernel
  // runs half): seq_len scaled by the window's share of the causal pairs. A sequence of s tokens
  // has s (s + 1) / 2 causal query-key pairs; a window of w < s leaves w (w + 1) / 2 + (s - w) w.
  double AttentionSpan() const;
  int64_t kv_dim() const { return kv_heads * head_dim; }
  bool HasQkvBias() const { return bias || qkv_bias; }
  bool IsMoeLayer(int64_t layer) const { return moe && layer % moe->interval == 0; }
  int64_t MoeLayerCount() const;

  // Parameter counts (elements, not bytes).
  int64_t AttentionParams() const;             // QKV + output projection (+ biases, + Q/K norms)
  int64_t MlpParams(int64_t ffn) const;        // one MLP of inner size ffn (+ biases)
  int64_t NormParams() const;                  // one norm: 2h (LayerNorm) or h (RMSNorm)
  int64_t DenseLayerParams() const;            // attention + MLP + 2 norms
  int64_t MoeLayerParams() const;              // attention + all experts + router + shared experts + 2 norms
  int64_t SharedExpertParams() const;          // one MoE layer's shared experts (+ their gate); 0 without
  int64_t LayerParams(int64_t layer) const;
  int64_t EmbeddingParams() const;             // token (+ learned position) embedding
  int64_t HeadParams() const;                  // final norm + LM head (0 head if tied)
  int64_t TotalParams() const;
  // Parameters a token actually uses (top_k experts instead of all).
  int64_t ActiveParams() const;
};

// Checks internal consistency (kv_heads divides heads, top_k <= experts, ...).
Status ValidateModel(const ModelSpec& m, const std::string& origin);

// Loads models/*.yaml, or a Hugging Face config.json when the path ends in .json.
// A bare name ("gpt3-175b") is looked up in the bundled models/ folder.
StatusOr<ModelSpec> LoadModel(const std::string& path_or_name);
StatusOr<ModelSpec> LoadModelYaml(const std::string& path);
StatusOr<ModelSpec> LoadHfConfig(const std::string& path);
// From text in memory (tests); `name` stands for the file in messages.
StatusOr<ModelSpec> ParseModelYaml(const std::string& text, const std::string& name);
StatusOr<ModelSpec> ParseHfConfig(const std::string& text, const std::string& name);

}  // namespace shardsim
