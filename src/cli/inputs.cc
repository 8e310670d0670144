// See inputs.h.
#include "src/cli/inputs.h"

#include <algorithm>

#include "src/io/deepspeed_config.h"
#include "src/io/megatron_args.h"
#include "src/io/nemo_overrides.h"
#include "src/io/torchtitan_config.h"
#include "src/io/torchtitan_model.h"
#include "src/io/plan_file.h"
#include "src/report/compute_fit.h"
#include "src/util/atomic_file.h"
#include "src/util/strings.h"

namespace shardsim::cli {

std::vector<FlagSpec> InputFlags() {
  return {
      {"plan", "FILE", "a plan file from `shardsim plan --out` (replaces the four flags below)", ""},
      {"model", "M", "model: bundled name (models/M.yaml), a YAML file, or a HF config.json",
       "gpt3-175b"},
      {"hardware", "H", "cluster: bundled name (hardware/H.yaml) or a YAML file", "dgx-a100-80gb"},
      {"nodes", "N", "what-if: override the cluster's node count", ""},
      {"seq-len", "T", "what-if: override the model's training sequence length", ""},
      {"gpus", "N", "GPUs the job uses (default: every GPU of the cluster)", ""},
      {"layout", "SPEC", "layout spec 'tp=8,pp=8,...' or a YAML file (docs/layout.md)",
       "tp=8,pp=8,vpp=2,mbs=1,gbs=1536,sp=on,recompute=selective"},
      {"layout-from", "FILE", "the layout of a framework's configuration: Megatron-LM arguments (a launch script), NeMo 2 recipe overrides (.py), a torchtitan job config (.toml) or a DeepSpeed config .json, over --layout for what JSON cannot hold", ""},
      {"stack", "S", "software stack (stacks/S.yaml or a file): refuse a layout it cannot run; none: no stack", ""},
      {"unfitted", "", "the structural model: no fitted sustained_compute (docs/validation/compute-fits.yaml)", ""},
  };
}

namespace {

// --stack: the stack it names, none when absent, empty or "none" (as plan and memory read it).
StatusOr<std::optional<StackSpec>> StackFlag(const Args& args) {
  const std::optional<std::string> name = args.Get("stack");
  if (!name || name->empty() || *name == "none") return std::optional<StackSpec>();
  SHARDSIM_ASSIGN_OR_RETURN(StackSpec stack, LoadStack(*name));
  return std::optional<StackSpec>(std::move(stack));
}

// The layout must be one the stack runs (src/layout/stack.h).
Status ApplyStack(std::optional<StackSpec> stack, Inputs* in) {
  if (!stack) return Status::Ok();
  if (std::optional<std::string> why = StackRefusal(*stack, in->layout)) return Status::Error(*why);
  in->stack = std::move(stack);
  return Status::Ok();
}

// Whether --layout names a YAML layout file rather than giving a spec string.
bool IsLayoutFile(const std::string& spec) {
  return (spec.size() > 5 && spec.substr(spec.size() - 5) == ".yaml") ||
         (spec.size() > 4 && spec.substr(spec.size() - 4) == ".yml");
}

// --layout as a spec string with --stack: the stack's defaults on the hardware (StackDefaultsOn,
// e.g. torchtitan's kernels=eager) for the keys the spec does not set, said in a warning. A layout
// file, a plan or a framework configuration states its own.
std::string WithStackDefaults(std::string spec, const std::optional<StackSpec>& stack, Inputs* in) {
  if (!stack || IsLayoutFile(spec)) return spec;
  std::vector<std::string> set;
  for (const std::string& term : Split(spec, ',')) set.push_back(term.substr(0, term.find('=')));
  std::vector<std::string> added;
  for (const auto& [key, value] : StackDefaultsOn(*stack, in->hardware)) {
    if (std::find(set.begin(), set.end(), key) != set.end()) continue;
    added.push_back(key + "=" + value);
    spec += (spec.empty() ? "" : ",") + added.back();
  }
  if (!added.empty()) {
    in->warnings.push_back("--layout takes " + Join(added, ",") + " from stack " + stack->name +
                           " (its defaults for what the spec does not set)");
  }
  return spec;
}

// Then, on the layout as resolved for its GPUs, what the framework runs where the spec is silent
// on a searched key (StackFrameworkDefaults, e.g. torchtitan's FSDP: zero=3), said in a warning.
StatusOr<Layout> WithFrameworkDefaults(const std::string& spec, const StackSpec& stack, const Layout& resolved, Inputs* in) {
  std::vector<std::string> given;
  for (const std::string& term : Split(spec, ',')) given.push_back(term.substr(0, term.find('=')));
  std::vector<std::string> why;
  const std::vector<std::string> added = StackFrameworkDefaults(stack, resolved, given, &why);
  if (added.empty()) return resolved;
  in->warnings.push_back("--layout takes " + Join(added, ",") + " from stack " + stack.name +
                         " (what the framework runs where the spec is silent: " + Join(why, "; ") + ")");
  SHARDSIM_ASSIGN_OR_RETURN(Layout layout, ParseLayout(spec + "," + Join(added, ",")));
  return ResolveLayoutFor(layout, in->gpus, in->hardware);
}

StatusOr<std::string> ReadText(const std::string& path, const std::string& what) {
  StatusOr<std::string> text = ReadWholeFile(path);
  if (!text.ok()) return Status::Error(path + ": cannot open " + what);
  return text;
}

// --layout FILE.yaml or a spec string.
StatusOr<Layout> LayoutFlag(const std::string& spec) {
  if (IsLayoutFile(spec)) {
    SHARDSIM_ASSIGN_OR_RETURN(std::string text, ReadText(spec, "layout file"));
    return ParseLayoutYaml(text, spec);
  }
  return ParseLayout(spec);
}

// --layout-from: a DeepSpeed config over --layout (when given), or Megatron-LM arguments, NeMo
// overrides or a torchtitan TOML job config, which must build the --model.
StatusOr<Layout> LayoutFromFramework(const Args& args, const ModelSpec& model, Inputs* in) {
  const std::string path = *args.Get("layout-from");
  SHARDSIM_ASSIGN_OR_RETURN(std::string text, ReadText(path, "framework configuration"));
  if (path.size() > 5 && path.substr(path.size() - 5) == ".json") {
    Layout base;
    if (args.Has("layout")) {
      SHARDSIM_ASSIGN_OR_RETURN(base, LayoutFlag(*args.Get("layout")));
    }
    SHARDSIM_ASSIGN_OR_RETURN(DeepSpeedRead r, ParseDeepSpeedConfig(text, path, base));
    for (const std::string& w : r.warnings) in->warnings.push_back(path + ": " + w);
    return r.layout;
  }
  if (args.Has("layout")) {
    return Status::Error("--layout-from " + path + ": Megatron-LM arguments, NeMo overrides and torchtitan configs give the whole layout; drop --layout");
  }
  if (path.size() > 5 && path.substr(path.size() - 5) == ".toml") {
    SHARDSIM_ASSIGN_OR_RETURN(TorchtitanRead r, ParseTorchtitanToml(text, path));
    const std::vector<std::string> diff = Llama3Mismatches(model, r.model);
    if (!diff.empty()) {
      return Status::Error(path + ": the config builds another model (torchtitan's llama3 flavor " + r.flavor + ") than " +
                           model.name + ": " + Join(diff, "; "));
    }
    for (const std::string& w : r.warnings) in->warnings.push_back(path + ": " + w);
    return r.layout;
  }
  const bool nemo = path.size() > 3 && path.substr(path.size() - 3) == ".py";
  SHARDSIM_ASSIGN_OR_RETURN(MegatronRead r, nemo ? ParseNemoOverrides(text, path) : ParseMegatronArgs(text, path));
  const std::vector<std::string> diff = ModelMismatches(model, r.model);
  if (!diff.empty()) {
    return Status::Error(path + ": the arguments build another model than " + model.name + ": " + Join(diff, "; "));
  }
  for (const std::string& w : r.warnings) in->warnings.push_back(w);
  // Transformer Engine's own choice: cuDNN's fused attention where the GPU has its rates (Hopper).
  if (r.attention_auto) r.layout.attention = TransformerEngineAttention(in->hardware);
  return r.layout;
}

}  // namespace

StatusOr<ModelSpec> LoadModelFlags(const Args& args, std::vector<std::string>* notices) {
  std::optional<int64_t> seq_len;
  if (args.Get("seq-len")) {
    StatusOr<int64_t> t = args.GetInt("seq-len");
    if (!t.ok() || *t < 1) return Status::Error("--seq-len must be a positive integer, found '" + *args.Get("seq-len") + "'");
    seq_len = *t;
  }
  SHARDSIM_ASSIGN_OR_RETURN(ModelSpec m, LoadModel(*args.Get("model")));
  if (seq_len) {
    m.seq_len = *seq_len;
    m.seq_len_default.clear();
  }
  if (!m.seq_len_default.empty()) notices->push_back(m.seq_len_default);
  for (const std::string& n : m.not_modelled) notices->push_back(m.name + ": not modelled: " + n);
  return m;
}

StatusOr<Inputs> LoadInputs(const Args& args, std::optional<int64_t> default_gpus) {
  Inputs in;
  if (std::optional<std::string> plan_path = args.Get("plan")) {
    for (const char* flag : {"model", "hardware", "gpus", "layout", "layout-from", "nodes", "seq-len", "unfitted"}) {
      if (args.Has(flag)) {
        return Status::Error(std::string("--plan gives the model, hardware, GPUs and layout; drop --") + flag);
      }
    }
    SHARDSIM_ASSIGN_OR_RETURN(PlanFile plan, LoadPlanFile(*plan_path));
    in.model = plan.model;
    in.hardware = plan.hardware;
    in.gpus = plan.gpus;
    SHARDSIM_ASSIGN_OR_RETURN(in.layout, ResolveLayoutFor(plan.layout, in.gpus, in.hardware));
    const LayoutCheck check = CheckLayout(in.layout, in.model, in.hardware, in.gpus);
    if (!check.ok()) return Status::Error(*plan_path + ": " + check.ToStatus().message());
    in.warnings = check.warnings;
    SHARDSIM_ASSIGN_OR_RETURN(std::optional<StackSpec> stack, StackFlag(args));
    SHARDSIM_RETURN_IF_ERROR(ApplyStack(std::move(stack), &in));
    return in;
  }
  SHARDSIM_ASSIGN_OR_RETURN(in.model, LoadModelFlags(args, &in.warnings));
  SHARDSIM_ASSIGN_OR_RETURN(in.hardware, LoadHardware(*args.Get("hardware")));
  ApplyComputeFit(&in.hardware, args.Has("unfitted"));
  if (args.Get("nodes")) {
    SHARDSIM_ASSIGN_OR_RETURN(const int64_t nodes, args.GetInt("nodes"));
    SHARDSIM_RETURN_IF_ERROR(SetNodes(in.hardware, nodes));
  }
  if (args.Get("gpus")) {
    SHARDSIM_ASSIGN_OR_RETURN(in.gpus, args.GetInt("gpus"));
    if (in.gpus < 1) return Status::Error("--gpus must be at least 1, found " + std::to_string(in.gpus));
  } else {
    in.gpus = default_gpus.value_or(in.hardware.total_gpus());
  }
  SHARDSIM_ASSIGN_OR_RETURN(std::optional<StackSpec> stack, StackFlag(args));
  Layout layout;
  std::string spec;
  if (args.Has("layout-from")) {
    SHARDSIM_ASSIGN_OR_RETURN(layout, LayoutFromFramework(args, in.model, &in));
  } else {
    spec = WithStackDefaults(*args.Get("layout"), stack, &in);
    SHARDSIM_ASSIGN_OR_RETURN(layout, LayoutFlag(spec));
  }
  SHARDSIM_ASSIGN_OR_RETURN(in.layout, ResolveLayoutFor(layout, in.gpus, in.hardware));
  if (!spec.empty() && stack && !IsLayoutFile(spec)) {
    SHARDSIM_ASSIGN_OR_RETURN(in.layout, WithFrameworkDefaults(spec, *stack, in.layout, &in));
  }
  const LayoutCheck check = CheckLayout(in.layout, in.model, in.hardware, in.gpus);
  SHARDSIM_RETURN_IF_ERROR(check.ToStatus());
  in.warnings.insert(in.warnings.end(), check.warnings.begin(), check.warnings.end());
  SHARDSIM_RETURN_IF_ERROR(ApplyStack(std::move(stack), &in));
  return in;
}

}  // namespace shardsim::cli
