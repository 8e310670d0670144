// Reads a Hugging Face config.json into a ModelSpec. `model_type` decides the architecture
// details the config leaves implicit (gated MLP, norm kind, positions); see docs/models.md.
// JSON is read with yaml-cpp (YAML 1.2 is a superset of JSON), so errors are located too.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "src/io/yaml_reader.h"
#include "src/model/model_spec.h"
#include "src/util/atomic_file.h"
#include "src/util/strings.h"

namespace shardsim {
namespace {

// Families shardsim knows: (model_type, gated MLP, RMSNorm, RoPE, linear biases, Q/K/V
// biases). Qwen2's attention builds q_proj, k_proj and v_proj with bias=True and o_proj
// without (transformers models/qwen2/modeling_qwen2.py, Qwen2Attention; also qwen2_moe).
// Qwen3 (qwen3, qwen3_moe) drops Qwen2's Q/K/V biases for `attention_bias` (default false) and
// normalises each head's queries and keys (Qwen3Attention.q_norm, k_norm: RMSNorm over
// head_dim, transformers models/qwen3/modeling_qwen3.py).
// Phi-3 is Llama's architecture with fused qkv_proj and gate_up_proj (the same parameters;
// transformers models/phi3/modeling_phi3.py). Gemma 2 and 3 gate their MLP with GELU (tanh
// approximation, `hidden_activation`; priced as the gated MLP it is, 3 projections), put a
// norm after each branch too (4 a layer), tie their embeddings by default and state head_dim;
// Gemma 3 also normalises Q and K per head (transformers models/gemma2, models/gemma3).
// OLMo's LayerNorm has no weights (OlmoLayerNorm); OLMo 2 puts RMSNorms after each branch (2
// a layer, as many as before) and normalises all queries and all keys (q_norm, k_norm over
// q_dim and kv_dim; transformers models/olmo, models/olmo2). Falcon: GELU MLP of
// ffn_hidden_size (4h), LayerNorm, biases as `bias`, multi-query attention (one K/V head)
// unless new_decoder_architecture (num_kv_heads), attention and MLP in parallel off one norm
// (two with new_decoder_architecture: num_ln_in_parallel_attn), tied embeddings
// (transformers models/falcon/modeling_falcon.py). DeepSeek-V2/V3: multi-head latent attention
// and MoE with shared experts after first_k_dense_replace dense layers (models/deepseek_v3).
struct Family {
  const char* model_type;
  bool gated;
  bool rmsnorm;
  bool rope;
  bool bias;
  bool qkv_bias;
  bool qk_norm;
  bool gelu_gated = false;  // the gate's activation is GELU (Gemma), not SiLU
  int norms = 2;            // norms per layer
  bool tied = false;        // tie_word_embeddings' default
};
constexpr Family kFamilies[] = {
    {"llama", true, true, true, false, false, false},    {"mistral", true, true, true, false, false, false},
    {"mixtral", true, true, true, false, false, false},  {"qwen2", true, true, true, false, true, false},
    {"qwen2_moe", true, true, true, false, true, false}, {"qwen3", true, true, true, false, false, true},
    {"qwen3_moe", true, true, true, false, false, true}, {"phi3", true, true, true, false, false, false},
    {"gemma2", true, true, true, false, false, false, true, 4, true},
    {"gemma3_text", true, true, true, false, false, true, true, 4, true},
    {"olmo", true, false, true, false, false, false},    {"olmo2", true, true, true, false, false, true},
    {"falcon", false, false, true, false, false, false}, {"deepseek_v2", true, true, true, false, false, false},
    {"deepseek_v3", true, true, true, false, false, false},  {"llama4", true, true, true, false, false, false},
    {"llama4_text", true, true, true, false, false, false},
    {"gpt_neox", false, false, true, true, false, false},
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

std::string Num(double v) {
  std::ostringstream o;
  o << v;
  return o.str();
}

// Hugging Face's MoE step (Qwen2MoeDecoderLayer's decoder_sparse_step, Llama 4's
// interleave_moe_layer_step): layer i is sparse when (i + 1) % step == 0, so the first sparse
// layer is step - 1 and every step-th one after it.
void SparseEveryStep(MoeSpec& s, int64_t step, int64_t layers) {
  s.interval = step;
  s.first_dense = std::min<int64_t>(step - 1, std::max<int64_t>(layers - 1, 0));
}

// Falcon's own key names (FalconConfig; the first released configs wrote n_layer, n_head,
// n_head_kv, and state no max_position_embeddings: 2048).
void ReadFalcon(YamlMap& r, ModelSpec& m, int64_t& context) {
  m.hidden = r.Has("n_embed") ? r.Int("n_embed") : r.Int("hidden_size");
  m.layers = r.Has("n_layer") ? r.Int("n_layer") : r.Int("num_hidden_layers");
  m.heads = r.Has("n_head") ? r.Int("n_head") : r.Int("num_attention_heads");
  const bool new_arch = r.OptionalBool("new_decoder_architecture").value_or(false);
  const bool multi_query = r.OptionalBool("multi_query").value_or(true);
  const bool parallel = r.OptionalBool("parallel_attn").value_or(true);
  const int64_t kv = r.Has("n_head_kv") ? r.Int("n_head_kv") : r.OptionalInt("num_kv_heads").value_or(m.heads);
  // FalconAttention: num_kv_heads when new_decoder_architecture or not multi_query, else 1.
  m.kv_heads = new_arch || !multi_query ? kv : 1;
  m.ffn_hidden = r.OptionalInt("ffn_hidden_size").value_or(4 * m.hidden);
  m.bias = r.OptionalBool("bias").value_or(false);
  m.tied_embeddings = r.OptionalBool("tie_word_embeddings").value_or(true);
  context = r.OptionalInt("max_position_embeddings").value_or(2048);
  // FalconDecoderLayer: ln_attn and ln_mlp (num_ln_in_parallel_attn, default 2) with
  // new_decoder_architecture; else input_layernorm, and post_attention_layernorm unless parallel.
  m.norms_per_layer = new_arch ? r.OptionalInt("num_ln_in_parallel_attn").value_or(2) : parallel ? 1 : 2;
  const std::string act = r.OptionalString("activation").value_or("gelu");
  if (act.rfind("gelu", 0) != 0) {
    r.Error("activation", "'" + act + "' is not supported for falcon; expected a gelu variant");
  }
  if (parallel || new_arch) {
    m.not_modelled.push_back("parallel_attn: attention and MLP run side by side off the layer input; priced as "
                             "one after the other (the same FLOPs and parameters)");
  }
  if (r.OptionalBool("alibi").value_or(false)) {
    m.not_modelled.push_back("alibi: the attention bias is not priced (as RoPE, no parameters)");
  }
}

// Gemma 2 and 3: sliding-window attention on some layers (layer_types where the config lists
// them; else Gemma 2's every other layer, Gemma2DecoderLayer is_sliding = not layer_idx % 2,
// or Gemma 3's sliding_window_pattern, layer i global when (i + 1) % pattern == 0), soft-capping.
void ReadGemmaAttention(YamlMap& r, const std::string& mt, ModelSpec& m) {
  if (const std::optional<long long> w = r.OptionalInt("sliding_window")) {
    m.sliding_window = *w;
    if (std::optional<std::vector<std::string>> types = r.OptionalStringList("layer_types")) {
      m.full_attention_layers = std::count(types->begin(), types->end(), std::string("full_attention"));
    } else if (mt == "gemma2") {
      m.full_attention_layers = m.layers / 2;  // the odd layers
    } else {
      const int64_t pattern = r.OptionalInt("sliding_window_pattern").value_or(6);
      m.full_attention_layers = m.layers / pattern;
    }
  }
  // null (Gemma 3) and 0 mean no cap.
  m.attn_logit_softcap = r.OptionalNumber("attn_logit_softcapping", 0, 1e6).value_or(0);
  if (m.attn_logit_softcap > 0) {
    m.not_modelled.push_back("attn_logit_softcapping " + Num(m.attn_logit_softcap) +
                             ": priced with attention=unfused (its three element-wise passes over the scores); inside "
                             "a fused flash kernel its tanh per score is not priced");
  }
  // null in Gemma 3's files, and 0, mean no cap.
  m.final_logit_softcap = r.OptionalNumber("final_logit_softcapping", 0, 1e6).value_or(0);  // 0: none
}

// Llama 4 (Llama4TextConfig; transformers models/llama4/modeling_llama4.py): MoE layers of
// num_local_experts experts of intermediate_size, top num_experts_per_tok, plus a shared expert
// of the same size (Llama4TextMoe.shared_expert, no gate), every interleave_moe_layer_step-th
// layer ((i + 1) % step == 0), the others dense MLPs of intermediate_size_mlp.
void ReadLlama4(YamlMap& r, ModelSpec& m) {
  MoeSpec s;
  s.experts = r.Int("num_local_experts", 2);
  s.top_k = r.OptionalInt("num_experts_per_tok").value_or(1);
  s.ffn_hidden = m.ffn_hidden;
  s.shared_ffn_hidden = m.ffn_hidden;
  SparseEveryStep(s, r.OptionalInt("interleave_moe_layer_step").value_or(1), m.layers);
  m.ffn_hidden = r.OptionalInt("intermediate_size_mlp").value_or(m.ffn_hidden);
  m.moe = s;
  if (std::optional<std::vector<long long>> listed = r.OptionalIntList("moe_layers", 0)) {
    for (int64_t i = 0; i < m.layers; ++i) {
      const bool in_list = std::find(listed->begin(), listed->end(), i) != listed->end();
      if (in_list != m.IsMoeLayer(i)) {
        m.not_modelled.push_back("moe_layers: the listed MoE layers are priced as every " + std::to_string(s.interval) +
                                 "-th layer's");
        break;
      }
    }
  }
  if (const std::optional<long long> chunk = r.OptionalInt("attention_chunk_size")) {
    m.not_modelled.push_back("attention_chunk_size " + std::to_string(*chunk) +
                             ": the RoPE layers' chunked attention is priced over the whole sequence, which is exact up to " +
                             std::to_string(*chunk) + " tokens");
  }
  if (r.OptionalBool("use_qk_norm").value_or(false)) {
    m.not_modelled.push_back("use_qk_norm: the weightless L2 norm of queries and keys in the RoPE layers is not priced");
  }
}

// DeepSeek-V2/V3 (DeepseekV3Config; transformers models/deepseek_v3/modeling_deepseek_v3.py):
// MLA (q_lora_rank null: no query rank), and from first_k_dense_replace on, every
// moe_layer_freq-th layer an MoE of n_routed_experts experts of moe_intermediate_size plus
// n_shared_experts shared ones (one MLP of n_shared_experts x moe_intermediate_size); V3's
// router adds an e_score_correction_bias per expert (noaux_tc), not counted.
void ReadDeepseek(YamlMap& r, ModelSpec& m) {
  MlaSpec a;
  a.q_lora_rank = r.OptionalInt("q_lora_rank", 0).value_or(0);
  a.kv_lora_rank = r.Int("kv_lora_rank");
  a.rope_head_dim = r.Int("qk_rope_head_dim");
  a.v_head_dim = r.Int("v_head_dim");
  m.head_dim = r.Int("qk_nope_head_dim") + a.rope_head_dim;
  m.kv_heads = m.heads;
  m.mla = a;
  MoeSpec s;
  s.experts = r.Int("n_routed_experts", 2);
  s.top_k = r.Int("num_experts_per_tok");
  s.ffn_hidden = r.Int("moe_intermediate_size");
  s.interval = r.OptionalInt("moe_layer_freq").value_or(1);
  s.first_dense = r.OptionalInt("first_k_dense_replace", 0).value_or(0);
  s.shared_ffn_hidden = r.OptionalInt("n_shared_experts", 0).value_or(0) * s.ffn_hidden;
  m.moe = s;
  // num_nextn_predict_layers: the multi-token prediction depths (ModelSpec::mtp_layers).
  m.mtp_layers = r.OptionalInt("num_nextn_predict_layers", 0).value_or(0);
  const std::string method = r.OptionalString("topk_method").value_or("greedy");
  if (method == "group_limited_greedy" || method == "noaux_tc") {
    // Megatron-Core's alltoall dispatcher (the one priced) sends one copy of a token per routed
    // expert, so confining a token's experts to topk_group groups changes which ranks receive
    // it, not the bytes each sends or receives under balanced load; a dispatcher that sends a
    // token once per destination node and fans it out there (DeepEP, DeepSeek-V3 Sec. 3.2.2)
    // would move fewer inter-node bytes, and that is what stays unpriced.
    m.not_modelled.push_back("topk_method " + method + ": routing confined to topk_group of n_group expert groups "
                             "(device/node-limited routing) is priced as the alltoall dispatcher sends it, one copy a "
                             "routed expert, balanced; a dispatcher that sends a token once per node (DeepEP) is not "
                             "modelled");
  }
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
  // Llama 4's config.json (Llama4Config) nests the language model's keys in text_config.
  if (mt == "llama4") {
    std::optional<YamlMap> text = r.OptionalMap("text_config");
    SHARDSIM_RETURN_IF_ERROR(file.status());
    if (!text) return Status::Error(name + ": field 'text_config': missing (Llama 4 keeps its language model's sizes there)");
    r = *text;
  }
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
  } else if (mt == "falcon") {
    ReadFalcon(r, m, context);
    context_key = "max_position_embeddings";
  } else {
    m.hidden = r.Int("hidden_size");
    m.layers = r.Int("num_hidden_layers");
    m.heads = r.Int("num_attention_heads");
    m.kv_heads = r.OptionalInt("num_key_value_heads").value_or(m.heads);
    m.ffn_hidden = r.Int("intermediate_size");
    context = r.Int("max_position_embeddings");
    context_key = "max_position_embeddings";
    m.tied_embeddings = r.OptionalBool("tie_word_embeddings").value_or(family->tied);
    m.norms_per_layer = family->norms;
    // Gemma names its activation hidden_activation (hidden_act is an older duplicate).
    const char* act_key = family->gelu_gated && r.Has("hidden_activation") ? "hidden_activation" : "hidden_act";
    const std::string act = r.OptionalString(act_key).value_or(family->gelu_gated ? "gelu_pytorch_tanh"
                                                                : family->gated ? "silu" : "gelu");
    const bool ok = family->gelu_gated ? act.rfind("gelu", 0) == 0
                    : family->gated    ? (act == "silu" || act == "swish")
                                       : act.rfind("gelu", 0) == 0;
    if (!ok) {
      return Status::Error(name + ": field '" + act_key + "': '" + act + "' is not supported for " +
                           family->model_type + "; expected " +
                           (family->gated && !family->gelu_gated ? "silu" : "a gelu variant"));
    }
    if (family->gelu_gated) ReadGemmaAttention(r, mt, m);
    if (mt == "olmo") {
      m.norm_weights = false;
      if (const std::optional<double> clip = r.OptionalNumber("clip_qkv", 0, 1e30)) {
        m.not_modelled.push_back("clip_qkv " + Num(*clip) + ": the clamp of Q, K and V is not priced (an element-wise pass)");
      }
    }
    if (mt == "olmo2") m.qk_norm_full = true;
    if (mt == "deepseek_v2" || mt == "deepseek_v3") ReadDeepseek(r, m);
    if (mt == "llama4" || mt == "llama4_text") ReadLlama4(r, m);
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
      SparseEveryStep(s, r.OptionalInt("decoder_sparse_step").value_or(1), m.layers);
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
      // Qwen2Attention: layers from max_window_layers on use the window (transformers
      // models/qwen2/modeling_qwen2.py, before layer_types); the ones below it attend fully.
      if (const std::optional<long long> w = r.OptionalInt("sliding_window")) {
        m.sliding_window = *w;
        m.full_attention_layers = std::min<int64_t>(m.layers, r.OptionalInt("max_window_layers", 0).value_or(m.layers));
      }
    }
  }
  // The sequence length: a config states the context the model allows, not what it was
  // trained on; the default and its notice (model_spec.h seq_len_default).
  int64_t original = 0;
  const char* original_key = "rope_scaling.original_max_position_embeddings";
  if (std::optional<YamlMap> scaling = r.OptionalMap("rope_scaling")) {
    original = scaling->OptionalInt("original_max_position_embeddings").value_or(0);
  }
  if (original == 0 && !gpt2) {  // Phi-3 states it at the top level
    original = r.OptionalInt("original_max_position_embeddings").value_or(0);
    original_key = "original_max_position_embeddings";
  }
  if (original > 0 && original < context && original <= kHfDefaultSeqLen) {
    m.seq_len = original;
    m.seq_len_default = "sequence length " + std::to_string(m.seq_len) + " tokens: " + original_key +
                        ", the context before the long-context extension to " + std::to_string(context) + " (a Hugging Face config states no training length; --seq-len sets it)";
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
  if (!m.mla) m.head_dim = r.OptionalInt("head_dim").value_or(m.heads > 0 ? m.hidden / m.heads : 0);
  SHARDSIM_RETURN_IF_ERROR(file.status());
  SHARDSIM_RETURN_IF_ERROR(ValidateModel(m, name));
  return m;
}

StatusOr<ModelSpec> LoadHfConfig(const std::string& path) {
  SHARDSIM_ASSIGN_OR_RETURN(std::string text, ReadWholeFile(path));
  return ParseHfConfig(text, path);
}

}  // namespace shardsim
