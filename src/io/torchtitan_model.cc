// See torchtitan_model.h. The flavor table is torchtitan/models/llama3/__init__.py's
// llama3_args at pytorch/torchtitan v0.2.2 (73a0e6979); tests/torchtitan_test.cc checks
// each flavor's FFN size against the figure its model card states.
#include "src/io/torchtitan_model.h"

#include <cmath>
#include <cstdlib>

#include "src/util/strings.h"

namespace shardsim {
namespace {

// "%.*f" with the fewest digits that read back as `v` (at most 17 significant digits).
std::string ShortDecimal(double v) {
  for (int digits = 0; digits <= 17; ++digits) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", digits, v);
    if (std::strtod(buf, nullptr) == v) return buf;
  }
  return Fmt("%.17g", v);
}

int64_t RoundUp(int64_t v, int64_t to) { return to * ((v + to - 1) / to); }

}  // namespace

int64_t Llama3FfnHidden(const Llama3Args& a) {
  // hidden_dim = int(2 * (4 * dim) / 3): Python's true division, then truncation; exact in
  // integers for any dim below 2^50.
  int64_t hidden = 8 * a.dim / 3;
  if (a.ffn_dim_multiplier) hidden = static_cast<int64_t>(*a.ffn_dim_multiplier * static_cast<double>(hidden));
  return RoundUp(hidden, a.multiple_of);
}

const std::map<std::string, Llama3Args>& Llama3Flavors() {
  // dim, n_layers, n_heads, n_kv_heads (0: None), vocab_size, multiple_of, ffn_dim_multiplier
  // (0: None), rope_theta, as llama3_args writes them (defaults filled in).
  auto flavor = [](int64_t dim, int64_t layers, int64_t heads, int64_t kv, int64_t vocab, int64_t multiple_of,
                   double multiplier, double rope) {
    Llama3Args a;
    a.dim = dim;
    a.n_layers = layers;
    a.n_heads = heads;
    a.n_kv_heads = kv;
    a.vocab_size = vocab;
    a.multiple_of = multiple_of;
    if (multiplier > 0) a.ffn_dim_multiplier = multiplier;
    a.rope_theta = rope;
    return a;
  };
  static const auto* kFlavors = new std::map<std::string, Llama3Args>{
      {"debugmodel", flavor(256, 6, 16, 0, 2048, 256, 0, 500000)},
      {"8B", flavor(4096, 32, 32, 8, 128256, 1024, 1.3, 500000)},
      {"70B", flavor(8192, 80, 64, 8, 128256, 4096, 1.3, 500000)},
      {"405B", flavor(16384, 126, 128, 8, 128256, 4096, 1.2, 500000)},
  };
  return *kFlavors;
}

ModelSpec Llama3Model(const std::string& flavor, const Llama3Args& a, int64_t seq_len) {
  ModelSpec m;
  m.name = flavor;
  m.source = "torchtitan v0.2.2 llama3 flavor " + flavor;
  m.layers = a.n_layers;
  m.hidden = a.dim;
  m.heads = a.n_heads;
  m.kv_heads = a.n_kv_heads > 0 ? a.n_kv_heads : a.n_heads;
  m.head_dim = a.n_heads > 0 ? a.dim / a.n_heads : 0;  // Attention: head_dim = dim // n_heads
  m.ffn_hidden = Llama3FfnHidden(a);
  m.vocab = a.vocab_size;
  m.seq_len = seq_len;
  m.activation = Activation::kSwiglu;
  m.norm = Norm::kRmsNorm;
  m.position = Position::kRope;
  m.rotary_base = a.rope_theta;
  return m;
}

