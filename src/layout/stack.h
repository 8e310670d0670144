// Software-stack descriptions (stacks/*.yaml, issue 14 item 3, first part): what a training
// framework version can run, as rules that refuse layouts, each with its reason and source.
// `estimate`, `simulate` and `plan` take `--stack NAME`: the first two refuse a layout the
// stack cannot run, and the planner searches only what it can.
//
// A rule has `refuse` terms and optional `when` terms, each `key=value` (a layout key and one
// of its values, docs/layout.md) or `key>N` (a numeric key above N). It refuses a layout when
// every `when` term holds and any `refuse` term does: `{when: "pp>1", refuse: "zero=2,zero=3"}`
// is DeepSpeed's "ZeRO-2/3 are incompatible with pipeline parallelism".
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "src/hardware/hardware_spec.h"
#include "src/layout/layout.h"
#include "src/util/status.h"

namespace shardsim {

struct StackTerm {
  std::string key;
  bool greater = false;  // key>N; else key=value
  std::string value;     // key=value: the value as FormatLayout writes it
  int64_t bound = 0;     // key>N: N
  std::string text;      // as written, for messages
  // The key as a number (StackFieldValue): its index, and for key=value the value's number, so
  // that StackRefusal, which the planner runs on every layout it enumerates, compares numbers.
  int field = -1;
  double code = 0;
};

struct StackRule {
  std::vector<StackTerm> when, refuse;
  std::string why;  // the reason, with its source
};

// What the framework runs where a layout spec is silent on a searched key (`framework_defaults:`
// in the YAML, a list of {when, set, why}): `set` (key=value terms; not the parallel sizes,
// mbs or gbs, which are the user's) for a layout where every `when` term holds, e.g.
// torchtitan's FSDP over every data-parallel rank, {when: "dp>1,pp=1", set: "zero=3"}.
struct StackDefaultRule {
  std::vector<StackTerm> when;
  std::vector<std::pair<std::string, std::string>> set;  // key, value
  std::string why;
};

struct StackSpec {
  std::string name, source, description;
  // The configurations `plan --emit` writes for this stack, comma-separated: "megatron"
  // (pretrain_gpt.py arguments), "deepspeed" (a DeepSpeed config JSON), "nemo" (NeMo 2 recipe
  // overrides), "torchtitan" (a TOML job config); empty where shardsim has no emitter for it (`emit:` in the YAML).
  std::string emit;
  // What the framework runs with where a layout key is not searched (`defaults:` in the YAML,
  // a layout spec of bucket_params, live_params, prefetch, overlap_dp, attention, kernels): its own
  // defaults, e.g. DeepSpeed's reduce_bucket_size 5e8. The planner starts from them (--fix
  // overrides); estimate and simulate take them for the keys a --layout spec string does not
  // set (src/cli/inputs.cc), and price a layout file, a plan or a framework config as given.
  std::map<std::string, std::string> defaults;
  std::vector<StackDefaultRule> framework_defaults;
  std::vector<StackRule> rules;
};

// The framework_defaults terms for `l` (a layout resolved for its GPUs, read from a spec that
// sets the keys `given`): "key=value" for each key of a rule whose `when` holds that the spec
// does not set, first rule first; *why gets each applied rule's reason.
std::vector<std::string> StackFrameworkDefaults(const StackSpec& stack, const Layout& l,
                                                const std::vector<std::string>& given, std::vector<std::string>* why);

// The stack's defaults on `hw`: as written, except that a default attention=cudnn (Transformer
// Engine's FusedAttention, what DotProductAttention picks on Hopper) becomes attention=flash on
// a description without cuDNN's rates (efficiency.attention_cudnn_tflops): TE runs
// FlashAttention-2 on the other GPUs ("Select FusedAttention on sm90 and FlashAttention on
// others for performance", transformer_engine/pytorch/attention.py, v1.3 to v1.7; later
// versions keep the rule in get_attention_backend).
std::map<std::string, std::string> StackDefaultsOn(const StackSpec& stack, const HardwareSpec& hw);
// What Transformer Engine's DotProductAttention runs on `hw` when left to choose (Megatron's
// AttnBackend.auto): cuDNN's fused attention where the description has its rates, else
// FlashAttention. StackDefaultsOn and the --layout-from readers' auto backend ask this.
AttentionImpl TransformerEngineAttention(const HardwareSpec& hw);

// A stack by bundled name (stacks/NAME.yaml) or path. Errors are located (file:line:column,
// field, expected, "did you mean").
StatusOr<StackSpec> LoadStack(const std::string& path_or_name);

// The stack `plan` searches for when --stack is not given (`--stack none`: every layout):
// Megatron-Core with Transformer Engine, what NeMo 2.x and Megatron-LM's current releases run.
inline constexpr const char* kDefaultPlanStack = "megatron-core-2024";
StatusOr<StackSpec> ParseStackYaml(const std::string& text, const std::string& name);

// Whether `format` is one of the stack's `emit` formats.
bool StackEmits(const StackSpec& stack, const std::string& format);

// Why `stack` cannot run `l` (resolved): "stack 'X' cannot run zero=3 with pp>1: <why>", or
// nullopt when no rule refuses it.
std::optional<std::string> StackRefusal(const StackSpec& stack, const Layout& l);

// The first rule that refuses `l` and its refusing term (both null when none does), without
// building a message: what the planner checks for each of the layouts it enumerates.
struct StackRefusing {
  const StackRule* rule = nullptr;
  const StackTerm* term = nullptr;
};
StackRefusing StackRefusingTerm(const StackSpec& stack, const Layout& l);
// Whether one of `rule`'s terms tests `key`.
bool StackRuleMentions(const StackRule& rule, std::string_view key);

}  // namespace shardsim
