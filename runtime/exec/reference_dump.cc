// Writes a ReferenceDump (reference_dump.h): raw arrays, then the manifest.
#include "runtime/exec/reference_dump.h"

#include <bit>
#include <filesystem>
#include <system_error>

#include "runtime/cpu/layer_norm.h"
#include "runtime/cpu/rms_norm.h"
#include "runtime/cpu/rope.h"
#include "src/util/atomic_file.h"
#include "src/util/json_writer.h"

namespace shardsim::runtime {
namespace {

static_assert(std::endian::native == std::endian::little, "the dump's arrays are little-endian");

template <typename T>
std::string Bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

const char* ActivationKey(Activation a) { return a == Activation::kSwiglu ? "swiglu" : "gelu"; }
const char* NormKey(Norm n) { return n == Norm::kRmsNorm ? "rmsnorm" : "layernorm"; }
const char* PositionKey(Position p) { return p == Position::kRope ? "rope" : "learned"; }

}  // namespace

Status WriteReferenceDump(const std::string& dir, const ReferenceDump& d) {
  StatusOr<ParamLayout> layout = ParamLayout::ForModel(d.model);
  if (!layout.ok()) return layout.status();
  const int64_t n = layout->total_size();
  const int64_t steps = static_cast<int64_t>(d.losses.size());
  const int64_t tokens = steps * d.gbs * d.model.seq_len;
  if (static_cast<int64_t>(d.params_initial.size()) != n || static_cast<int64_t>(d.params_final.size()) != n ||
      static_cast<int64_t>(d.inputs.size()) != tokens || static_cast<int64_t>(d.targets.size()) != tokens ||
      (!d.grads.empty() && static_cast<int64_t>(d.grads.size()) != n) ||
      (!d.learning_rates.empty() && static_cast<int64_t>(d.learning_rates.size()) != steps) ||
      (!d.logits.empty() && static_cast<int64_t>(d.logits.size()) != d.gbs * d.model.seq_len * d.model.vocab)) {
    return Status::Error("reference dump: the arrays do not match the model (" + std::to_string(n) +
                         " parameters, " + std::to_string(steps) + " steps of " + std::to_string(d.gbs) +
                         " x " + std::to_string(d.model.seq_len) + " tokens)");
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::Error(dir + ": cannot create the dump directory: " + ec.message());
  std::vector<std::pair<std::string, std::string>> files = {
      {"params_initial.f32", Bytes(d.params_initial)}, {"params_final.f32", Bytes(d.params_final)},
      {"inputs.i32", Bytes(d.inputs)}, {"targets.i32", Bytes(d.targets)}};
  if (!d.logits.empty()) files.emplace_back("logits.f32", Bytes(d.logits));
  if (!d.grads.empty()) files.emplace_back("grads.f32", Bytes(d.grads));
  for (const auto& [name, bytes] : files) {
    SHARDSIM_RETURN_IF_ERROR(WriteFileAtomically(dir + "/" + name, bytes));
  }

  const ModelSpec& m = d.model;
  JsonWriter w;
  w.BeginObject().Field("format", "shardsim reference dump 1").Field("source", d.source);
  w.Key("model").BeginObject().Field("name", m.name).Field("layers", m.layers).Field("hidden", m.hidden);
  w.Field("heads", m.heads).Field("kv_heads", m.kv_heads).Field("head_dim", m.head_dim);
  w.Field("ffn_hidden", m.ffn_hidden).Field("vocab", m.vocab).Field("seq_len", m.seq_len);
  w.Field("activation", ActivationKey(m.activation)).Field("norm", NormKey(m.norm));
  w.Field("position", PositionKey(m.position)).Field("tied_embeddings", m.tied_embeddings);
  w.Field("bias", m.bias).Field("qkv_bias", m.qkv_bias);
  w.Field("rope_base", RopeBaseOf(m.rotary_base));
  w.Field("norm_eps", m.norm == Norm::kRmsNorm ? kRmsNormEps : kLayerNormEps);
  w.EndObject();
  w.Field("layout", d.layout).Field("dtype", d.dtype).Field("gbs", d.gbs).Field("mbs", d.mbs);
  w.Field("seed", static_cast<int64_t>(d.seed)).Field("steps", steps);
  w.Key("adamw").BeginObject().Field("lr", d.adamw.lr).Field("beta1", d.adamw.beta1);
  w.Field("beta2", d.adamw.beta2).Field("eps", d.adamw.eps).Field("weight_decay", d.adamw.weight_decay);
  w.Field("max_grad_norm", d.adamw.max_grad_norm).EndObject();
  w.Key("lr_schedule").BeginObject().Field("decay", LrDecayName(d.schedule.decay));
  w.Field("max_lr", d.schedule.max_lr).Field("min_lr", d.schedule.min_lr);
  w.Field("warmup_steps", d.schedule.warmup_steps).Field("decay_steps", d.schedule.decay_steps).EndObject();
  w.Key("learning_rates").BeginArray();
  for (double r : d.learning_rates) w.Value(r);
  w.EndArray().Field("data", d.data);
  w.Key("losses").BeginArray();
  for (double l : d.losses) w.Value(l);
  w.EndArray().Key("tensors").BeginArray();
  for (const ParamTensor& t : layout->tensors()) {
    w.BeginObject().Field("name", t.name).Field("offset", t.offset).Field("rows", t.rows);
    w.Field("cols", t.cols).Field("weight_decay", t.weight_decay).EndObject();
  }
  w.EndArray().Key("files").BeginArray();
  for (const auto& file : files) w.Value(file.first);
  w.EndArray().EndObject();
  return WriteFileAtomically(dir + "/manifest.json", w.str());
}

}  // namespace shardsim::runtime
