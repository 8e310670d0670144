// Parameter counting and consistency checks for ModelSpec.
// Dense counts follow Narayanan et al. 2021 (SC'21), eq. for P: per layer 12h^2 + 13h with
// biases, LayerNorm and a 4h GELU MLP; the general form below reduces to it.
#include "src/model/model_spec.h"

#include <algorithm>
#include <cstdio>

#include "src/util/limits.h"

namespace shardsim {

int64_t ModelSpec::MoeLayerCount() const {
  if (!moe) return 0;
  // Every interval-th layer of [first_dense, layers).
  const int64_t first = std::min(moe->first_dense, layers);
  return (layers - first + moe->interval - 1) / moe->interval;
}

int64_t ModelSpec::MoeLayersIn(int64_t begin, int64_t end) const {
  if (!moe) return 0;
  if (end > layers && layers > 0) {  // the MTP depths' layers: the last layer's kind
    const int64_t mtp = end - std::max(begin, layers);
    return MoeLayersIn(begin, layers) + (IsMoeLayer(layers - 1) ? mtp : 0);
  }
  // Layers first_dense + j interval, j >= 0, in [begin, end): j from ceil((a - fd) / iv) to
  // ceil((end - fd) / iv) - 1, with a = max(begin, fd).
  const int64_t fd = moe->first_dense, iv = moe->interval, a = std::max(begin, fd);
  if (end <= a) return 0;
  auto ceil_div = [](int64_t x, int64_t y) { return (x + y - 1) / y; };  // x >= 0
  return ceil_div(end - fd, iv) - ceil_div(a - fd, iv);
}

int64_t ModelSpec::AttentionParams() const {
  const int64_t proj = o_dim() * hidden + (bias ? hidden : 0);
  const int64_t qk_norms = !qk_norm ? 0 : qk_norm_full ? q_dim() + kv_dim() : 2 * head_dim;
  if (mla) {
    // DeepseekV3Attention: q_a_proj (h x q_lora_rank), q_a_layernorm, q_b_proj (q_lora_rank x
    // heads * head_dim), or q_proj (h x heads * head_dim) without a query rank;
    // kv_a_proj_with_mqa (h x (kv_lora_rank + rope_head_dim)), kv_a_layernorm, kv_b_proj
    // (kv_lora_rank x heads * (head_dim - rope_head_dim + v_head_dim)); o_proj. No biases.
    const MlaSpec& a = *mla;
    const int64_t q = a.q_lora_rank > 0 ? hidden * a.q_lora_rank + a.q_lora_rank + a.q_lora_rank * q_dim()
                                        : hidden * q_dim();
    const int64_t kv = hidden * (a.kv_lora_rank + a.rope_head_dim) + a.kv_lora_rank +
                       a.kv_lora_rank * heads * (head_dim - a.rope_head_dim + a.v_head_dim);
    return q + kv + proj + qk_norms;
  }
  const int64_t qkv = hidden * (q_dim() + 2 * kv_dim()) + (HasQkvBias() ? q_dim() + 2 * kv_dim() : 0);
  return qkv + proj + qk_norms;
}

int64_t ModelSpec::AttentionReplicatedParams() const {
  // The output projection's bias: the projection is row-parallel, so every TP rank adds the
  // whole bias to its partial sum's reduction (Megatron-LM's RowParallelLinear keeps it whole).
  int64_t r = (qk_norm && !qk_norm_full ? 2 * head_dim : 0) + (bias ? hidden : 0);
  if (mla) {
    const MlaSpec& a = *mla;
    r += (a.q_lora_rank > 0 ? hidden * a.q_lora_rank + a.q_lora_rank : 0) +
         hidden * (a.kv_lora_rank + a.rope_head_dim) + a.kv_lora_rank;
  }
  return r;
}

int64_t ModelSpec::MlpParams(int64_t ffn) const {
  if (activation == Activation::kSwiglu) {
    // gate and up (h x f each), down (f x h)
    return 3 * hidden * ffn + (bias ? 2 * ffn + hidden : 0);
  }
  return 2 * hidden * ffn + (bias ? ffn + hidden : 0);
}

int64_t ModelSpec::NormParams() const {
  if (!norm_weights) return 0;
  return norm == Norm::kLayerNorm ? 2 * hidden : hidden;
}

int64_t ModelSpec::DenseLayerParams() const {
  return AttentionParams() + MlpParams(ffn_hidden) + LayerNormParams();
}

int64_t ModelSpec::MoeLayerParams() const {
  if (!moe) return DenseLayerParams();
  const int64_t router = hidden * moe->experts;
  return AttentionParams() + moe->experts * MlpParams(moe->ffn_hidden) + router + SharedExpertParams() +
         LayerNormParams();
}

int64_t ModelSpec::LayerParams(int64_t layer) const {
  return IsMoeLayer(layer) ? MoeLayerParams() : DenseLayerParams();
}

int64_t ModelSpec::EmbeddingParams() const {
  return vocab * hidden + (position == Position::kLearned ? seq_len * hidden : 0);
}

int64_t ModelSpec::HeadParams() const {
  return NormParams() + (tied_embeddings ? 0 : vocab * hidden);
}

int64_t ModelSpec::MtpDepthParams() const {
  // Megatron-Core's MultiTokenPredictionLayer: enorm, hnorm, eh_proj (ColumnParallelLinear
  // 2h -> h, bias=False), the transformer layer, final_layernorm.
  return 3 * NormParams() + 2 * hidden * hidden + LayerParams(layers);
}

int64_t ModelSpec::TotalParams() const {
  const int64_t moe_layers = MoeLayerCount();
  return (layers - moe_layers) * DenseLayerParams() + moe_layers * MoeLayerParams() +
         EmbeddingParams() + HeadParams() + MtpParams();
}

int64_t ModelSpec::MtpActiveParams() const {
  if (!moe || !IsMoeLayer(layers)) return MtpParams();
  return MtpParams() - mtp_layers * (moe->experts - moe->top_k) * MlpParams(moe->ffn_hidden);
}

int64_t ModelSpec::ActiveParams() const {
  if (!moe) return TotalParams();
  const int64_t inactive = (moe->experts - moe->top_k) * MlpParams(moe->ffn_hidden);
  return TotalParams() - MtpParams() - MoeLayerCount() * inactive + MtpActiveParams();
}

int64_t ModelSpec::SharedExpertParams() const {
  if (!moe || moe->shared_ffn_hidden <= 0) return 0;
  return MlpParams(moe->shared_ffn_hidden) + (moe->shared_gate ? hidden : 0);
}

double ModelSpec::AttentionSpan() const {
  const double s = static_cast<double>(seq_len);
  if (sliding_window <= 0 || sliding_window >= seq_len || layers <= 0) return s;
  const double w = static_cast<double>(sliding_window);
  const double causal = s * (s + 1) / 2, windowed = w * (w + 1) / 2 + (s - w) * w;
  // Layers that attend the whole prefix (Gemma's global layers) count s; the mean over the
  // model's layers, since every layer is priced alike.
  const double full = static_cast<double>(std::min(full_attention_layers, layers)) / static_cast<double>(layers);
  return full * s + (1 - full) * s * windowed / causal;
}

std::optional<ModelBoundError> ModelAboveBounds(const ModelSpec& m) {
  struct Size {
    const char* field;
    const char* name;
    int64_t value, bound;
  };
  std::vector<Size> sizes = {
      {"layers", "layers", m.layers, kMaxLayers},         {"hidden", "hidden", m.hidden, kMaxWidth},
      {"heads", "heads", m.heads, kMaxHeads},             {"kv_heads", "kv_heads", m.kv_heads, kMaxHeads},
      {"head_dim", "head_dim", m.head_dim, kMaxWidth},    {"ffn_hidden", "ffn_hidden", m.ffn_hidden, kMaxWidth},
      {"vocab", "vocab", m.vocab, kMaxVocab},             {"seq_len", "seq_len", m.seq_len, kMaxSeqLen},
      {"sliding_window", "sliding_window", m.sliding_window, kMaxSeqLen},
  };
  if (m.moe) {
    sizes.push_back({"moe", "moe.experts", m.moe->experts, kMaxExperts});
    sizes.push_back({"moe", "moe.ffn_hidden", m.moe->ffn_hidden, kMaxWidth});
    sizes.push_back({"moe", "moe.shared_ffn_hidden", m.moe->shared_ffn_hidden, kMaxWidth * 64});
  }
  if (m.mla) {
    sizes.push_back({"mla", "mla.q_lora_rank", m.mla->q_lora_rank, kMaxWidth});
    sizes.push_back({"mla", "mla.kv_lora_rank", m.mla->kv_lora_rank, kMaxWidth});
    sizes.push_back({"mla", "mla.rope_head_dim", m.mla->rope_head_dim, kMaxWidth});
    sizes.push_back({"mla", "mla.v_head_dim", m.mla->v_head_dim, kMaxWidth});
  }
  for (const Size& s : sizes) {
    if (s.value > s.bound) {
      return ModelBoundError{s.field, std::string(s.name) + "=" + std::to_string(s.value) + " is above the bound of " +
                                          std::to_string(s.bound) + " (docs/cli.md, \"Bounds\")"};
    }
  }
  // Each size within its bound, their products may still not be: the parameters, in double
  // (an upper estimate: attention's four projections, a gated MLP, every layer an MoE one
  // when there are experts, embedding and head untied).
  const double h = static_cast<double>(m.hidden), attention = 4.0 * h * static_cast<double>(m.heads * m.head_dim);
  double mlp = 3.0 * h * static_cast<double>(m.ffn_hidden);
  if (m.moe) {
    mlp = std::max(mlp, 3.0 * h * (static_cast<double>(m.moe->experts) * static_cast<double>(m.moe->ffn_hidden) +
                                   static_cast<double>(m.moe->shared_ffn_hidden)));
  }
  const double params = static_cast<double>(m.layers) * (attention + mlp) + 2.0 * h * static_cast<double>(m.vocab);
  if (params > kMaxModelParams) {
    char msg[200];
    std::snprintf(msg, sizeof msg, "these sizes make about %.3g parameters, above the bound of %.0e (docs/cli.md, \"Bounds\")",
                  params, kMaxModelParams);
    return ModelBoundError{"layers", msg};
  }
  return std::nullopt;
}

Status ValidateModel(const ModelSpec& m, const std::string& origin) {
  auto fail = [&](const std::string& what) { return Status::Error(origin + ": " + what); };
  if (std::optional<ModelBoundError> e = ModelAboveBounds(m)) return fail(e->message);
  if (m.heads % m.kv_heads != 0) {
    return fail("kv_heads=" + std::to_string(m.kv_heads) + " must divide heads=" +
                std::to_string(m.heads));
  }
  if (m.head_dim <= 0) return fail("head_dim must be positive");
  if (m.norms_per_layer < 0) return fail("norms_per_layer must not be negative");
  if (m.sliding_window < 0) return fail("sliding_window must be positive (or absent: no window)");
  if (m.mtp_layers < 0 || m.mtp_layers > m.layers) {
    return fail("mtp_layers must be between 0 and layers=" + std::to_string(m.layers));
  }
  if (m.full_attention_layers < 0 || m.full_attention_layers > m.layers) {
    return fail("full_attention_layers must be between 0 and layers=" + std::to_string(m.layers));
  }
  if (m.qk_norm_full && !m.qk_norm) return fail("qk_norm_full needs qk_norm");
  if (m.mla) {
    const MlaSpec& a = *m.mla;
    if (a.kv_lora_rank <= 0 || a.v_head_dim <= 0 || a.q_lora_rank < 0) {
      return fail("mla: kv_lora_rank and v_head_dim must be positive, q_lora_rank not negative");
    }
    if (a.rope_head_dim <= 0 || a.rope_head_dim >= m.head_dim) {
      return fail("mla: rope_head_dim must be positive and below head_dim=" + std::to_string(m.head_dim));
    }
    if (m.kv_heads != m.heads) return fail("mla: kv_heads must equal heads (every head has its own keys)");
  }
  if (m.moe) {
    if (m.moe->experts < 2) return fail("moe.experts must be at least 2");
    if (m.moe->shared_ffn_hidden < 0) return fail("moe.shared_ffn_hidden must not be negative");
    if (m.moe->first_dense < 0 || m.moe->first_dense >= m.layers) {
      return fail("moe.first_dense=" + std::to_string(m.moe->first_dense) + " must be in [0, layers=" +
                  std::to_string(m.layers) + ")");
    }
    if (m.moe->top_k < 1 || m.moe->top_k > m.moe->experts) {
      return fail("moe.top_k=" + std::to_string(m.moe->top_k) + " must be in [1, experts=" +
                  std::to_string(m.moe->experts) + "]");
    }
  }
  return Status::Ok();
}

}  // namespace shardsim