StatusOr<Llama3Args> Llama3ArgsFor(const ModelSpec& m) {
  std::vector<std::string> not_llama;
  if (m.norm != Norm::kRmsNorm) not_llama.push_back("LayerNorm (llama3 has RMSNorm)");
  if (m.activation != Activation::kSwiglu) not_llama.push_back("a GELU MLP (llama3's is SwiGLU)");
  if (m.position != Position::kRope) not_llama.push_back("learned positions (llama3 has RoPE)");
  if (m.HasQkvBias()) not_llama.push_back("linear biases (llama3 has none)");
  if (m.tied_embeddings) not_llama.push_back("tied embeddings (llama3's output layer is its own)");
  if (m.moe) not_llama.push_back("experts (llama3 is dense)");
  if (m.dropout) not_llama.push_back("dropout (llama3 has none)");
  if (m.qk_norm) not_llama.push_back("Q/K norms (llama3 has none)");
  if (m.sliding_window > 0) not_llama.push_back("a sliding window (llama3 attends the whole causal prefix)");
  if (m.mla) not_llama.push_back("multi-head latent attention (llama3's is grouped-query)");
  if (m.mtp_layers > 0)
    not_llama.push_back("multi-token prediction (llama3 predicts the next token only)");
  if (m.final_logit_softcap > 0) not_llama.push_back("soft-capped logits (llama3's are not)");
  if (m.attn_logit_softcap > 0) not_llama.push_back("soft-capped attention scores (llama3's are not)");
  if (m.norms_per_layer != 2 || !m.norm_weights) {
    not_llama.push_back(std::to_string(m.norms_per_layer) + " norms a layer" + (m.norm_weights ? "" : " without weights") +
                        " (llama3 has 2 RMSNorms with weights)");
  }
  if (m.heads <= 0 || m.hidden % m.heads != 0 || m.head_dim != m.hidden / m.heads) {
    not_llama.push_back("a head size of " + std::to_string(m.head_dim) + " (llama3's is dim / n_heads = " +
                        (m.heads > 0 ? std::to_string(m.hidden / m.heads) : std::string("?")) + ")");
  }
  if (!not_llama.empty()) {
    return Status::Error(m.name + " is not a model torchtitan v0.2.2's llama3 builds (RMSNorm, SwiGLU, RoPE, "
                         "no biases, untied output, dense, head size dim / n_heads): it has " +
                         Join(not_llama, ", "));
  }
  Llama3Args a;
  a.dim = m.hidden;
  a.n_layers = m.layers;
  a.n_heads = m.heads;
  a.n_kv_heads = m.kv_heads;
  a.vocab_size = m.vocab;
  a.rope_theta = m.rotary_base > 0 ? m.rotary_base : 10000;
  // The FFN size from multiple_of alone, else from the shortest decimal multiplier; the
  // largest power-of-two multiple_of first (torchtitan's flavors use 256 to 4096).
  for (int digits = -1; digits <= 8; ++digits) {
    for (int64_t mo = 4096; mo >= 1; mo /= 2) {
      if (m.ffn_hidden % mo != 0) continue;
      a.multiple_of = mo;
      a.ffn_dim_multiplier.reset();
      if (digits >= 0) {
        const double base = static_cast<double>(8 * a.dim / 3);
        const double scale = std::pow(10.0, digits);
        a.ffn_dim_multiplier = std::strtod(ShortDecimal(std::round(static_cast<double>(m.ffn_hidden) / base * scale) / scale).c_str(), nullptr);
        if (*a.ffn_dim_multiplier <= 0) continue;
      }
      if (Llama3FfnHidden(a) == m.ffn_hidden) return a;
    }
  }
  return Status::Error(m.name + ": no multiple_of and ffn_dim_multiplier of torchtitan's llama3 give an FFN size of " +
                       std::to_string(m.ffn_hidden) + " at dim " + std::to_string(m.hidden));
}

std::optional<std::string> Llama3FlavorOf(const ModelSpec& m) {
  for (const auto& [name, f] : Llama3Flavors()) {
    if (Llama3Mismatches(m, Llama3Model(name, f, m.seq_len)).empty()) return name;
  }
  return std::nullopt;
}

std::string Llama3Registration(const std::string& flavor, const Llama3Args& a) {
  std::string s = "\"" + flavor + "\": TransformerModelArgs(dim=" + std::to_string(a.dim) +
                  ", n_layers=" + std::to_string(a.n_layers) + ", n_heads=" + std::to_string(a.n_heads) +
                  ", n_kv_heads=" + std::to_string(a.n_kv_heads > 0 ? a.n_kv_heads : a.n_heads) +
                  ", vocab_size=" + std::to_string(a.vocab_size) + ", multiple_of=" + std::to_string(a.multiple_of);
  if (a.ffn_dim_multiplier) s += ", ffn_dim_multiplier=" + ShortDecimal(*a.ffn_dim_multiplier);
  return s + ", rope_theta=" + ShortDecimal(a.rope_theta) + "),";
}

