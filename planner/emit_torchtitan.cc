// EmitTorchtitan (emit.h): a torchtitan TOML job config for pytorch/torchtitan v0.2.2
// (73a0e6979), the last release whose job config is a TOML file. Names checked against
// torchtitan/config/job_config.py at that commit (tests/data/frameworks/torchtitan-*.txt); what
// each setting does is in src/io/torchtitan_config.h, which reads the file back.
#include <cctype>
#include <cstdio>
#include <string>
#include <vector>

#include "planner/emit.h"
#include "src/io/torchtitan_model.h"
#include "src/io/torchtitan_pipeline.h"
#include "src/util/check.h"
#include "src/util/strings.h"

namespace shardsim::planner {
namespace {

std::string Toml(bool b) { return b ? "true" : "false"; }
std::string Toml(int64_t v) { return std::to_string(v); }
std::string TomlStr(const std::string& s) { return "\"" + s + "\""; }

std::string TorchSchedule(Schedule s) {
  switch (s) {
    case Schedule::kGpipe: return "GPipe";
    case Schedule::k1F1B: return "1F1B";
    case Schedule::kInterleaved: return "Interleaved1F1B";
    case Schedule::kZeroBubbleV: return "ZBVZeroBubble";  // metrics.py compares this spelling
    case Schedule::kZeroBubble: break;
  }
  return "";
}

// What torchtitan v0.2.2 cannot run of `l`, one reason each (the stack's rules,
// stacks/torchtitan-fsdp2.yaml, keep the planner away from all of them).
std::vector<std::string> NotRunnable(const ModelSpec& m, const Layout& l) {
  std::vector<std::string> out;
  const bool fsdp = (l.dp > 1 && l.zero >= 1) || l.cp > 1;
  if (l.cp > 1 && l.zero == 0) out.push_back("zero=0 with cp > 1 (FSDP always shards over dp x cp)");
  if (l.dp_cp() > 1 && l.pp == 1 && l.zero == 1) out.push_back("zero=1 without pp (FSDP2 reduce-scatters every micro-batch)");
  if (l.dp_cp() > 1 && l.pp > 1 && l.zero >= 2) {
    out.push_back("zero=" + std::to_string(l.zero) + " with pp (FSDP2 under a pipeline reduces once a step and keeps parameters gathered: zero=1)");
  }
  if (l.dp > 1 && l.zero == 0 && (l.tp > 1 || l.pp > 1)) out.push_back("DDP with tp or pp ('DDP has not supported > 1D parallelism')");
  if (!fsdp && (l.tp > 1 || l.pp > 1) && l.dtype != DType::kFp32) {
    out.push_back("mixed precision with tp or pp and no FSDP (maybe_enable_amp: none is applied)");
  }
  if (l.dtype == DType::kFp16) out.push_back("dtype=fp16 (mixed_precision_param is bfloat16 or float32)");
  if (l.cuda_graphs != CudaGraphs::kOff) {
    out.push_back("cuda_graphs=" + CudaGraphsName(l.cuda_graphs) + " (the trainer captures no CUDA graphs)");
  }
  if (l.fp8_params) out.push_back("fp8_params=on (torchao's float8 keeps no fp8 weights)");
  if (l.offload == Offload::kOptimizer) out.push_back("offload=optimizer (CPUOffloadPolicy moves parameters too)");
  if (l.offload == Offload::kOptimizerAndParams && !fsdp) out.push_back("offload without FSDP");
  if (l.grad_compression > 1) out.push_back("gradient compression");
  if (!l.overlap_dp) out.push_back("overlap_dp=off (FSDP2 and DDP always overlap)");
  if (l.zero == 3 && !l.prefetch) out.push_back("prefetch=off (FSDP2 always prefetches)");
  if (l.zero == 3 && l.live_params < 1'000'000'000'000) out.push_back("a live-parameter limit (FSDP2 has none)");
  if (l.bucket_params != 0) out.push_back("bucket_params (FSDP2 reduces each block's gradients alone)");
  if (l.attention != AttentionImpl::kFlash) {
    out.push_back("attention=" + AttentionName(l.attention) + " (llama3 runs scaled_dot_product_attention)");
  }
  if (l.recompute == Recompute::kSelective) {
    out.push_back("recompute=selective (torchtitan recomputes no attention core alone: its selective per-op "
                  "checkpointing is recompute=op)");
  }
  if (l.tp > 1 && !l.sp) out.push_back("sp=off (apply_tp always runs SequenceParallel)");
  if (l.overlap_tp == TpOverlap::kBackward) out.push_back("overlap_tp=backward (DTensor's collectives block; async TP is overlap_tp=on)");
  if (l.pp > 1 && l.schedule == Schedule::kZeroBubble) out.push_back("schedule=zero-bubble (torch has no single-stage zero-bubble schedule)");
  if (l.pp > 1 && !l.overlap_pp) out.push_back("overlap_pp=off (torch's schedules wait for sends at the step's end)");
  if (m.seq_len % (2 * l.tp * l.cp) != 0) {
    out.push_back("seq_len " + std::to_string(m.seq_len) + " not a multiple of 2 x tp x cp (torchtitan asserts)");
  }
  return out;
}

}  // namespace

Status TorchtitanCanBuild(const ModelSpec& m) { return Llama3ArgsFor(m).status(); }

StatusOr<std::string> EmitFor(const std::string& format, const ModelSpec& m, const Layout& l) {
  if (format == "megatron") return EmitMegatron(m, l);
  if (format == "nemo") return EmitNemo(m, l);
  if (format == "deepspeed") return EmitDeepSpeed(m, l);
  if (format == "torchtitan") return EmitTorchtitan(m, l);
  return Status::Error("no emitter for '" + format + "' (megatron, deepspeed, nemo, torchtitan)");
}

StatusOr<std::string> EmitTorchtitan(const ModelSpec& m, const Layout& l) {
  CHECK(l.dp > 0 && l.gbs > 0) << "EmitTorchtitan needs a resolved layout: " << FormatLayout(l);
  SHARDSIM_ASSIGN_OR_RETURN(const Llama3Args args, Llama3ArgsFor(m));
  std::vector<std::string> reasons = NotRunnable(m, l);
  TorchtitanSplit split;
  if (l.pp > 1) {
    StatusOr<TorchtitanSplit> s = TorchtitanSplitFor(m, l);
    if (s.ok()) split = *s;
    else reasons.push_back(s.status().message());
  }
  if (!reasons.empty()) return Status::Error("torchtitan v0.2.2 cannot run " + FormatLayout(l) + ": " + Join(reasons, "; "));

  const std::optional<std::string> shipped = Llama3FlavorOf(m);
  std::string flavor = shipped ? *shipped : m.name;
  for (char& c : flavor) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') c = '_';
  }
  const bool fsdp = (l.dp > 1 && l.zero >= 1) || l.cp > 1;
  std::string s;
  s += "# torchtitan job config (pytorch/torchtitan v0.2.2, 73a0e6979), written by shardsim plan --emit torchtitan.\n";
  s += "# Run: torchrun --nproc_per_node <GPUs per node> ... -m torchtitan.train --job.config_file <this file>\n";
  s += "# (run_train.sh); the world size is " + std::to_string(l.world()) + " GPUs.\n";
  s += "# Not set here: [training] dataset, [model] hf_assets_path (the tokenizer), [optimizer], [lr_scheduler],\n";
  s += "# [checkpoint], [metrics]: torchtitan's defaults until you set them.\n";
  if (shipped) {
    s += "# The model: " + m.name + " is torchtitan's llama3 flavor \"" + flavor + "\" (torchtitan/models/llama3/__init__.py).\n";
  } else {
    s += "# The model: torchtitan ships no llama3 flavor for " + m.name + "; add this entry to llama3_args in\n";
    s += "# torchtitan/models/llama3/__init__.py before training (shardsim's reader reads it from this comment):\n";
    s += "#   " + Llama3Registration(flavor, args) + "\n";
    s += "# (torchtitan's llama3 applies Llama 3.1's RoPE scaling to every flavor: other angles, the same cost.)\n";
  }
  if (l.dtype == DType::kFp8) {
    s += "# fp8: torchao's Float8Linear on every linear layer but the output (tensorwise scaling), compiled.\n";
  }
  if (fsdp && l.pp > 1) {
    s += "# FSDP under the pipeline: torch.distributed.pipelining reduce-scatters gradients at each stage's last\n";
    s += "# micro-batch only and keeps the parameters gathered (stage.py backward_maybe_with_nosync): zero=1.\n";
  }
  if (l.zero == 0 && l.dp > 1) {
    s += "# DDP reduces gradients in 100 MB buckets (apply_ddp); shardsim prices one bucket per block.\n";
  }
  // torch.compile: on the model what fp8 and async TP need, and what fuses the eager
  // element-wise chains (kernels=compiled or compiled-model); on the loss for kernels=compiled
  // or compiled-loss (compile.components); kernels=eager is torchtitan without it.
  const bool compile_model = l.dtype == DType::kFp8 || l.overlap_tp == TpOverlap::kOn || !EagerElementwise(l.kernels);
  const bool compile_loss = CompiledLoss(l.kernels);
  const bool compile = compile_model || compile_loss;

