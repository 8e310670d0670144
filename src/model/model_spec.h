// ModelSpec: a decoder-only transformer's shape (dense or MoE), and its parameter counts.
// Loaded from models/*.yaml (model_yaml.cc) or a Hugging Face config.json (hf_config.cc).
#pragma once

#include <algorithm>
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
  // The first this many layers are dense (DeepSeek's first_k_dense_replace); from there every
  // interval-th layer is MoE: layer i when i >= first_dense and (i - first_dense) % interval == 0
  // (Llama 4 Maverick's odd layers: first_dense 1, interval 2).
  int64_t first_dense = 0;
  // The load-balancing loss's weight (Switch Transformer's alpha; Megatron-LM's
  // --moe-aux-loss-coeff, whose default is 0): what training adds, coeff x E / (k T^2) x
  // sum_e tokens_e x sum_t p_te per micro-batch (moe_utils.py switch_load_balancing_loss_func).
  // Only `shardsim run` uses it; its FLOPs are negligible and not priced.
  double aux_loss_coeff = 0;
  // Whether layer `layer` is an MoE layer under first_dense and interval.
  bool Covers(int64_t layer) const { return layer >= first_dense && (layer - first_dense) % interval == 0; }
};

// Multi-head latent attention (DeepSeek-V2, arXiv 2405.04434 Sec. 2.1; transformers
// models/deepseek_v3 DeepseekV3Attention): queries through a rank-q_lora_rank bottleneck
// (q_a_proj, its RMSNorm, q_b_proj; none when 0), keys and values through a shared
// rank-kv_lora_rank latent (kv_a_proj_with_mqa, which also yields one rope_head_dim RoPE key
// all heads share, its RMSNorm, kv_b_proj), each head's query and key rope_head_dim wider than
// the no-RoPE part. ModelSpec.head_dim is the query/key head size (no-RoPE + RoPE parts),
// kv_heads == heads; v_head_dim sizes the values and the output projection's input.
struct MlaSpec {
  int64_t q_lora_rank = 0;
  int64_t kv_lora_rank = 0;
  int64_t rope_head_dim = 0;
  int64_t v_head_dim = 0;
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
  // RMSNorm over each head's queries and keys (Qwen3, Gemma 3): 2 head_dim weights per layer.
  bool qk_norm = false;
  // With qk_norm: one norm over all the queries and one over all the keys (OLMo 2's q_norm,
  // k_norm of q_dim and kv_dim weights, transformers models/olmo2/modeling_olmo2.py).
  bool qk_norm_full = false;
  // The norms have weights (and LayerNorm biases); OLMo's LayerNorm has neither
  // (OlmoLayerNorm: elementwise_affine off, transformers models/olmo/modeling_olmo.py).
  bool norm_weights = true;
  // Norms per layer: 2 (before attention and before the MLP); Gemma 2 and 3 add one after each
  // (post_attention_layernorm, post_feedforward_layernorm): 4.
  int64_t norms_per_layer = 2;
  // Sliding-window attention in every layer (Mistral's sliding_window): each query meets at
  // most this many keys, itself included; 0: the whole causal prefix.
  int64_t sliding_window = 0;
  // With a window: how many layers attend the whole prefix all the same (Gemma 2 alternates,
  // 1 in 2; Gemma 3: 1 in 6); 0: every layer is windowed (Mistral).
  int64_t full_attention_layers = 0;
  std::optional<MoeSpec> moe;
  std::optional<MlaSpec> mla;
  // Multi-token prediction depths (DeepSeek-V3, arXiv:2412.19437 Sec. 2.2; Megatron-Core's
  // --mtp-num-layers, megatron/core/transformer/multi_token_prediction.py). Depth k predicts the
  // token k + 1 places ahead: RMSNorms of the previous depth's hidden states and of the shifted
  // tokens' embeddings (hnorm, enorm), their concatenation projected 2h -> h (eh_proj, no bias),
  // one transformer layer of the last decoder layer's kind, a final norm, then the main model's
  // output head and a cross-entropy of its own. The embedding table and the head are shared
  // with the main model. Megatron-Core builds the depths on the last pipeline stage, after its
  // decoder layers, and applies the head to every depth's output there. 0: none.
  int64_t mtp_layers = 0;
  // Soft-capping of the output logits (Gemma 2's final_logit_softcapping; transformers
  // models/gemma2/modeling_gemma2.py Gemma2ForCausalLM.forward): cap * tanh(logits / cap) before
  // the loss, in fp32 over the vocabulary shard. 0: none. The tanh's output is kept for its
  // backward (1 - tanh^2).
  double final_logit_softcap = 0;
  // Soft-capping of the attention scores (Gemma 2's attn_logit_softcapping: cap * tanh(S / cap)
  // before the mask and softmax; transformers models/gemma2/modeling_gemma2.py
  // eager_attention_forward, NeMo's Gemma 2 attention alike): three element-wise passes over the
  // scores (divide, tanh, multiply) with the tanh's output kept for its backward, where the
  // scores are materialised (attention=unfused); inside a fused kernel (FlashAttention-2's
  // softcap) one tanh per score, not priced. 0: none.
  double attn_logit_softcap = 0;
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
  // The values' width and the output projection's input: kv_dim and q_dim, but for MLA's
  // v_head_dim.
  int64_t v_head_dim() const { return mla ? mla->v_head_dim : head_dim; }
  int64_t v_dim() const { return kv_heads * v_head_dim(); }
  int64_t o_dim() const { return heads * v_head_dim(); }
  bool HasQkvBias() const { return bias || qkv_bias; }
  // Layer indices from `layers` on are the MTP depths' layers: the last decoder layer's kind
  // (Megatron-LM's pretrain_gpt.py builds them from the decoder block's last layer spec).
  bool IsMoeLayer(int64_t layer) const { return moe && moe->Covers(std::min(layer, layers - 1)); }
  int64_t MoeLayerCount() const;  // decoder layers only
  // MoE layers among layers [begin, end), counted in closed form (the planner asks per stage
  // of every layout); indices from `layers` on count as the MTP depths' layers.
  int64_t MoeLayersIn(int64_t begin, int64_t end) const;

