// See torchtitan_config.h.
#include "src/io/torchtitan_config.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <sstream>

#include "src/io/toml_reader.h"
#include "src/io/torchtitan_model.h"
#include "src/io/torchtitan_pipeline.h"
#include "src/util/strings.h"

namespace shardsim {
namespace {

const std::vector<std::string>& KeysRead() {
  static const auto* kRead = new std::vector<std::string>{
      "model.name", "model.flavor", "model.converters", "training.seq_len", "training.local_batch_size",
      "training.global_batch_size", "training.mixed_precision_param", "training.mixed_precision_reduce",
      "training.dtype", "training.enable_cpu_offload", "parallelism.data_parallel_replicate_degree",
      "parallelism.data_parallel_shard_degree", "parallelism.fsdp_reshard_after_forward",
      "parallelism.tensor_parallel_degree", "parallelism.enable_async_tensor_parallel",
      "parallelism.pipeline_parallel_degree", "parallelism.pipeline_parallel_schedule",
      "parallelism.pipeline_parallel_schedule_csv", "parallelism.pipeline_parallel_microbatch_size",
      "parallelism.pipeline_parallel_first_stage_less_layers", "parallelism.pipeline_parallel_last_stage_less_layers",
      "parallelism.pipeline_parallel_layers_per_stage", "parallelism.module_fqns_per_model_part",
      "parallelism.context_parallel_degree", "parallelism.expert_parallel_degree",
      "parallelism.expert_tensor_parallel_degree", "activation_checkpoint.mode",
      "activation_checkpoint.selective_ac_option", "compile.enable", "compile.components",
      "quantize.linear.float8.recipe_name", "quantize.linear.float8.filter_fqns", "quantize.linear.float8.emulate",
      "parallelism.context_parallel_rotate_method"};
  return *kRead;
}

// The file's entries by key, with typed accessors that record the first error, located.
class Entries {
 public:
  Entries(std::string name, std::vector<TomlEntry> entries) : name_(std::move(name)) {
    for (TomlEntry& e : entries) by_path_.emplace(e.path, std::move(e));
  }
  const TomlEntry* Find(const std::string& path) const {
    auto it = by_path_.find(path);
    return it == by_path_.end() ? nullptr : &it->second;
  }
  bool Has(const std::string& path) const { return Find(path) != nullptr; }
  int64_t Int(const std::string& path, int64_t fallback, int64_t min_value) {
    const TomlEntry* e = Typed(path, TomlKind::kInteger);
    if (!e) return fallback;
    int64_t v = 0;
    try {
      size_t used = 0;
      v = std::stoll(e->value, &used);
      if (used != e->value.size()) throw std::out_of_range("");
    } catch (...) {
      FailAt(*e, path + ": " + e->value + " is out of range");
      return fallback;
    }
    if (v < min_value) {
      FailAt(*e, path + ": expected at least " + std::to_string(min_value) + ", found " + e->value);
      return fallback;
    }
    return v;
  }
  bool Bool(const std::string& path, bool fallback) {
    const TomlEntry* e = Typed(path, TomlKind::kBool);
    return e ? e->value == "true" : fallback;
  }
  std::string Choice(const std::string& path, const std::string& fallback, const std::vector<std::string>& choices) {
    const TomlEntry* e = Typed(path, TomlKind::kString);
    if (!e) return fallback;
    if (std::find(choices.begin(), choices.end(), e->value) != choices.end()) return e->value;
    FailAt(*e, path + ": expected one of " + Join(choices, ", ") + ", found \"" + e->value + "\"" +
                   DidYouMean(e->value, choices));
    return fallback;
  }
  std::string Text(const std::string& path, const std::string& fallback) {
    const TomlEntry* e = Typed(path, TomlKind::kString);
    return e ? e->value : fallback;
  }
  std::vector<std::string> List(const std::string& path) {
    const TomlEntry* e = Typed(path, TomlKind::kArray);
    if (!e) return {};
    if (!e->items.empty() && e->item_kind != TomlKind::kString) {
      FailAt(*e, path + ": expected an array of strings");
      return {};
    }
    return e->items;
  }
  // An error at the key, or at the file when it is not set.
  void Error(const std::string& path, const std::string& what) {
    if (const TomlEntry* e = Find(path)) {
      FailAt(*e, what);
    } else if (status_.ok()) {
      status_ = Status::Error(name_ + ": " + what);
    }
  }
  const Status& status() const { return status_; }

