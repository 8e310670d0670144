// Reads Megatron-LM pretrain_gpt.py arguments (what planner/emit.h's EmitMegatron writes, or a
// user's own launch script) back into a layout and the model shape they describe, with
// Megatron-LM's defaults and derivations for what they leave out (megatron/training/
// arguments.py at NVIDIA/Megatron-LM 000c4ac24f61: parse_args and validate_args).
//
// Text: shell words. "#" starts a comment, a backslash-newline continues the line, quotes
// group words; words before the last one ending in ".py" (torchrun and its flags, the
// script) are skipped. "--name value" and "--name=value" both read. Arguments shardsim does
// not model (data, tokenizer, learning rate, logging, ...) are listed in `ignored`; one that
// is a near miss of an argument read here is a warning with a "did you mean".
#pragma once

#include <string>
#include <vector>

#include "src/layout/layout.h"
#include "src/model/model_spec.h"
#include "src/util/status.h"

namespace shardsim {

struct MegatronRead {
  // dp and gbs left to derive (0) unless --global-batch-size is given: Megatron-LM derives dp
  // from the world size, which the arguments do not hold. schedule and dtype are given.
  Layout layout;
  // The model as the arguments build it: every shape field, with Megatron-LM's default where
  // the argument is absent. vocab is 0 (it comes from the tokenizer), name and source empty.
  ModelSpec model;
  std::vector<std::string> warnings;
  std::vector<std::string> ignored;  // "--name" of each argument read but not modelled
  // The attention backend is Transformer Engine's own choice (Megatron's AttnBackend.auto, the
  // default): layout.attention says flash, and the caller, who knows the GPU, makes it cudnn
  // where the description has cuDNN's rates (TE picks FusedAttention on Hopper; StackDefaultsOn).
  bool attention_auto = false;
};

// Errors name "file:line:column" and the argument: a value that is not a number, a missing
// value, an argument given two ways, values Megatron-LM's validate_args rejects (vpp without
// pp, a --moe-layer-freq list), a shape that is no transformer.
StatusOr<MegatronRead> ParseMegatronArgs(const std::string& text, const std::string& name);

// The arguments ParseMegatronArgs reads (tests check each against Megatron-LM's own list).
std::vector<std::string> MegatronArgumentNames();

// Where `args` builds a model other than `m`, one line per field ("--num-layers 80, the
// model has 126"); empty when they agree. vocab is not compared (the arguments do not hold
// it); rotary_base is compared only when `m` states it.
std::vector<std::string> ModelMismatches(const ModelSpec& m, const ModelSpec& args);

}  // namespace shardsim
