// Builds the parameter list of a dense decoder-only transformer from a ModelSpec.
// Shapes follow the PyTorch convention for a linear layer, weight (out, in), so that a
// column-parallel shard (split of `out`) is a contiguous block of rows.
#include "runtime/cpu/param_layout.h"

#include <cmath>

#include "src/util/check.h"

namespace shardsim::runtime {

std::string BlockParamName(int64_t layer, std::string_view suffix) {
  return "blocks." + std::to_string(layer) + "." + std::string(suffix);
}

std::string ExpertParamName(int64_t layer, int64_t expert, std::string_view suffix) {
  return "experts." + std::to_string(layer) + "." + std::to_string(expert) + "." + std::string(suffix);
}

bool IsExpertParam(std::string_view name) { return name.rfind("experts.", 0) == 0; }

int64_t ExpertOf(std::string_view name) {
  if (!IsExpertParam(name)) return -1;
  const size_t a = name.find('.', 8);  // after "experts.<l>"
  const size_t b = a == std::string_view::npos ? a : name.find('.', a + 1);
  if (b == std::string_view::npos) return -1;
  return std::stoll(std::string(name.substr(a + 1, b - a - 1)));
}

void ParamLayout::Add(std::string name, int64_t rows, int64_t cols, ParamInit init, double std,
                      bool decay) {
  CHECK(rows > 0 && cols > 0) << name;
  CHECK(Find(name) == nullptr) << "duplicate parameter " << name;
  tensors_.push_back({std::move(name), total_size_, rows, cols, init, std, decay});
  total_size_ += rows * cols;
}

StatusOr<ParamLayout> ParamLayout::ForModel(const ModelSpec& m) {
  if (m.moe && m.bias) {
    return Status::Error("model '" + m.name + "': the CPU runtime trains MoE layers without biases (bias: false)");
  }
  if (m.dropout) {
    return Status::Error("model '" + m.name +
                         "': the CPU runtime does not implement dropout; use dropout: false");
  }
  if (m.qk_norm) {
    return Status::Error("model '" + m.name + "': the CPU runtime does not implement Q/K norms (qk_norm)");
  }
  if (m.final_logit_softcap > 0) {
    return Status::Error("model '" + m.name +
                         "': the CPU runtime does not soft-cap the logits (final_logit_softcap)");
  }
  if (m.attn_logit_softcap > 0) {
    return Status::Error("model '" + m.name +
                         "': the CPU runtime does not soft-cap the attention scores (attn_logit_softcap)");
  }
  if (m.mtp_layers > 0) {
    return Status::Error("model '" + m.name +
                         "': the CPU runtime does not train multi-token prediction "
                         "(mtp_layers " +
                         std::to_string(m.mtp_layers) +
                         "); set mtp_layers: 0 to train the main model");
  }
  if (m.norms_per_layer != 2 || !m.norm_weights || m.sliding_window > 0 || m.mla ||
      (m.moe && m.moe->shared_ffn_hidden > 0)) {
    return Status::Error("model '" + m.name + "': the CPU runtime trains two norms with weights a layer, full "
                         "multi-head attention and no shared experts (norms_per_layer, norm_weights, sliding_window, "
                         "mla, moe.shared_ffn_hidden)");
  }
  if (m.layers <= 0 || m.hidden <= 0 || m.heads <= 0 || m.kv_heads <= 0 || m.head_dim <= 0 ||
      m.ffn_hidden <= 0 || m.vocab <= 0 || m.seq_len <= 0 || m.heads % m.kv_heads != 0) {
    return Status::Error("model '" + m.name + "': shape is not a valid dense transformer");
  }
  if (m.position == Position::kRope && m.head_dim % 2 != 0) {
    return Status::Error("model '" + m.name + "': RoPE needs an even head_dim, got " +
                         std::to_string(m.head_dim));
  }

  const int64_t c = m.hidden;
  const double out_std = kInitStd / std::sqrt(2.0 * static_cast<double>(m.layers));
  ParamLayout p;
  auto norm = [&](const std::string& prefix) {
    p.Add(prefix + ".gain", 1, c, ParamInit::kOnes, 0, false);
    if (m.norm == Norm::kLayerNorm) p.Add(prefix + ".bias", 1, c, ParamInit::kZeros, 0, false);
  };
  // A linear layer y = x W^T + b: W (out, in), b (1, out) when the model has biases (the Q, K
  // and V projections also with qkv_bias alone, as Qwen2).
  auto linear = [&](const std::string& prefix, int64_t out, int64_t in, double std, bool qkv = false) {
    p.Add(prefix + ".weight", out, in, ParamInit::kNormal, std, true);
    if (m.bias || (qkv && m.qkv_bias)) p.Add(prefix + ".bias", 1, out, ParamInit::kZeros, 0, false);
  };

  p.Add("embed.tokens", m.vocab, c, ParamInit::kNormal, kInitStd, true);  // (V, C)
  if (m.position == Position::kLearned) {
    p.Add("embed.positions", m.seq_len, c, ParamInit::kNormal, kInitStd, true);  // (T, C)
  }
  for (int64_t l = 0; l < m.layers; ++l) {
    auto name = [&](std::string_view s) { return BlockParamName(l, s); };
    norm(name("attn_norm"));
    linear(name("attn.q"), m.q_dim(), c, kInitStd, true);   // (H*d, C)
    linear(name("attn.k"), m.kv_dim(), c, kInitStd, true);  // (KV*d, C)
    linear(name("attn.v"), m.kv_dim(), c, kInitStd, true);  // (KV*d, C)
    linear(name("attn.out"), c, m.q_dim(), out_std);  // (C, H*d)
    norm(name("mlp_norm"));
    if (m.IsMoeLayer(l)) {
      linear(name("moe.router"), m.moe->experts, c, kInitStd);  // (E, C); its experts come last
    } else if (m.activation == Activation::kSwiglu) {
      linear(name("mlp.gate"), m.ffn_hidden, c, kInitStd);  // (F, C)
      linear(name("mlp.up"), m.ffn_hidden, c, kInitStd);    // (F, C)
      linear(name("mlp.down"), c, m.ffn_hidden, out_std);   // (C, F)
    } else {
      linear(name("mlp.fc"), m.ffn_hidden, c, kInitStd);   // (F, C)
      linear(name("mlp.proj"), c, m.ffn_hidden, out_std);  // (C, F)
    }
  }
  norm("final_norm");
  if (!m.tied_embeddings) {
    p.Add("lm_head.weight", m.vocab, c, ParamInit::kNormal, kInitStd, true);  // (V, C)
  }
  for (int64_t l = 0; m.moe && l < m.layers; ++l) {
    if (!m.IsMoeLayer(l)) continue;
    const int64_t f = m.moe->ffn_hidden;
    for (int64_t e = 0; e < m.moe->experts; ++e) {
      auto name = [&](std::string_view s) { return ExpertParamName(l, e, s); };
      if (m.activation == Activation::kSwiglu) {
        linear(name("gate"), f, c, kInitStd);  // (F_e, C)
        linear(name("up"), f, c, kInitStd);    // (F_e, C)
        linear(name("down"), c, f, out_std);   // (C, F_e)
      } else {
        linear(name("fc"), f, c, kInitStd);
        linear(name("proj"), c, f, out_std);
      }
    }
  }
  return p;
}

const ParamTensor* ParamLayout::Find(std::string_view name) const {
  for (const ParamTensor& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

const ParamTensor& ParamLayout::Get(std::string_view name) const {
  const ParamTensor* t = Find(name);
  CHECK(t != nullptr) << "no parameter named " << name;
  return *t;
}

int64_t ParamLayout::OffsetOf(std::string_view name) const {
  const ParamTensor* t = Find(name);
  return t ? t->offset : -1;
}

ParamLayout ParamLayout::Select(const std::function<bool(const ParamTensor&)>& keep) const {
  ParamLayout out;
  for (const ParamTensor& t : tensors_) {
    if (keep(t)) out.Add(t.name, t.rows, t.cols, t.init, t.init_std, t.weight_decay);
  }
  return out;
}

}  // namespace shardsim::runtime