  s += "\n[model]\nname = \"llama3\"\nflavor = " + TomlStr(flavor) + "\n";
  if (l.dtype == DType::kFp8) s += "converters = [\"quantize.linear.float8\"]\n";

  // Batch: with pp the data-parallel rank's whole batch is one schedule of micro-batches;
  // without, each micro-batch is a step of gradient accumulation (train.py).
  s += "\n[training]\n";
  s += "seq_len = " + Toml(m.seq_len) + "\n";
  s += "local_batch_size = " + Toml(l.pp > 1 ? l.gbs / l.dp : l.mbs) + "\n";
  s += "global_batch_size = " + Toml(l.gbs) + "\n";
  s += "mixed_precision_param = " + TomlStr(l.dtype == DType::kFp32 ? "float32" : "bfloat16") + "\n";
  if (l.offload == Offload::kOptimizerAndParams) s += "enable_cpu_offload = true\n";

  s += "\n[parallelism]\n";
  s += "data_parallel_replicate_degree = " + Toml(l.zero == 0 ? l.dp : int64_t{1}) + "\n";
  s += "data_parallel_shard_degree = " + Toml(l.zero == 0 ? int64_t{1} : l.dp) + "\n";
  // zero=3 reshards after the forward; zero=2, and zero=1 under a pipeline, keep the parameters.
  if (fsdp) s += "fsdp_reshard_after_forward = " + TomlStr(l.zero == 3 ? "always" : "never") + "\n";
  s += "tensor_parallel_degree = " + Toml(l.tp) + "\n";
  if (l.tp > 1) s += "enable_async_tensor_parallel = " + Toml(l.overlap_tp == TpOverlap::kOn) + "\n";
  s += "pipeline_parallel_degree = " + Toml(l.pp) + "\n";
  if (l.pp > 1) {
    s += "pipeline_parallel_schedule = " + TomlStr(TorchSchedule(l.schedule)) + "\n";
    s += "pipeline_parallel_microbatch_size = " + Toml(l.mbs) + "\n";
    s += "pipeline_parallel_first_stage_less_layers = " + Toml(split.first_less) + "\n";
    s += "pipeline_parallel_last_stage_less_layers = " + Toml(split.last_less) + "\n";
    if (split.layers_per_stage) s += "pipeline_parallel_layers_per_stage = " + Toml(*split.layers_per_stage) + "\n";
  }
  s += "context_parallel_degree = " + Toml(l.cp) + "\n";

  s += "\n[activation_checkpoint]\nmode = " +
       TomlStr(l.recompute == Recompute::kFull ? "full" : l.recompute == Recompute::kOp ? "selective" : "none") + "\n";
  if (l.recompute == Recompute::kOp) s += "selective_ac_option = \"op\"\n";
  s += "\n[compile]\nenable = " + Toml(compile) + "\n";
  if (compile) {
    s += std::string("components = [") + (compile_model ? "\"model\"" : "") + (compile_model && compile_loss ? ", " : "") +
         (compile_loss ? "\"loss\"" : "") + "]\n";
  }
  if (l.dtype == DType::kFp8) s += "\n[quantize.linear.float8]\nfilter_fqns = [\"output\"]\n";
  return s;
}

}  // namespace shardsim::planner
