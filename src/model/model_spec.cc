// Parameter counting and consistency checks for ModelSpec.
// Dense counts follow Narayanan et al. 2021 (SC'21), eq. for P: per layer 12h^2 + 13h with
// biases, LayerNorm and a 4h GELU MLP; the general form below reduces to it.
#include "src/model/model_spec.h"

namespace shardsim {

int64_t ModelSpec::MoeLayerCount() const {
  if (!moe) return 0;
  return (layers + moe->interval - 1) / moe->interval;
}

int64_t ModelSpec::AttentionParams() const {
  const int64_t qkv = hidden * (q_dim() + 2 * kv_dim()) + (HasQkvBias() ? q_dim() + 2 * kv_dim() : 0);
  const int64_t proj = q_dim() * hidden + (bias ? hidden : 0);
  return qkv + proj + (qk_norm ? 2 * head_dim : 0);
}

int64_t ModelSpec::MlpParams(int64_t ffn) const {
  if (activation == Activation::kSwiglu) {
    // gate and up (h x f each), down (f x h)
    return 3 * hidden * ffn + (bias ? 2 * ffn + hidden : 0);
  }
  return 2 * hidden * ffn + (bias ? ffn + hidden : 0);
}

int64_t ModelSpec::NormParams() const { return norm == Norm::kLayerNorm ? 2 * hidden : hidden; }

int64_t ModelSpec::DenseLayerParams() const {
  return AttentionParams() + MlpParams(ffn_hidden) + 2 * NormParams();
}

int64_t ModelSpec::MoeLayerParams() const {
  if (!moe) return DenseLayerParams();
  const int64_t router = hidden * moe->experts;
  return AttentionParams() + moe->experts * MlpParams(moe->ffn_hidden) + router + SharedExpertParams() +
         2 * NormParams();
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

int64_t ModelSpec::TotalParams() const {
  const int64_t moe_layers = MoeLayerCount();
  return (layers - moe_layers) * DenseLayerParams() + moe_layers * MoeLayerParams() +
         EmbeddingParams() + HeadParams();
}

int64_t ModelSpec::ActiveParams() const {
  if (!moe) return TotalParams();
  const int64_t inactive = (moe->experts - moe->top_k) * MlpParams(moe->ffn_hidden);
  return TotalParams() - MoeLayerCount() * inactive;
}

int64_t ModelSpec::SharedExpertParams() const {
  if (!moe || moe->shared_ffn_hidden <= 0) return 0;
  return MlpParams(moe->shared_ffn_hidden) + (moe->shared_gate ? hidden : 0);
}

double ModelSpec::AttentionSpan() const {
  const double s = static_cast<double>(seq_len);
  if (sliding_window <= 0 || sliding_window >= seq_len) return s;
  const double w = static_cast<double>(sliding_window);
  const double causal = s * (s + 1) / 2, windowed = w * (w + 1) / 2 + (s - w) * w;
  return s * windowed / causal;
}

Status ValidateModel(const ModelSpec& m, const std::string& origin) {
  auto fail = [&](const std::string& what) { return Status::Error(origin + ": " + what); };
  if (m.heads % m.kv_heads != 0) {
    return fail("kv_heads=" + std::to_string(m.kv_heads) + " must divide heads=" +
                std::to_string(m.heads));
  }
  if (m.head_dim <= 0) return fail("head_dim must be positive");
  if (m.sliding_window < 0) return fail("sliding_window must be positive (or absent: no window)");
  if (m.moe) {
    if (m.moe->experts < 2) return fail("moe.experts must be at least 2");
    if (m.moe->shared_ffn_hidden < 0) return fail("moe.shared_ffn_hidden must not be negative");
    if (m.moe->top_k < 1 || m.moe->top_k > m.moe->experts) {
      return fail("moe.top_k=" + std::to_string(m.moe->top_k) + " must be in [1, experts=" +
                  std::to_string(m.moe->experts) + "]");
    }
  }
  return Status::Ok();
}

}  // namespace shardsim
