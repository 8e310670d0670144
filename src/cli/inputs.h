// Loads the three inputs every analysis command shares (--model, --hardware, --gpus,
// --layout) and checks the layout against them, so each command reports errors alike.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "src/cli/args.h"
#include "src/hardware/cluster.h"
#include "src/layout/layout.h"
#include "src/layout/stack.h"
#include "src/layout/validate.h"
#include "src/model/model_spec.h"

namespace shardsim::cli {

// The shared flags with the bundled defaults (GPT-3 175B on 1024 A100-80GB GPUs).
std::vector<FlagSpec> InputFlags();

struct Inputs {
  ModelSpec model;
  HardwareSpec hardware;
  int64_t gpus = 0;
  Layout layout;
  std::vector<std::string> warnings;
  std::optional<StackSpec> stack;  // --stack, when given: the layout is one it runs
};

// --model and --seq-len: the model (a bundled name, a YAML file, a Hugging Face config.json or
// a folder holding one) with --seq-len applied. *notices gets what the description holds that
// is not modelled and, without --seq-len, how a sequence length the description does not state
// was chosen (model_spec.h). An invalid --seq-len is an error whose message starts "--seq-len".
StatusOr<ModelSpec> LoadModelFlags(const Args& args, std::vector<std::string>* notices);

// Errors: unreadable or invalid descriptions, and every reason the layout is invalid.
// Without --gpus the job uses `default_gpus` when given (e.g. the MPI world size), else
// every GPU of the cluster.
StatusOr<Inputs> LoadInputs(const Args& args, std::optional<int64_t> default_gpus = std::nullopt);

}  // namespace shardsim::cli