StatusOr<std::pair<std::string, Llama3Args>> ParseLlama3Registration(const std::string& line) {
  const std::string kCall = ": TransformerModelArgs(";
  const std::string t = Trim(line);
  const size_t call = t.find(kCall);
  if (t.empty() || t[0] != '"' || call == std::string::npos || call < 2 || t[call - 1] != '"') {
    return Status::Error("expected \"<flavor>\": TransformerModelArgs(name=value, ...), found '" + t + "'");
  }
  const std::string flavor = t.substr(1, call - 2);
  const size_t close = t.rfind(')');
  if (close == std::string::npos || close < call) return Status::Error("TransformerModelArgs( is not closed with ')'");
  static const std::vector<std::string> kFields = {"dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size",
                                                   "multiple_of", "ffn_dim_multiplier", "rope_theta"};
  Llama3Args a;
  for (const std::string& arg : Split(t.substr(call + kCall.size(), close - call - kCall.size()), ',')) {
    const std::string kv = Trim(arg);
    if (kv.empty()) continue;
    const size_t eq = kv.find('=');
    if (eq == std::string::npos) return Status::Error("TransformerModelArgs: expected name=value, found '" + kv + "'");
    const std::string key = Trim(kv.substr(0, eq)), value = Trim(kv.substr(eq + 1));
    bool known = false;
    for (const std::string& f : kFields) known = known || f == key;
    if (!known) {
      return Status::Error("TransformerModelArgs: '" + key + "' is not a field shardsim reads (" + Join(kFields, ", ") +
                           ")" + DidYouMean(key, kFields));
    }
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    const bool none = value == "None";
    if (!none && (end != value.c_str() + value.size() || !std::isfinite(v) || v <= 0)) {
      return Status::Error("TransformerModelArgs: " + key + ": expected a positive number, found '" + value + "'");
    }
    const bool integral = !none && v == std::floor(v) && v < 1e15;
    if (key == "ffn_dim_multiplier") {
      a.ffn_dim_multiplier = none ? std::nullopt : std::optional<double>(v);
      continue;
    }
    if (key == "n_kv_heads" && none) {
      a.n_kv_heads = 0;
      continue;
    }
    if (key == "rope_theta" && !none) {
      a.rope_theta = v;
      continue;
    }
    if (!integral) return Status::Error("TransformerModelArgs: " + key + ": expected a positive integer, found '" + value + "'");
    const int64_t n = static_cast<int64_t>(v);
    if (key == "dim") a.dim = n;
    if (key == "n_layers") a.n_layers = n;
    if (key == "n_heads") a.n_heads = n;
    if (key == "n_kv_heads") a.n_kv_heads = n;
    if (key == "vocab_size") a.vocab_size = n;
    if (key == "multiple_of") a.multiple_of = n;
  }
  if (a.n_heads <= 0 || a.dim % a.n_heads != 0) {
    return Status::Error("TransformerModelArgs: dim " + std::to_string(a.dim) + " is not a multiple of n_heads " +
                         std::to_string(a.n_heads));
  }
  return std::make_pair(flavor, a);
}

std::vector<std::string> Llama3Mismatches(const ModelSpec& m, const ModelSpec& r) {
  std::vector<std::string> out;
  auto cmp = [&](const std::string& what, int64_t read, int64_t model) {
    if (read != model) out.push_back(what + " " + std::to_string(read) + ", the model has " + std::to_string(model));
  };
  cmp("n_layers", r.layers, m.layers);
  cmp("dim", r.hidden, m.hidden);
  cmp("n_heads", r.heads, m.heads);
  cmp("n_kv_heads", r.kv_heads, m.kv_heads);
  cmp("head size (dim / n_heads)", r.head_dim, m.head_dim);
  cmp("FFN hidden size (multiple_of, ffn_dim_multiplier)", r.ffn_hidden, m.ffn_hidden);
  cmp("vocab_size", r.vocab, m.vocab);
  cmp("training.seq_len", r.seq_len, m.seq_len);
  auto flag = [&](const std::string& what, bool read, bool model) {
    if (read != model) out.push_back(what + (read ? " yes" : " no") + ", the model has" + (model ? " yes" : " no"));
  };
  flag("SwiGLU MLP", r.activation == Activation::kSwiglu, m.activation == Activation::kSwiglu);
  flag("RMSNorm", r.norm == Norm::kRmsNorm, m.norm == Norm::kRmsNorm);
  flag("RoPE", r.position == Position::kRope, m.position == Position::kRope);
  flag("tied embeddings", r.tied_embeddings, m.tied_embeddings);
  flag("linear biases", r.HasQkvBias(), m.HasQkvBias());
  flag("experts", r.moe.has_value(), m.moe.has_value());
  if (m.rotary_base > 0 && r.rotary_base != m.rotary_base) {
    out.push_back("rope_theta " + ShortDecimal(r.rotary_base) + ", the model has " + ShortDecimal(m.rotary_base));
  }
  return out;
}

}  // namespace shardsim
