// Reads a torchtitan TOML job config (what planner/emit.h's EmitTorchtitan writes, or a user's
// own train_configs/*.toml) back into a layout and the model it builds, as torchtitan v0.2.2
// (pytorch/torchtitan 73a0e6979) runs it: its defaults for what the file leaves out
// (torchtitan/config/job_config.py), and its derivations (torchtitan/train.py,
// torchtitan/distributed/parallel_dims.py, pipeline_parallel.py, models/llama3/infra/
// parallelize.py):
//   - data parallelism: FSDP2 when data_parallel_shard_degree > 1 or context_parallel_degree >
//     1: without pipeline parallelism ZeRO-3 when it reshards after the forward ("always" or
//     "default"), ZeRO-2 when not ("never"); with it ZeRO-1 (torch.distributed.pipelining
//     reduces gradients once a step and keeps the parameters gathered; "always" is not
//     modelled); DDP (zero 0) when only data_parallel_replicate_degree > 1;
//     HSDP (both) is no layout shardsim models;
//   - precision: FSDP's mixed_precision_param, autocast for DDP and one GPU, and none at all
//     (training.dtype) for TP or PP without FSDP; fp8 from the "quantize.linear.float8"
//     converter;
//   - tensor parallelism always with sequence parallelism; async TP (needs compile) is
//     overlap_tp=on;
//   - the pipeline schedule, its virtual stages and their layers (torchtitan_pipeline.h); its
//     sends are waited for at the end of the step (overlap_pp=on);
//   - batch: pipeline_parallel_microbatch_size (with pp) or local_batch_size is the
//     micro-batch; global_batch_size / (local_batch_size x dp) accumulation steps;
//   - activation checkpointing "none", "full", or "selective" with selective_ac_option "op"
//     (per-op, priced as shardsim's selective, stacks/torchtitan-fsdp2.yaml); FSDP2's CPU
//     offload (optimizer+params).
// The model is `[model] name = "llama3"` with a shipped flavor or one the file registers on a
// comment line `# "<flavor>": TransformerModelArgs(...)` (torchtitan_model.h).
// Errors name "file:line:column" and the key: a key torchtitan does not have (with "did you
// mean"), a value of the wrong type, a setting torchtitan rejects, one shardsim does not model.
#pragma once

#include <string>
#include <vector>

#include "src/layout/layout.h"
#include "src/model/model_spec.h"
#include "src/util/status.h"

namespace shardsim {

struct TorchtitanRead {
  // dp 0 (derived from the GPU count) when data_parallel_shard_degree is -1, and gbs then 0
  // unless global_batch_size is set; schedule and dtype are given.
  Layout layout;
  ModelSpec model;     // as the flavor builds it, training.seq_len long
  std::string flavor;
  std::vector<std::string> warnings;
  std::vector<std::string> ignored;  // keys read but not modelled (optimizer, data, logging, ...)
};

StatusOr<TorchtitanRead> ParseTorchtitanToml(const std::string& text, const std::string& name);

// Every key of JobConfig at v0.2.2 (torchtitan_keys.cc), and the keys the reader interprets.
const std::vector<std::string>& TorchtitanJobConfigKeys();
std::vector<std::string> TorchtitanKeysRead();

}  // namespace shardsim
