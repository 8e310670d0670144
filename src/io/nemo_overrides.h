// Reads NeMo 2 recipe overrides (what planner/emit.h's EmitNemo writes, or a user's own lines
// of the same form) back into a layout and the model they set: Python lines
//   recipe.<path> = <literal>            (int, float, True/False/None, "text", name(), Enum.member)
//   recipe.trainer.callbacks.append(run.Config(MegatronCommOverlapCallback, key=literal, ...))
// with comments, blank lines and import lines skipped. A path not read here is listed in
// `ignored` (a near miss of one is a warning with a "did you mean"). Absent settings take the
// defaults of NVIDIA/NeMo 8cfedd7203's MegatronStrategy and Megatron-Core's TransformerConfig;
// the recipe a user starts from may set others, so an override file read alone describes what
// it overrides over those defaults.
#pragma once

#include <string>
#include <vector>

#include "src/io/megatron_args.h"

namespace shardsim {

// The same result as Megatron-LM arguments: the layout (dp and, without
// data.global_batch_size, gbs left to derive) and the model (vocab 0).
StatusOr<MegatronRead> ParseNemoOverrides(const std::string& text, const std::string& name);

// The recipe paths ParseNemoOverrides reads (tests check each against NeMo's sources).
std::vector<std::string> NemoPathsRead();

}  // namespace shardsim
