// See inputs.h.
#include "src/cli/inputs.h"

#include <fstream>

#include <sstream>

#include "src/io/plan_file.h"
#include "src/report/compute_fit.h"

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
      {"stack", "S", "software stack (stacks/S.yaml or a file): refuse a layout it cannot run", ""},
      {"unfitted", "", "the structural model: no fitted sustained_compute (docs/validation/compute-fits.yaml)", ""},
  };
}

namespace {

// --stack: the layout must be one the stack runs (src/layout/stack.h).
Status ApplyStack(const Args& args, Inputs* in) {
  const std::optional<std::string> name = args.Get("stack");
  if (!name || name->empty()) return Status::Ok();
  SHARDSIM_ASSIGN_OR_RETURN(StackSpec stack, LoadStack(*name));
  if (std::optional<std::string> why = StackRefusal(stack, in->layout)) return Status::Error(*why);
  in->stack = std::move(stack);
  return Status::Ok();
}

}  // namespace

StatusOr<Inputs> LoadInputs(const Args& args, std::optional<int64_t> default_gpus) {
  Inputs in;
  if (std::optional<std::string> plan_path = args.Get("plan")) {
    for (const char* flag : {"model", "hardware", "gpus", "layout", "nodes", "seq-len", "unfitted"}) {
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
    SHARDSIM_RETURN_IF_ERROR(ApplyStack(args, &in));
    return in;
  }
  SHARDSIM_ASSIGN_OR_RETURN(in.model, LoadModel(*args.Get("model")));
  SHARDSIM_ASSIGN_OR_RETURN(in.hardware, LoadHardware(*args.Get("hardware")));
  ApplyComputeFit(&in.hardware, args.Has("unfitted"));
  if (args.Get("seq-len")) {
    SHARDSIM_ASSIGN_OR_RETURN(in.model.seq_len, args.GetInt("seq-len"));
    if (in.model.seq_len < 1) return Status::Error("--seq-len must be at least 1");
  }
  if (args.Get("nodes")) {
    SHARDSIM_ASSIGN_OR_RETURN(in.hardware.nodes, args.GetInt("nodes"));
    if (in.hardware.nodes < 1) return Status::Error("--nodes must be at least 1");
    if (in.hardware.nodes > 1 && !in.hardware.network) {
      return Status::Error("--nodes " + std::to_string(in.hardware.nodes) + ": " +
                           in.hardware.name + " has no network section to join nodes with");
    }
  }
  if (args.Get("gpus")) {
    SHARDSIM_ASSIGN_OR_RETURN(in.gpus, args.GetInt("gpus"));
    if (in.gpus < 1) return Status::Error("--gpus must be at least 1, found " + std::to_string(in.gpus));
  } else {
    in.gpus = default_gpus.value_or(in.hardware.total_gpus());
  }
  const std::string spec = *args.Get("layout");
  Layout layout;
  if (spec.size() > 5 && (spec.substr(spec.size() - 5) == ".yaml" || spec.substr(spec.size() - 4) == ".yml")) {
    std::ifstream file(spec, std::ios::binary);
    if (!file) return Status::Error(spec + ": cannot open layout file");
    std::ostringstream text;
    text << file.rdbuf();
    SHARDSIM_ASSIGN_OR_RETURN(layout, ParseLayoutYaml(text.str(), spec));
  } else {
    SHARDSIM_ASSIGN_OR_RETURN(layout, ParseLayout(spec));
  }
  SHARDSIM_ASSIGN_OR_RETURN(in.layout, ResolveLayoutFor(layout, in.gpus, in.hardware));
  const LayoutCheck check = CheckLayout(in.layout, in.model, in.hardware, in.gpus);
  SHARDSIM_RETURN_IF_ERROR(check.ToStatus());
  in.warnings = check.warnings;
  SHARDSIM_RETURN_IF_ERROR(ApplyStack(args, &in));
  return in;
}

}  // namespace shardsim::cli
