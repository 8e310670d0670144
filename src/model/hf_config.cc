// Reads a Hugging Face config.json into a ModelSpec. `model_type` decides the architecture
// details the config leaves implicit (gated MLP, norm kind, positions); see docs/models.md.
// JSON is read with yaml-cpp (YAML 1.2 is a superset of JSON), so errors are located too.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "src/io/yaml_reader.h"
#include "src/model/model_spec.h"
#include "src/util/strings.h"

namespace shardsim {
namespace {

// Families shardsim knows: (model_type, gated MLP, RMSNorm, RoPE, linear biases, Q/K/V
// biases). Qwen2's attention builds q_proj, k_proj and v_proj with bias=True and o_proj
// without (transformers models/qwen2/modeling_qwen2.py, Qwen2Attention; also qwen2_moe).
// Qwen3 (qwen3, qwen3_moe) drops Qwen2's Q/K/V biases for `attention_bias` (default false) and
// normalises each head's queries and keys (Qwen3Attention.q_norm, k_norm: RMSNorm over
// head_dim, transformers models/qwen3/modeling_qwen3.py).
struct Family {
  const char* model_type;
  bool gated;
  bool rmsnorm;
  bool rope;
  bool bias;
  bool qkv_bias;
  bool qk_norm;
};
constexpr Family kFamilies[] = {
    {"llama", true, true, true, false, false, false},    {"mistral", true, true, true, false, false, false},
    {"mixtral", true, true, true, false, false, false},  {"qwen2", true, true, true, false, true, false},
    {"qwen2_moe", true, true, true, false, true, false}, {"qwen3", true, true, true, false, false, true},
    {"qwen3_moe", true, true, true, false, false, true}, {"gpt_neox", false, false, true, true, false, false},
    {"gpt2", false, false, false, true, false, false},
};

// The training sequence length a config that states none gets: the longest context the
// config allows, at most this (Llama 3's and Gemma 2's pre-training length; many others
// pre-train at 4096: DeepSeek-V3, Qwen2.5, OLMo 2), or the context before a long-context
// extension (rope_scaling.original_max_position_embeddings) when that is shorter.
constexpr int64_t kHfDefaultSeqLen = 8192;

Activation ActivationFor(const Family& f) { return f.gated ? Activation::kSwiglu : Activation::kGelu; }

// The report's name: `_name_or_path`'s last part; else, for a file named config.json, its
// folder's name; else the file's stem; the architecture when that leaves only "config".
std::string ModelName(YamlMap& r, const std::string& path) {
  namespace fs = std::filesystem;
  if (std::optional<std::string> n = r.OptionalString("_name_or_path")) {
    std::string v = *n;
    while (!v.empty() && v.back() == '/') v.pop_back();
    const size_t slash = v.rfind('/');
    if (!v.empty()) return slash == std::string::npos ? v : v.substr(slash + 1);
  }
  const fs::path p(path);
  std::string name = p.stem().string();
  if (p.filename() == "config.json") {
    std::error_code ec;
    const fs::path folder = fs::absolute(p, ec).parent_path().filename();
    if (!ec && !folder.empty() && folder != "." && folder != "/") name = folder.string();
  }
  if (name.empty() || name == "config") {
    if (std::optional<std::vector<std::string>> a = r.OptionalStringList("architectures"); a && !a->empty()) {
      return (*a)[0];
    }
  }
  return name.empty() ? "config" : name;
}

}  // namespace

StatusOr<ModelSpec> ParseHfConfig(const std::string& text, const std::string& name) {
  SHARDSIM_ASSIGN_OR_RETURN(YamlFile file, YamlFile::Parse(text, name));
  YamlMap r = file.Root();
  const std::optional<std::string> type = r.OptionalString("model_type");
  SHARDSIM_RETURN_IF_ERROR(file.status());
  std::vector<std::string> known;
  const Family* family = nullptr;
  for (const Family& f : kFamilies) {
    known.push_back(f.model_type);
    if (type && *type == f.model_type) family = &f;
  }
  if (!type) return Status::Error(name + ": field 'model_type': missing; cannot tell the family");
  if (!family) {
    return Status::Error(name + ": field 'model_type': unsupported model_type '" + *type + "'" +
                         DidYouMean(*type, known) + "; supported: " + Join(known, ", "));
  }
  const bool gpt2 = std::string(family->model_type) == "gpt2";
  const std::string mt = family->model_type;
  ModelSpec m;
  m.name = ModelName(r, name);
  m.source = "Hugging Face config.json: " + name;
  m.activation = ActivationFor(*family);
  m.norm = family->rmsnorm ? Norm::kRmsNorm : Norm::kLayerNorm;
  m.position = family->rope ? Position::kRope : Position::kLearned;
  m.bias = family->bias;
  m.qkv_bias = family->qkv_bias;
  m.qk_norm = family->qk_norm;
  int64_t context = 0;          // the longest sequence the config allows
  const char* context_key = "";  // and where it says so
  if (gpt2) {
    m.hidden = r.Int("n_embd");
    m.layers = r.Int("n_layer");
    m.heads = r.Int("n_head");
    m.kv_heads = m.heads;
    context = r.Int("n_positions");
    context_key = "n_positions";
    // n_inner: null means 4 * n_embd (transformers' GPT2MLP).
    m.ffn_hidden = r.OptionalInt("n_inner").value_or(4 * m.hidden);  // null: 4 * n_embd
    m.tied_embeddings = r.OptionalBool("tie_word_embeddings").value_or(true);
    const std::string act = r.OptionalString("activation_function").value_or("gelu_new");
    if (act.rfind("gelu", 0) != 0) {
      return Status::Error(name + ": field 'activation_function': '" + act +
                           "' is not supported; expected a gelu variant");
    }
  } else {
    m.hidden = r.Int("hidden_size");
    m.layers = r.Int("num_hidden_layers");
    m.heads = r.Int("num_attention_heads");
    m.kv_heads = r.OptionalInt("num_key_value_heads").value_or(m.heads);
    m.ffn_hidden = r.Int("intermediate_size");
    context = r.Int("max_position_embeddings");
    context_key = "max_position_embeddings";
    m.tied_embeddings = r.OptionalBool("tie_word_embeddings").value_or(false);
    const std::string act = r.OptionalString("hidden_act").value_or(family->gated ? "silu" : "gelu");
    const bool ok = family->gated ? (act == "silu" || act == "swish") : act.rfind("gelu", 0) == 0;
    if (!ok) {
      return Status::Error(name + ": field 'hidden_act': '" + act + "' is not supported for " +
                           family->model_type + "; expected " +
                           (family->gated ? "silu" : "a gelu variant"));
    }
    if (mt == "mixtral") {
      MoeSpec s;
      s.experts = r.Int("num_local_experts", 2);
      s.top_k = r.Int("num_experts_per_tok");
      s.ffn_hidden = m.ffn_hidden;
      m.moe = s;
    } else if (mt == "qwen2_moe" || mt == "qwen3_moe") {
      MoeSpec s;
      s.experts = r.Int("num_experts", 2);
      s.top_k = r.Int("num_experts_per_tok");
      s.ffn_hidden = r.Int("moe_intermediate_size");
      s.interval = r.OptionalInt("decoder_sparse_step").value_or(1);
      // Qwen2MoeSparseMoeBlock: a shared expert MLP of shared_expert_intermediate_size with a
      // sigmoid gate, shared_expert_gate = nn.Linear(hidden_size, 1, bias=False)
      // (transformers models/qwen2_moe/modeling_qwen2_moe.py); Qwen3-MoE has none.
      s.shared_ffn_hidden = r.OptionalInt("shared_expert_intermediate_size", 0).value_or(0);
      s.shared_gate = s.shared_ffn_hidden > 0;
      m.moe = s;
      if (r.Has("mlp_only_layers")) {
        const std::optional<std::vector<long long>> dense = r.OptionalIntList("mlp_only_layers", 0);
        if (dense && !dense->empty()) {
          m.not_modelled.push_back("mlp_only_layers: " + std::to_string(dense->size()) +
                                   " dense layers among the MoE ones are priced as MoE layers");
        }
      }
    }
    // Biases the family's linear layers take from the config (LlamaConfig, Qwen3Config:
    // attention_bias on Q, K, V and O; mlp_bias on the MLP).
    if (r.OptionalBool("attention_bias").value_or(false) && !m.bias) {
      m.qkv_bias = true;
      m.not_modelled.push_back("attention_bias: the output projection's bias (" + std::to_string(m.hidden) +
                               " parameters a layer) is not counted; the Q, K and V biases are");
    }
    if (r.OptionalBool("mlp_bias").value_or(false) && !m.bias) {
      m.not_modelled.push_back("mlp_bias: the MLP's biases are not counted");
    }
    // Sliding-window attention: Mistral's and Mixtral's sliding_window (null: none) in every
    // layer (transformers MistralAttention); Qwen2's only with use_sliding_window, and then from
    // layer max_window_layers on, a per-layer pattern not modelled.
    if (mt == "mistral" || mt == "mixtral") {
      m.sliding_window = r.OptionalInt("sliding_window").value_or(0);
    } else if (r.OptionalBool("use_sliding_window").value_or(false)) {
      if (const std::optional<long long> w = r.OptionalInt("sliding_window")) {
        m.not_modelled.push_back("sliding_window " + std::to_string(*w) + " from layer max_window_layers on: "
                                 "attention is priced over the whole sequence, which is exact up to " +
                                 std::to_string(*w) + " tokens");
      }
    }
  }
  // The sequence length: a config states the context the model allows, not what it was
  // trained on; the default and its notice (model_spec.h seq_len_default).
  int64_t original = 0;
  if (std::optional<YamlMap> scaling = r.OptionalMap("rope_scaling")) {
    original = scaling->OptionalInt("original_max_position_embeddings").value_or(0);
  }
  if (original > 0 && original < context && original <= kHfDefaultSeqLen) {
    m.seq_len = original;
    m.seq_len_default = "sequence length " + std::to_string(m.seq_len) +
                        " tokens: rope_scaling.original_max_position_embeddings, the context before the long-context "
                        "extension to " + std::to_string(context) + " (a Hugging Face config states no training length; --seq-len sets it)";
  } else {
    m.seq_len = std::min(context, kHfDefaultSeqLen);
    m.seq_len_default = "sequence length " + std::to_string(m.seq_len) + " tokens: " +
                        (context <= kHfDefaultSeqLen ? std::string(context_key) + ", the context the config allows"
                                                     : "the default for a Hugging Face config (its " + std::string(context_key) + " " +
                                                           std::to_string(context) + " is a context limit)") +
                        " (a Hugging Face config states no training length; --seq-len sets it)";
  }
  // Dropout is on when any dropout probability the family uses is above zero (absent = 0).
  for (const char* key : {"attn_pdrop", "embd_pdrop", "resid_pdrop", "attention_dropout",
                          "hidden_dropout", "attention_probs_dropout_prob", "hidden_dropout_prob"}) {
    m.dropout = m.dropout || r.OptionalNumber(key, 0, 1).value_or(0) > 0;
  }
  // RoPE's base: rope_theta (GPT-NeoX: rotary_emb_base); both default to 10000 in transformers'
  // configuration classes (LlamaConfig, GPTNeoXConfig, ...).
  if (family->rope) {
    const char* key = mt == "gpt_neox" ? "rotary_emb_base" : "rope_theta";
    m.rotary_base = r.OptionalNumber(key, 1, 1e12).value_or(10000);
  }
  m.vocab = r.Int("vocab_size");
  m.head_dim = r.OptionalInt("head_dim").value_or(m.heads > 0 ? m.hidden / m.heads : 0);
  SHARDSIM_RETURN_IF_ERROR(file.status());
  SHARDSIM_RETURN_IF_ERROR(ValidateModel(m, name));
  return m;
}

StatusOr<ModelSpec> LoadHfConfig(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error(path + ": cannot open file");
  std::ostringstream text;
  text << in.rdbuf();
  return ParseHfConfig(text.str(), path);
}

}  // namespace shardsim