  // Parameter counts (elements, not bytes).
  int64_t AttentionParams() const;             // QKV + output projection (+ biases, + Q/K norms)
  // Of those, what tensor parallelism does not split: per-head Q/K norms, MLA's down-projections
  // and their norms (Megatron-Core's MLASelfAttention runs linear_q_down_proj and
  // linear_kv_down_proj duplicated on every TP rank), the row-parallel output projection's bias.
  int64_t AttentionReplicatedParams() const;
  int64_t MlpParams(int64_t ffn) const;        // one MLP of inner size ffn (+ biases)
  int64_t NormParams() const;                  // one norm: 2h (LayerNorm) or h (RMSNorm)
  int64_t LayerNormParams() const { return norms_per_layer * NormParams(); }  // a layer's norms
  int64_t DenseLayerParams() const;            // attention + MLP + 2 norms
  int64_t MoeLayerParams() const;              // attention + all experts + router + shared experts + 2 norms
  int64_t SharedExpertParams() const;          // one MoE layer's shared experts (+ their gate); 0 without
  int64_t LayerParams(int64_t layer) const;
  int64_t EmbeddingParams() const;             // token (+ learned position) embedding
  int64_t HeadParams() const;                  // final norm + LM head (0 head if tied)
  // One MTP depth's own parameters: hnorm, enorm and the final norm, eh_proj (2 h^2), its
  // layer; the embedding and the head are the main model's.
  int64_t MtpDepthParams() const;
  int64_t MtpParams() const { return mtp_layers * MtpDepthParams(); }
  int64_t TotalParams() const;  // with the MTP depths
  // Parameters a token actually uses (top_k experts instead of all), with the MTP depths.
  int64_t ActiveParams() const;
  // The MTP depths' share of ActiveParams.
  int64_t MtpActiveParams() const;
};

// Checks internal consistency (kv_heads divides heads, top_k <= experts, ...).
Status ValidateModel(const ModelSpec& m, const std::string& origin);

// The first of the model's sizes above its bound (src/util/limits.h), as the field it is read
// from ("moe" for the MoE block's, "mla" for MLA's) and a message naming value and bound; or
// nothing. ValidateModel refuses it; the YAML reader reports it at the field's line.
struct ModelBoundError {
  std::string field, message;
};
std::optional<ModelBoundError> ModelAboveBounds(const ModelSpec& m);

// Loads models/*.yaml, or a Hugging Face config.json when the path ends in .json.
// A bare name ("gpt3-175b") is looked up in the bundled models/ folder.
StatusOr<ModelSpec> LoadModel(const std::string& path_or_name);
StatusOr<ModelSpec> LoadModelYaml(const std::string& path);
StatusOr<ModelSpec> LoadHfConfig(const std::string& path);
// From text in memory (tests); `name` stands for the file in messages.
StatusOr<ModelSpec> ParseModelYaml(const std::string& text, const std::string& name);
StatusOr<ModelSpec> ParseHfConfig(const std::string& text, const std::string& name);

}  // namespace shardsim
