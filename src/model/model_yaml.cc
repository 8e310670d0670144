// Strict loader for models/*.yaml (schema: docs/models.md).
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "src/io/bundled.h"
#include "src/io/yaml_reader.h"
#include "src/model/model_spec.h"
#include "src/util/atomic_file.h"

namespace shardsim {

StatusOr<ModelSpec> ParseModelYaml(const std::string& text, const std::string& name) {
  SHARDSIM_ASSIGN_OR_RETURN(YamlFile file, YamlFile::Parse(text, name));
  YamlMap r = file.Root();
  ModelSpec m;
  m.name = r.String("name");
  m.source = r.String("source");
  m.layers = r.Int("layers");
  m.hidden = r.Int("hidden");
  m.heads = r.Int("heads");
  m.kv_heads = r.OptionalInt("kv_heads").value_or(m.heads);
  m.head_dim = r.OptionalInt("head_dim").value_or(m.heads > 0 ? m.hidden / m.heads : 0);
  m.ffn_hidden = r.OptionalInt("ffn_hidden").value_or(4 * m.hidden);
  m.vocab = r.Int("vocab");
  m.seq_len = r.Int("seq_len");
  m.activation = r.Choice("activation", {"gelu", "swiglu"}) == "swiglu" ? Activation::kSwiglu
                                                                          : Activation::kGelu;
  m.norm = r.Choice("norm", {"layernorm", "rmsnorm"}) == "rmsnorm" ? Norm::kRmsNorm
                                                                    : Norm::kLayerNorm;
  m.position = r.OptionalChoice("position", {"learned", "rope"}).value_or("rope") == "learned"
                   ? Position::kLearned
                   : Position::kRope;
  m.tied_embeddings = r.OptionalBool("tied_embeddings").value_or(false);
  m.bias = r.OptionalBool("bias").value_or(false);
  m.qkv_bias = r.OptionalBool("qkv_bias").value_or(false);
  m.rotary_base = r.OptionalNumber("rotary_base", 1, 1e12).value_or(0);
  if (m.rotary_base > 0 && m.position != Position::kRope) {
    r.Error("rotary_base", "rotary_base is RoPE's base; the model has position: learned");
  }
  m.dropout = r.OptionalBool("dropout").value_or(false);
  m.qk_norm = r.OptionalBool("qk_norm").value_or(false);
  m.sliding_window = r.OptionalInt("sliding_window").value_or(0);
  m.qk_norm_full = r.OptionalBool("qk_norm_full").value_or(false);
  m.norm_weights = r.OptionalBool("norm_weights").value_or(true);
  m.full_attention_layers = r.OptionalInt("full_attention_layers", 0).value_or(0);
  m.norms_per_layer = r.OptionalInt("norms_per_layer", 0).value_or(2);
  m.mtp_layers = r.OptionalInt("mtp_layers", 0).value_or(0);
  m.final_logit_softcap = r.OptionalNumber("final_logit_softcap", 1e-6, 1e6).value_or(0);
  m.attn_logit_softcap = r.OptionalNumber("attn_logit_softcap", 1e-6, 1e6).value_or(0);
  if (m.mtp_layers > m.layers) {
    r.Error("mtp_layers", "mtp_layers=" + std::to_string(m.mtp_layers) +
                              " is more than layers=" + std::to_string(m.layers) +
                              " (multi-token prediction depths, usually 1)");
  }
  if (std::optional<YamlMap> mla = r.OptionalMap("mla")) {
    MlaSpec a;
    a.q_lora_rank = mla->OptionalInt("q_lora_rank", 0).value_or(0);
    a.kv_lora_rank = mla->Int("kv_lora_rank", 1);
    a.rope_head_dim = mla->Int("rope_head_dim", 1);
    a.v_head_dim = mla->Int("v_head_dim", 1);
    mla->Finish();
    m.mla = a;
    if (!r.Has("kv_heads")) m.kv_heads = m.heads;
  }
  if (std::optional<YamlMap> moe = r.OptionalMap("moe")) {
    MoeSpec s;
    s.experts = moe->Int("experts", 2);
    s.top_k = moe->Int("top_k");
    s.ffn_hidden = moe->Int("ffn_hidden");
    s.interval = moe->OptionalInt("interval").value_or(1);
    s.shared_ffn_hidden = moe->OptionalInt("shared_ffn_hidden", 0).value_or(0);
    s.shared_gate = moe->OptionalBool("shared_gate").value_or(false);
    s.first_dense = moe->OptionalInt("first_dense", 0).value_or(0);
    s.aux_loss_coeff = moe->OptionalNumber("aux_loss_coeff", 0, 1e3).value_or(0);
    moe->Finish();
    m.moe = s;
  }
  if (std::optional<ModelBoundError> e = ModelAboveBounds(m)) r.Error(e->field, e->message);
  r.Finish();
  if (m.hidden % m.heads != 0 && !r.Has("head_dim")) {
    r.Error("heads", "heads=" + std::to_string(m.heads) + " does not divide hidden=" +
                         std::to_string(m.hidden) + "; give head_dim explicitly");
  }
  SHARDSIM_RETURN_IF_ERROR(file.status());
  SHARDSIM_RETURN_IF_ERROR(ValidateModel(m, name));
  return m;
}

StatusOr<ModelSpec> LoadModelYaml(const std::string& path) {
  SHARDSIM_ASSIGN_OR_RETURN(std::string text, ReadWholeFile(path));
  return ParseModelYaml(text, path);
}

// "org/name" (one slash, name characters only) that is not a path here: a Hub id.
bool LooksLikeHubId(const std::string& s) {
  const size_t slash = s.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == s.size() || s.find('/', slash + 1) != std::string::npos) {
    return false;
  }
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '/' && c != '-' && c != '_' && c != '.') return false;
  }
  return s.size() < 5 || (s.substr(s.size() - 5) != ".json" && s.substr(s.size() - 5) != ".yaml");
}

StatusOr<ModelSpec> LoadModel(const std::string& path_or_name) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path_or_name, ec)) {  // a Hugging Face model folder
    const fs::path config = fs::path(path_or_name) / "config.json";
    if (!fs::is_regular_file(config, ec)) {
      return Status::Error("'" + path_or_name + "' is a folder without a config.json (a Hugging Face model folder holds one)");
    }
    return LoadHfConfig(config.string());
  }
  if (!fs::exists(path_or_name, ec) && LooksLikeHubId(path_or_name)) {
    return Status::Error("'" + path_or_name + "' is no file or folder here; as a Hugging Face Hub id it would need a "
                         "download, which shardsim does not do. Put its config.json in a folder and pass that, e.g. "
                         "`huggingface-cli download " + path_or_name + " config.json --local-dir " +
                         path_or_name.substr(path_or_name.find('/') + 1) + "`, then --model " +
                         path_or_name.substr(path_or_name.find('/') + 1));
  }
  SHARDSIM_ASSIGN_OR_RETURN(std::string path, ResolveBundled(path_or_name, "models"));
  if (path.size() >= 5 && path.substr(path.size() - 5) == ".json") return LoadHfConfig(path);
  return LoadModelYaml(path);
}

}  // namespace shardsim