 private:
  const TomlEntry* Typed(const std::string& path, TomlKind kind) {
    const TomlEntry* e = Find(path);
    if (!e) return nullptr;
    if (e->kind != kind) {
      FailAt(*e, path + ": expected " + (kind == TomlKind::kInteger ? "an " : "a ") + TomlKindName(kind) +
                     ", found " + (e->kind == TomlKind::kInteger || e->kind == TomlKind::kArray ? "an " : "a ") +
                     TomlKindName(e->kind));
      return nullptr;
    }
    return e;
  }
  void FailAt(const TomlEntry& e, const std::string& what) {
    if (status_.ok()) {
      status_ = Status::Error(name_ + ":" + std::to_string(e.value_at.line) + ":" + std::to_string(e.value_at.col) +
                              ": " + what);
    }
  }
  std::string name_;
  std::map<std::string, TomlEntry> by_path_;
  Status status_;
};

// A flavor the file registers on a comment line: `# "<flavor>": TransformerModelArgs(...)`.
StatusOr<std::optional<Llama3Args>> RegisteredFlavor(const std::string& text, const std::string& name,
                                                     const std::string& flavor) {
  std::istringstream in(text);
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    const std::string t = Trim(line);
    if (t.empty() || t[0] != '#' || t.find("TransformerModelArgs(") == std::string::npos) continue;
    StatusOr<std::pair<std::string, Llama3Args>> r = ParseLlama3Registration(t.substr(1));
    if (!r.ok()) return Status::Error(name + ":" + std::to_string(number) + ": " + r.status().message());
    if (r->first == flavor) return std::optional<Llama3Args>(r->second);
  }
  return std::optional<Llama3Args>();
}

// torch.distributed.pipelining's schedule names (get_schedule_class, case-insensitive).
StatusOr<Schedule> ScheduleNamed(const std::string& name) {
  std::string lower;
  for (char c : name) lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  if (lower == "1f1b") return Schedule::k1F1B;
  if (lower == "gpipe") return Schedule::kGpipe;
  if (lower == "interleaved1f1b") return Schedule::kInterleaved;
  if (lower == "zbvzerobubble") return Schedule::kZeroBubbleV;
  static const std::vector<std::string> kOthers = {"LoopedBFS", "InterleavedZeroBubble", "DualPipeV",
                                                   "PipelineScheduleSingle", "PipelineScheduleMulti"};
  for (const std::string& o : kOthers) {
    std::string ol;
    for (char c : o) ol.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    if (ol == lower) {
      return Status::Error("the schedule " + name + " is not one shardsim models (1F1B, GPipe, Interleaved1F1B, ZBVZeroBubble)");
    }
  }
  return Status::Error("unknown schedule name '" + name + "': torch.distributed.pipelining has 1F1B, GPipe, "
                       "Interleaved1F1B, LoopedBFS, InterleavedZeroBubble, ZBVZeroBubble, DualPipeV" +
                       DidYouMean(name, {"1F1B", "GPipe", "Interleaved1F1B", "ZBVZeroBubble"}));
}

}  // namespace

std::vector<std::string> TorchtitanKeysRead() { return KeysRead(); }

