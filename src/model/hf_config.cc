// Reads a Hugging Face config.json into a ModelSpec. `model_type` decides the architecture
// details the config leaves implicit (gated MLP, norm kind, positions); see docs/models.md.
// JSON is read with yaml-cpp (YAML 1.2 is a superset of JSON), so errors are located too.
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
struct Family {
  const char* model_type;
  bool gated;
  bool rmsnorm;
  bool rope;
  bool bias;
  bool qkv_bias;
};
constexpr Family kFamilies[] = {
    {"llama", true, true, true, false, false},    {"mistral", true, true, true, false, false},
    {"mixtral", true, true, true, false, false},  {"qwen2", true, true, true, false, true},
    {"qwen2_moe", true, true, true, false, true}, {"gpt_neox", false, false, true, true, false},
    {"gpt2", false, false, false, true, false},
};

Activation ActivationFor(const Family& f) { return f.gated ? Activation::kSwiglu : Activation::kGelu; }

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
  ModelSpec m;
  // A config.json has no name or source: both come from the file's path.
  m.name = std::filesystem::path(name).stem().string();
  m.source = "Hugging Face config.json: " + name;
  m.activation = ActivationFor(*family);
  m.norm = family->rmsnorm ? Norm::kRmsNorm : Norm::kLayerNorm;
  m.position = family->rope ? Position::kRope : Position::kLearned;
  m.bias = family->bias;
  m.qkv_bias = family->qkv_bias;
  if (gpt2) {
    m.hidden = r.Int("n_embd");
    m.layers = r.Int("n_layer");
    m.heads = r.Int("n_head");
    m.kv_heads = m.heads;
    m.seq_len = r.Int("n_positions");
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
    m.seq_len = r.Int("max_position_embeddings");
    m.tied_embeddings = r.OptionalBool("tie_word_embeddings").value_or(false);
    const std::string act = r.OptionalString("hidden_act").value_or(family->gated ? "silu" : "gelu");
    const bool ok = family->gated ? (act == "silu" || act == "swish") : act.rfind("gelu", 0) == 0;
    if (!ok) {
      return Status::Error(name + ": field 'hidden_act': '" + act + "' is not supported for " +
                           family->model_type + "; expected " +
                           (family->gated ? "silu" : "a gelu variant"));
    }
    const std::string mt = family->model_type;
    if (mt == "mixtral") {
      MoeSpec s;
      s.experts = r.Int("num_local_experts", 2);
      s.top_k = r.Int("num_experts_per_tok");
      s.ffn_hidden = m.ffn_hidden;
      m.moe = s;
    } else if (mt == "qwen2_moe") {
      MoeSpec s;
      s.experts = r.Int("num_experts", 2);
      s.top_k = r.Int("num_experts_per_tok");
      s.ffn_hidden = r.Int("moe_intermediate_size");
      s.interval = r.OptionalInt("decoder_sparse_step").value_or(1);
      m.moe = s;
    }
  }
  // Dropout is on when any dropout probability the family uses is above zero (absent = 0).
  for (const char* key : {"attn_pdrop", "embd_pdrop", "resid_pdrop", "attention_dropout",
                          "hidden_dropout", "attention_probs_dropout_prob", "hidden_dropout_prob"}) {
    m.dropout = m.dropout || r.OptionalNumber(key, 0, 1).value_or(0) > 0;
  }
  // RoPE's base: rope_theta (GPT-NeoX: rotary_emb_base); both default to 10000 in transformers'
  // configuration classes (LlamaConfig, GPTNeoXConfig, ...).
  if (family->rope) {
    const char* key = std::string(family->model_type) == "gpt_neox" ? "rotary_emb_base" : "rope_theta";
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
