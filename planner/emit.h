// Emitters: a chosen layout as configuration for a training framework (Megatron-LM's
// pretrain_gpt.py arguments, a DeepSpeed config JSON, NeMo 2 recipe overrides, a torchtitan
// TOML job config), so a plan can be run as planned.
#pragma once

#include <string>

#include "src/layout/layout.h"
#include "src/model/model_spec.h"
#include "src/util/status.h"

namespace shardsim::planner {

// Megatron-LM (Megatron-Core era, megatron/training/arguments.py) arguments for
// pretrain_gpt.py: model shape, parallel sizes, batch, recompute, optimizer sharding,
// overlap switches, precision, attention and MoE. The text is a shell-script fragment:
// comment lines first (what was derived, and every setting of the layout that Megatron-LM
// cannot express, each as "# not expressible in Megatron-LM: ..."), then one argument per
// line, each ending in " \", so the argument lines can follow "torchrun ... pretrain_gpt.py \"
// as one continued command. Data, tokenizer, learning-rate and checkpoint arguments are
// not emitted. `l` should be resolved (dp and gbs set, ResolveLayoutFor).
std::string EmitMegatron(const ModelSpec& m, const Layout& l);

// A DeepSpeed config (docs/_pages/config-json.md): batch sizes, zero_optimization (stage,
// overlap, offload, ZeRO-3 prefetch), bf16/fp16, gradient clipping 1.0 and activation
// checkpointing. JSON has no comments, so what the config cannot carry (tensor and
// pipeline sizes, which Megatron-DeepSpeed takes on its command line; sequence and context
// parallelism; schedules; fp8) is listed in a top-level "_shardsim_notes" array of strings,
// a key of ours outside DeepSpeed's documented schema. `l` should be resolved.
std::string EmitDeepSpeed(const ModelSpec& m, const Layout& l);

// NeMo 2 recipe overrides (emit_nemo.cc): Python lines `recipe.<path> = <value>` for the model
// config, MegatronStrategy's parallel sizes and splits, the data module's batch and sequence,
// the distributed optimizer, DDP overlap, the precision plugin and MegatronCommOverlapCallback,
// to apply to the model's NeMo recipe (import lines first, comments for what NeMo 2 cannot
// express). `l` should be resolved.
std::string EmitNemo(const ModelSpec& m, const Layout& l);

// A torchtitan TOML job config (emit_torchtitan.cc) for pytorch/torchtitan v0.2.2 (73a0e6979),
// the last release configured by a TOML file: [model] (llama3 and the flavor: a shipped one, or
// one the header's comment says to register, on one `"<flavor>": TransformerModelArgs(...)`
// line), [training] batch, sequence, precision and CPU offload, [parallelism] (DDP or FSDP2 and
// its resharding, TP and async TP, the pipeline schedule and its split, CP),
// [activation_checkpoint], [compile] (for fp8 and async TP) and float8. An error, naming each
// reason, for a model torchtitan's llama3 does not build (TorchtitanCanBuild) or a layout
// torchtitan cannot run as planned. `l` should be resolved.
StatusOr<std::string> EmitTorchtitan(const ModelSpec& m, const Layout& l);
Status TorchtitanCanBuild(const ModelSpec& m);

// The emitter of `format` ("megatron", "deepspeed", "nemo", "torchtitan").
StatusOr<std::string> EmitFor(const std::string& format, const ModelSpec& m, const Layout& l);

}  // namespace shardsim::planner