StatusOr<TorchtitanRead> ParseTorchtitanToml(const std::string& text, const std::string& name) {
  SHARDSIM_ASSIGN_OR_RETURN(std::vector<TomlEntry> entries, ParseToml(text, name));
  TorchtitanRead out;
  const std::vector<std::string>& all = TorchtitanJobConfigKeys();
  for (const TomlEntry& e : entries) {
    if (std::find(all.begin(), all.end(), e.path) == all.end()) {
      return Status::Error(name + ":" + std::to_string(e.key_at.line) + ":" + std::to_string(e.key_at.col) + ": " +
                           e.path + " is not a key of torchtitan v0.2.2's job config (it raises 'Invalid field names')" +
                           DidYouMean(e.path, all));
    }
    if (std::find(KeysRead().begin(), KeysRead().end(), e.path) == KeysRead().end()) out.ignored.push_back(e.path);
  }
  Entries r(name, std::move(entries));
  Layout& l = out.layout;

  // The model.
  const std::string model_name = r.Text("model.name", "llama3");
  if (model_name != "llama3") r.Error("model.name", "model.name: shardsim reads torchtitan's llama3, not '" + model_name + "'");
  out.flavor = r.Text("model.flavor", "debugmodel");
  const int64_t seq = r.Int("training.seq_len", 2048, 1);
  std::optional<Llama3Args> args;
  auto shipped = Llama3Flavors().find(out.flavor);
  if (shipped != Llama3Flavors().end()) {
    args = shipped->second;
  } else {
    SHARDSIM_ASSIGN_OR_RETURN(args, RegisteredFlavor(text, name, out.flavor));
    if (!args) {
      std::vector<std::string> names;
      for (const auto& [n, a] : Llama3Flavors()) names.push_back(n);
      r.Error("model.flavor", "model.flavor: '" + out.flavor + "' is no flavor of torchtitan's llama3 (" + Join(names, ", ") +
                                  ") and the file registers none on a '# \"" + out.flavor +
                                  "\": TransformerModelArgs(...)' line" + DidYouMean(out.flavor, names));
      return r.status();
    }
  }
  out.model = Llama3Model(out.flavor, *args, seq);

  // Parallel sizes (ParallelDims).
  const int64_t replicate = r.Int("parallelism.data_parallel_replicate_degree", 1, 1);
  const int64_t shard = r.Int("parallelism.data_parallel_shard_degree", -1, -1);
  if (shard == 0) r.Error("parallelism.data_parallel_shard_degree", "parallelism.data_parallel_shard_degree: -1 or at least 1 (torchtitan asserts)");
  l.tp = r.Int("parallelism.tensor_parallel_degree", 1, 1);
  l.pp = r.Int("parallelism.pipeline_parallel_degree", 1, 1);
  l.cp = r.Int("parallelism.context_parallel_degree", 1, 1);
  // torch's context-parallel SDPA exchanges the key/value shards by all-gather (the default)
  // or all-to-all (job_config.py context_parallel_rotate_method); shardsim prices the ring's
  // step-by-step exchange under the attention (cp k/v exchange), the same bytes: said, not refused.
  const std::string rotate = r.Choice("parallelism.context_parallel_rotate_method", "allgather", {"allgather", "alltoall"});
  if (l.cp > 1) {
    out.warnings.push_back("parallelism.context_parallel_rotate_method \"" + rotate +
                           "\": priced as a ring's exchange of the key/value shards, step by step under the "
                           "attention (the same bytes; how much of it the attention hides is not torch's)");
  }
  l.ep = r.Int("parallelism.expert_parallel_degree", 1, 1);
  if (r.Int("parallelism.expert_tensor_parallel_degree", 1, 1) > 1 || l.ep > 1) {
    out.warnings.push_back("expert parallelism has no effect on the dense llama3 (job_config.py: 'No effect for non-MoE models')");
    l.ep = 1;
  }
  const bool fsdp = shard != 1 || l.cp > 1;  // -1: the ranks left over, read as more than one
  if (fsdp && replicate > 1) {
    r.Error("parallelism.data_parallel_replicate_degree", "parallelism.data_parallel_replicate_degree " +
            std::to_string(replicate) + " with FSDP is HSDP, which shardsim does not model");
  }
  if (!fsdp && replicate > 1 && (l.tp > 1 || l.pp > 1)) {
    r.Error("parallelism.data_parallel_replicate_degree", "parallelism.data_parallel_replicate_degree: DDP with tensor or "
            "pipeline parallelism: torchtitan raises 'DDP has not supported > 1D parallelism'");
  }
  l.dp = shard == -1 ? 0 : replicate * shard;
  if (fsdp) {
    const std::string reshard = r.Choice("parallelism.fsdp_reshard_after_forward", "default", {"default", "always", "never"});
    // apply_fsdp: "default" reshards after the forward without pipeline parallelism only.
    // Under a pipeline, torch.distributed.pipelining reduce-scatters at each stage's last
    // micro-batch only and keeps the parameters gathered after the backward
    // (stage.py backward_maybe_with_nosync): ZeRO-1's communication.
    if (l.pp == 1) {
      l.zero = reshard == "never" ? 2 : 3;
    } else if (reshard == "always") {
      r.Error("parallelism.fsdp_reshard_after_forward", "parallelism.fsdp_reshard_after_forward \"always\" with pipeline "
              "parallelism (gathers every micro-batch's forward, one reduce-scatter a step) is not modelled");
    } else {
      l.zero = 1;
    }
  }
  if (!r.Text("parallelism.pipeline_parallel_schedule_csv", "").empty()) {
    r.Error("parallelism.pipeline_parallel_schedule_csv", "parallelism.pipeline_parallel_schedule_csv: a schedule from a file is not modelled");
  }
  if (r.Has("parallelism.module_fqns_per_model_part")) {
    r.Error("parallelism.module_fqns_per_model_part", "parallelism.module_fqns_per_model_part: a hand-made split is not modelled");
  }

  // Tensor parallelism: SequenceParallel on the norms whenever tp > 1 (apply_tp).
  l.sp = l.tp > 1;
  const bool compiled = r.Bool("compile.enable", false);
  std::vector<std::string> components = r.Has("compile.components") ? r.List("compile.components")
                                                                     : std::vector<std::string>{"model", "loss"};
  const bool model_compiled = compiled && std::find(components.begin(), components.end(), "model") != components.end();
  const bool loss_compiled = compiled && std::find(components.begin(), components.end(), "loss") != components.end();
  // Without torch.compile the model runs eager PyTorch kernels (Layout's Kernels::kEager: RoPE
  // as casts and a complex multiply, repeat_kv copies, SiLU and the multiply apart, the logits
  // cast to fp32 for the loss); compiled, Inductor fuses those element-wise chains, and the
  // compiled loss keeps its 16-bit logits: each of compile.components apart (layout.h Kernels).
  l.kernels = model_compiled && loss_compiled ? Kernels::kCompiled
              : model_compiled                ? Kernels::kCompiledModel
              : loss_compiled                 ? Kernels::kCompiledLoss
                                              : Kernels::kEager;
  if (r.Bool("parallelism.enable_async_tensor_parallel", false) && l.tp > 1) {
    if (!model_compiled) {
      r.Error("parallelism.enable_async_tensor_parallel", "parallelism.enable_async_tensor_parallel needs compile.enable "
              "with \"model\" in compile.components (torchtitan raises)");
    }
    l.overlap_tp = TpOverlap::kOn;
  }
  if (seq % (2 * l.tp * l.cp) != 0) {
    r.Error("training.seq_len", "training.seq_len " + std::to_string(seq) + " is not a multiple of 2 x tp x cp = " +
            std::to_string(2 * l.tp * l.cp) + " (torchtitan asserts)");
  }

  // Batch and pipeline.
  const int64_t local = r.Int("training.local_batch_size", 8, 1);
  const int64_t global = r.Int("training.global_batch_size", -1, -1);
  l.mbs = local;
  if (l.pp > 1) {
    StatusOr<Schedule> named = ScheduleNamed(r.Text("parallelism.pipeline_parallel_schedule", "1F1B"));
    if (!named.ok()) {
      r.Error("parallelism.pipeline_parallel_schedule", "parallelism.pipeline_parallel_schedule: " + named.status().message());
      return r.status();
    }
    const Schedule s = *named;
    l.schedule = s;
    l.schedule_given = true;
    TorchtitanSplit split;
    split.first_less = r.Int("parallelism.pipeline_parallel_first_stage_less_layers", 1, 0);
    split.last_less = r.Int("parallelism.pipeline_parallel_last_stage_less_layers", 1, 0);
    if (r.Has("parallelism.pipeline_parallel_layers_per_stage")) split.layers_per_stage = r.Int("parallelism.pipeline_parallel_layers_per_stage", 1, 1);
    StatusOr<int64_t> stages = TorchtitanStageCount(l.pp, MultiStageSchedule(s), split, out.model.layers);
    StatusOr<std::vector<int64_t>> blocks = stages.ok() ? TorchtitanStageBlocks(*stages, out.model.layers, split.first_less, split.last_less)
                                                        : StatusOr<std::vector<int64_t>>(stages.status());
    if (!blocks.ok()) {
      r.Error("parallelism.pipeline_parallel_degree", "parallelism: " + blocks.status().message());
    } else {
      l.vpp = *stages / l.pp;
      if (s == Schedule::kZeroBubbleV && l.vpp != 2) r.Error("parallelism.pipeline_parallel_schedule", "ZBVZeroBubble needs two stages per rank");
      Status st = SetSplitFromBlocks(out.model, *blocks, &l);
      if (!st.ok()) r.Error("parallelism.pipeline_parallel_degree", "parallelism: " + st.message());
    }
    l.mbs = r.Int("parallelism.pipeline_parallel_microbatch_size", 1, 1);
    if (local % l.mbs != 0) {
      r.Error("parallelism.pipeline_parallel_microbatch_size", "parallelism.pipeline_parallel_microbatch_size " +
              std::to_string(l.mbs) + " does not divide training.local_batch_size " + std::to_string(local) + " (torchtitan raises)");
    }
    // torch.distributed.pipelining waits for its sends at the end of the step.
    l.overlap_pp = true;
  }
  // train.py: accumulation steps = global / (local x dp), global -1 meaning local x dp.
  if (global > 0 && l.dp > 0 && global % (local * l.dp) != 0) {
    r.Error("training.global_batch_size", "training.global_batch_size " + std::to_string(global) + " is not a multiple of "
            "local_batch_size x data-parallel degree = " + std::to_string(local * l.dp) + " (torchtitan asserts)");
  }
  if (l.pp > 1 && global > 0 && l.dp > 0 && global / (local * l.dp) > 1) {
    r.Error("training.global_batch_size", "training.global_batch_size: " + std::to_string(global / (local * l.dp)) +
            " pipeline schedules per step (gradient accumulation over pipeline flushes) are not modelled; make "
            "local_batch_size the data-parallel rank's whole batch");
  }
  l.gbs = global > 0 ? global : (l.dp > 0 ? local * l.dp : 0);

  // Precision.
  const std::vector<std::string> converters = r.List("model.converters");
  for (const std::string& c : converters) {
    if (c == "quantize.linear.float8") continue;
    r.Error("model.converters", "model.converters: '" + c + "' is not modelled" +
            (c == "float8" ? " (nor registered: torchtitan v0.2.2 names it 'quantize.linear.float8')" : std::string(" (only quantize.linear.float8)")));
  }
  // torchao's float8 as shardsim prices it (src/cost/ops.cc Fp8Casts): tensorwise scaling (the
  // default, recipe_name unset), every linear of the blocks in float8 and the output layer in
  // bf16 (filter_fqns ["output"], what plan --emit torchtitan writes; unset, torchao converts the
  // output layer too, and shardsim prices it 16-bit: slightly slow). Rowwise scaling, other
  // linears left in bf16 and emulation would run other kernels: refused, not priced as these.
  // Read only with the converter on: without it torchtitan applies none of them.
  const bool float8 = !converters.empty();
  const std::string recipe = r.Choice("quantize.linear.float8.recipe_name", "tensorwise",
                                      {"tensorwise", "rowwise", "rowwise_with_gw_hp"});
  if (float8 && recipe != "tensorwise") {
    r.Error("quantize.linear.float8.recipe_name", "quantize.linear.float8.recipe_name \"" + recipe +
                                                      "\": rowwise float8 scaling is not modelled (shardsim prices tensorwise)");
  }
  for (const std::string& fqn : r.List("quantize.linear.float8.filter_fqns")) {
    if (float8 && fqn != "output") {
      r.Error("quantize.linear.float8.filter_fqns", "quantize.linear.float8.filter_fqns: '" + fqn +
                                                        "' left in bf16 is not modelled (only the output layer)");
      break;
    }
  }
  if (r.Bool("quantize.linear.float8.emulate", false) && float8) {
    r.Error("quantize.linear.float8.emulate", "quantize.linear.float8.emulate: emulated float8 GEMMs are not modelled");
  }
  const std::string param = r.Choice("training.mixed_precision_param", "bfloat16", {"bfloat16", "float32"});
  r.Choice("training.mixed_precision_reduce", "float32", {"float32"});
  const std::string dtype = r.Choice("training.dtype", "float32", {"bfloat16", "float32"});
  const bool mixed = fsdp || (l.tp == 1 && l.pp == 1);  // maybe_enable_amp: FSDP, or autocast
  if (dtype == "bfloat16") r.Error("training.dtype", "training.dtype bfloat16 keeps no fp32 weights: not modelled");
  l.dtype = !converters.empty() ? DType::kFp8 : (mixed && param == "bfloat16" ? DType::kBf16 : DType::kFp32);
  l.dtype_given = true;
  if (r.Bool("training.enable_cpu_offload", false)) {
    if (fsdp) {
      l.offload = Offload::kOptimizerAndParams;
    } else {
      out.warnings.push_back("training.enable_cpu_offload is applied by FSDP only: ignored without it");
    }
  }

  // Activation checkpointing, per transformer block.
  const std::string mode = r.Choice("activation_checkpoint.mode", "selective", {"selective", "full", "memory_budget", "none"});
  if (mode == "full") l.recompute = Recompute::kFull;
  if (mode == "memory_budget") {
    r.Error("activation_checkpoint.mode", "activation_checkpoint.mode \"memory_budget\" (the compiler's choice of what "
            "to save) is not modelled; use \"none\", \"full\" or \"selective\" with selective_ac_option \"op\"");
  }
  if (mode == "selective") {
    // "op": per-op selective checkpointing, recompute=op (ops.h OpCheckpoint);
    // a number N: every N-th block fully checkpointed (_apply_layer_sac), which no layout holds.
    const std::string option = r.Text("activation_checkpoint.selective_ac_option", "2");
    if (option == "op") {
      l.recompute = Recompute::kOp;
    } else {
      r.Error(r.Has("activation_checkpoint.selective_ac_option") ? "activation_checkpoint.selective_ac_option" : "activation_checkpoint.mode",
              "activation_checkpoint: selective_ac_option \"" + option + "\" " +
                  (!option.empty() && std::all_of(option.begin(), option.end(), ::isdigit)
                       ? "checkpoints one block in " + option + ", which shardsim does not model (torchtitan's default "
                         "is \"selective\" with \"2\"); use mode \"none\", \"full\", or \"selective\" with \"op\""
                       : std::string("is neither \"op\" nor a number (torchtitan raises)")));
    }
  }
  // FSDP2 gathers a whole block at a time, the next one prefetched: no live-parameter limit
  // (stacks/torchtitan-fsdp2.yaml's default).
  l.live_params = 1'000'000'000'000;
  SHARDSIM_RETURN_IF_ERROR(r.status());
  return out;
}

}  // namespace shardsim
