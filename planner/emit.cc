// See emit.h. Every option name below was checked against the framework's own source or
// documentation; each group names the file it was checked against.
//
// Megatron-LM: NVIDIA/Megatron-LM megatron/training/arguments.py at commit 000c4ac24f61
// (2025), cross-checked at 307dcf37f03d (2024, Megatron-Core 0.6 era). Names marked
// "(2025 only)" are absent from the 2024 file.
// DeepSpeed: deepspeedai/DeepSpeed docs/_pages/config-json.md and
// deepspeed/runtime/zero/config.py (DeepSpeedZeroConfig, its aliases and defaults).
#include "planner/emit.h"
#include "src/io/moe_layer_freq.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "src/util/check.h"
#include "src/util/json_writer.h"
#include "src/util/strings.h"

namespace shardsim::planner {
namespace {

std::string Str(int64_t v) { return std::to_string(v); }

// An uneven split's keys, as the layout writes them.
std::string FormatSplit(const Layout& l) {
  std::vector<std::string> keys;
  if (l.first_stage_layers > 0) keys.push_back("first_stage_layers=" + Str(l.first_stage_layers));
  if (l.last_stage_layers > 0) keys.push_back("last_stage_layers=" + Str(l.last_stage_layers));
  if (l.embedding_in_split) keys.push_back("embedding_in_split=on");
  if (l.loss_in_split) keys.push_back("loss_in_split=on");
  return Join(keys, ",");
}

// A ratio as the layout spec writes it: "4", "2.5".
std::string Ratio(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// --rotary-base is an int in Megatron-LM (type=int); a fractional base is written as it is and
// named, so the mismatch is visible rather than rounded away.
std::string RotaryBase(double base) {
  char buf[40];
  std::snprintf(buf, sizeof buf, base == static_cast<double>(static_cast<int64_t>(base)) ? "%.0f" : "%g", base);
  return buf;
}

// Megatron arguments being assembled. Comments print before the argument lines so that a
// comment never ends the continued command (a "#" after "\<newline>" would).
class MegatronArgs {
 public:
  void Flag(const std::string& name) { args_.push_back(name); }
  void Flag(const std::string& name, const std::string& value) {
    args_.push_back(name + " " + value);
  }
  void Flag(const std::string& name, int64_t value) { Flag(name, Str(value)); }
  void Comment(const std::string& text) { comments_.push_back("# " + text); }
  void NotExpressible(const std::string& what) {
    Comment("not expressible in Megatron-LM: " + what);
  }

  std::string str() const {
    std::string out;
    for (const std::string& c : comments_) out += c + "\n";
    // One argument per line, continued with a backslash except the last, so the block pastes
    // as the tail of a command.
    for (size_t i = 0; i < args_.size(); ++i) out += args_[i] + (i + 1 < args_.size() ? " \\\n" : "\n");
    return out;
  }

 private:
  std::vector<std::string> comments_;
  std::vector<std::string> args_;
};

// Network size (_add_network_size_args), --seq-length (_add_data_args), dropout
// (_add_regularization_args), --disable-bias-linear (_add_training_args).
void AddModelShape(const ModelSpec& m, const Layout& l, MegatronArgs& a) {
  a.Flag("--num-layers", m.layers);
  a.Flag("--hidden-size", m.hidden);
  a.Flag("--num-attention-heads", m.heads);
  // Megatron's default head size is hidden / heads.
  if (m.mla) {
    // _add_mla_args: MLA's sizes replace --kv-channels (every head its own keys).
    a.Flag("--multi-latent-attention");
    if (m.mla->q_lora_rank > 0) a.Flag("--q-lora-rank", m.mla->q_lora_rank);
    a.Flag("--kv-lora-rank", m.mla->kv_lora_rank);
    a.Flag("--qk-head-dim", m.head_dim - m.mla->rope_head_dim);
    a.Flag("--qk-pos-emb-head-dim", m.mla->rope_head_dim);
    a.Flag("--v-head-dim", m.mla->v_head_dim);
  } else if (m.head_dim * m.heads != m.hidden) {
    a.Flag("--kv-channels", m.head_dim);
  }
  if (m.kv_heads < m.heads) {
    a.Flag("--group-query-attention");
    a.Flag("--num-query-groups", m.kv_heads);
  }
  a.Flag("--ffn-hidden-size", m.ffn_hidden);
  a.Flag("--seq-length", m.seq_len);
  a.Flag("--max-position-embeddings", m.seq_len);
  if (m.activation == Activation::kSwiglu) a.Flag("--swiglu");         // default: gelu
  if (m.norm == Norm::kRmsNorm) a.Flag("--normalization", "RMSNorm");  // default: LayerNorm
  a.Flag("--position-embedding-type", m.position == Position::kRope ? "rope" : "learned_absolute");
  if (!m.tied_embeddings) a.Flag("--untie-embeddings-and-output-weights");
  if (!m.bias) a.Flag("--disable-bias-linear");
  // --add-qkv-bias: biases on Q, K and V only, as Qwen2 (validate_args turns it on with
  // --add-bias-linear, the default, so it is written only beside --disable-bias-linear).
  if (!m.bias && m.qkv_bias) a.Flag("--add-qkv-bias");
  if (m.qk_norm) a.Flag("--qk-layernorm");  // Qwen3's Q/K norms, in --normalization's kind
  if (m.qk_norm_full) {
    a.NotExpressible("Q/K norms over all heads at once (OLMo 2): --qk-layernorm normalises each head");
  }
  if (m.norms_per_layer != 2) {
    a.NotExpressible(Str(m.norms_per_layer) + " norms a layer (Megatron-LM's layer has 2, before attention and "
                     "before the MLP)");
  }
  if (!m.norm_weights) a.NotExpressible("norms without weights (OLMo's LayerNorm): Megatron-LM's have them");
  if (m.final_logit_softcap > 0) {
    a.NotExpressible(
        "the logits' soft-cap (Gemma 2's final_logit_softcapping): Megatron-LM has no argument for "
        "it");
  }
  if (m.attn_logit_softcap > 0) {
    a.NotExpressible(
        "the attention scores' soft-cap (Gemma 2's attn_logit_softcapping): Megatron-LM has no argument for "
        "it");
  }
  if (m.sliding_window > 0) {
    a.NotExpressible("sliding_window " + Str(m.sliding_window) + " (--window-size is not written: set it as your "
                     "Megatron-LM version counts the window; shardsim prices a causal window of that many keys)" +
                     (m.full_attention_layers > 0 ? " on all but " + Str(m.full_attention_layers) +
                                                        " layers (--window-attn-skip-freq sets which attend fully)"
                                                  : std::string()));
  }
  if (m.position == Position::kRope) {
    if (m.rotary_base > 0) {
      a.Flag("--rotary-base", RotaryBase(m.rotary_base));
    } else {
      a.Comment("the model does not state its RoPE base: Megatron-LM's default --rotary-base 10000 applies");
    }
  }
  if (!m.dropout) {  // both default to 0.1
    a.Flag("--attention-dropout", "0.0");
    a.Flag("--hidden-dropout", "0.0");
  }
  // megatron/core/tokenizers/utils/build_tokenizer.py vocab_size_with_padding (d98e8a64dd): the vocabulary is
  // rounded up to a multiple of --make-vocab-size-divisible-by (128) x tp.
  const int64_t multiple = 128 * l.tp;
  const int64_t padded = (m.vocab + multiple - 1) / multiple * multiple;
  a.Comment("vocabulary: " + Str(m.vocab) +
            " tokens, taken from the tokenizer (--tokenizer-type/--tokenizer-model, not "
            "emitted); Megatron-LM pads it to a multiple of 128 x tp = " + Str(padded) +
            (padded == m.vocab ? "" : " rows (shardsim prices the " + Str(m.vocab) + ")"));
  // _add_moe_args. --moe-ffn-hidden-size and --moe-layer-freq (2025 only).
  if (m.moe) {
    a.Flag("--num-experts", m.moe->experts);
    a.Flag("--moe-router-topk", m.moe->top_k);
    a.Flag("--moe-ffn-hidden-size", m.moe->ffn_hidden);
    // Megatron's integer frequency N makes layer i an expert layer when i % N == 0, as
    // ModelSpec::IsMoeLayer does.
    // A list expression for dense layers first (DeepSeek's first_k_dense_replace), quoted.
    if (m.moe->interval > 1 || m.moe->first_dense > 0) {
      const std::string freq = MoeLayerFreqText(*m.moe, m.layers);
      a.Flag("--moe-layer-freq", m.moe->first_dense > 0 ? "'" + freq + "'" : freq);
    }
    if (m.moe->shared_ffn_hidden > 0) a.Flag("--moe-shared-expert-intermediate-size", m.moe->shared_ffn_hidden);
    if (m.moe->shared_gate) {
      a.NotExpressible("the shared expert's sigmoid gate (Qwen2-MoE's shared_expert_gate): Megatron-LM's "
                       "arguments have no flag for TransformerConfig.moe_shared_expert_gate");
    }
  }
  // _add_mtp_args: --mtp-num-layers (multi-token prediction depths, on the last stage).
  if (m.mtp_layers > 0) a.Flag("--mtp-num-layers", m.mtp_layers);
}

// _add_distributed_args (tp, pp, vpp, p2p overlap, cp) and _add_moe_args (ep). Megatron
// derives dp = world size / (tp x pp x cp) in validate_args; it has no dp flag.
void AddParallelism(const ModelSpec& m, const Layout& l, MegatronArgs& a) {
  a.Comment("launch " + Str(l.world()) +
            " ranks: Megatron-LM derives dp = world / (tp x pp x cp) = " + Str(l.world()) + " / (" +
            Str(l.tp) + " x " + Str(l.pp) + " x " + Str(l.cp) + ") = " + Str(l.dp));
  a.Flag("--tensor-model-parallel-size", l.tp);
  a.Flag("--pipeline-model-parallel-size", l.pp);
  a.Flag("--context-parallel-size", l.cp);
  if (m.moe || l.ep > 1) a.Flag("--expert-model-parallel-size", l.ep);
  // The experts' TP where it is not the TP size (arguments.py: the TP size when absent).
  if (m.moe && l.own_expert_tp()) a.Flag("--expert-tensor-parallel-size", l.etp);
  // The token dispatcher shardsim prices (ops.cc, layer_plan.cc): alltoall, which Megatron-LM
  // runs only when asked (its default is allgather, arguments.py _add_moe_args).
  if (m.moe) a.Flag("--moe-token-dispatcher-type", "alltoall");
  // A rank's experts as one grouped GEMM (TEGroupedMLP), as shardsim prices them; without the
  // flag Megatron-Core runs SequentialMLP, a loop over the rank's experts
  // (transformer_engine_spec_provider.py grouped_mlp_modules).
  if (m.moe) a.Flag("--moe-grouped-gemm");
  // _add_moe_args: an expert's capacity, tokens beyond it dropped (--moe-token-drop-policy
  // probs, the default, drops the lowest-probability ones).
  if (m.moe && l.moe_capacity > 0) a.Flag("--moe-expert-capacity-factor", Ratio(l.moe_capacity));
  if (m.moe && l.moe_imbalance != 1) {
    a.Comment("priced with the busiest expert-parallel rank routed " + Ratio(l.moe_imbalance) +
              "x the balanced share of tokens (moe_imbalance: the router's load, not a setting)");
  }
  if (l.tp > 1 && l.sp) a.Flag("--sequence-parallel");  // _add_training_args

  const bool interleaved = l.vpp > 1;
  // Uneven splits (src/layout/pipeline.h): Megatron-Core's own flags, and the virtual stages
  // given per rank, as validate_args requires with them ("please use
  // --num-virtual-stages-per-pipeline-rank ... when enable uneven pipeline parallelism";
  // megatron/training/arguments.py, d98e8a64dd).
  if (l.first_stage_layers > 0) a.Flag("--decoder-first-pipeline-num-layers", l.first_stage_layers);
  if (l.last_stage_layers > 0) a.Flag("--decoder-last-pipeline-num-layers", l.last_stage_layers);
  if (l.embedding_in_split) a.Flag("--account-for-embedding-in-pipeline-split");
  if (l.loss_in_split) a.Flag("--account-for-loss-in-pipeline-split");
  if (interleaved) {
    if (l.uneven_split()) {
      a.Flag("--num-virtual-stages-per-pipeline-rank", l.vpp);
    } else if (m.layers % (l.pp * l.vpp) == 0) {
      a.Flag("--num-layers-per-virtual-pipeline-stage", m.layers / (l.pp * l.vpp));
    } else {
      a.NotExpressible("vpp=" + Str(l.vpp) + " with layers=" + Str(m.layers) +
                       " not divisible by pp x vpp (uneven virtual stages)");
    }
  }
  if (l.pp > 1) {
    if (l.schedule == Schedule::kGpipe) {
      a.NotExpressible(
          "schedule=gpipe (pretrain_gpt.py runs 1F1B for pp > 1; these arguments give 1F1B)");
    } else if (l.schedule == Schedule::kZeroBubble) {
      a.NotExpressible(
          "schedule=zero-bubble (no B/W-split ZB-H1 schedule; these arguments give 1F1B)");
    } else if (l.schedule == Schedule::kZeroBubbleV) {
      a.NotExpressible(
          "schedule=zb-v (no V-shaped B/W-split schedule; these arguments give the interleaved "
          "1F1B of two chunks per stage)");
    }
  }
  // P2P overlap is on by default and only in the interleaved schedule: validate_args sets
  // overlap_p2p_comm = False without virtual stages, and asserts pp > 2 when it is off.
  // (Megatron-LM before megatron/training/ had an opt-in --overlap-p2p-communication.)
  if (interleaved && !l.overlap_pp) {
    if (l.pp > 2) {
      a.Flag("--no-overlap-p2p-communication");
    } else {
      a.NotExpressible("overlap_pp=off with the interleaved schedule at pp=" + Str(l.pp) +
                       " (Megatron-LM needs pp > 2 without p2p overlap; left on)");
    }
  }
  if (!interleaved && l.overlap_pp && l.pp > 1) {
    a.NotExpressible("overlap_pp=on with schedule=" + ScheduleName(l.schedule) +
                     " (Megatron-LM overlaps pipeline sends only in the interleaved schedule)");
  }
}

// _add_training_args: batch sizes and recomputation.
void AddBatchAndRecompute(const Layout& l, MegatronArgs& a) {
  a.Flag("--micro-batch-size", l.mbs);
  a.Flag("--global-batch-size", l.gbs);
  switch (l.recompute) {
    case Recompute::kNone:
      break;
    case Recompute::kSelective:  // validate_args: sets recompute_granularity = 'selective'
      a.Flag("--recompute-activations");
      break;
    case Recompute::kOp:
      a.NotExpressible("recompute=op (torchtitan's per-op checkpointing of every other matmul's output): "
                       "Megatron-LM recomputes whole layers or listed modules (--recompute-modules)");
      break;
    case Recompute::kFull:  // every layer recomputed from its input
      a.Flag("--recompute-granularity", "full");
      a.Flag("--recompute-method", "uniform");
      a.Flag("--recompute-num-layers", 1);
      break;
  }
}

// _add_distributed_args (distributed optimizer, grad/param overlap), _add_training_args
// (--tp-comm-overlap, --optimizer-cpu-offload (2025 only)), _add_experimental_args
// (--use-precision-aware-optimizer (2025 only)).
void AddOptimizerAndOverlap(const Layout& l, MegatronArgs& a) {
  if (l.zero >= 1) a.Flag("--use-distributed-optimizer");
  if (l.zero >= 2) {
    a.Comment("ZeRO-" + Str(l.zero) +
              " has no direct Megatron-LM equivalent: emitted --use-distributed-optimizer, "
              "which shards optimizer states and fp32 main weights over dp (ZeRO-1) and "
              "reduce-scatters gradients, but keeps every rank's gradient buffer " +
              std::string(l.zero == 3 ? "and 16-bit weights " : "") +
              "whole; Megatron FSDP (--use-megatron-fsdp "
              "--data-parallel-sharding-strategy optim_grads" +
              std::string(l.zero == 3 ? "_params" : "") +
              ", 2025 only, own checkpoint format) is the closest and is not emitted" +
              std::string(l.zero == 3 ? "; prefetch has no weight all-gathers to act on" : ""));
  }
  // megatron/training/arguments.py: --ddp-bucket-size, parameters per bucket (default
  // max(40000000, 1000000 x dp)).
  if (l.bucket_params > 0) a.Flag("--ddp-bucket-size", l.bucket_params);
  if (l.overlap_dp) {
    a.Flag("--overlap-grad-reduce");
    // validate_args: needs the distributed optimizer and --overlap-grad-reduce.
    if (l.zero >= 1) a.Flag("--overlap-param-gather");
  }
  // overlap_tp=backward is Megatron-LM's default (LinearWithGradAccumulationAndAsyncCommunication
  // reduces the input gradient under the weight-gradient GEMMs): no flag. off is left as
  // backward's arguments: this era has no switch for it (--no-async-tensor-model-parallel-
  // allreduce is "DEPRECATED. This flag is ignored.").
  if (l.tp > 1 && l.overlap_tp == TpOverlap::kOn) {
    if (l.sp) {
      a.Flag("--tp-comm-overlap");
    } else {
      a.NotExpressible("overlap_tp=on without sp (--tp-comm-overlap requires --sequence-parallel)");
    }
  }
  // CUDA graphs (validate_args @ NVIDIA/Megatron-LM d98e8a64dd): each layer captured by
  // Megatron-Core's CudaGraphManager, or the whole iteration, which asserts that the loss
  // and gradients are not checked for NaN.
  if (l.cuda_graphs == CudaGraphs::kLayers) a.Flag("--cuda-graph-impl", "local");
  if (l.cuda_graphs == CudaGraphs::kStep) {
    a.Flag("--cuda-graph-impl", "full_iteration");
    a.Flag("--no-check-for-nan-in-loss-and-grad");
  }
  if (l.cuda_graphs != CudaGraphs::kOff) {
    a.Comment("CUDA graphs: --cuda-graph-impl is Megatron-Core 0.14+ (before: --enable-cuda-graph, with "
              "--cuda-graph-scope full_iteration for the whole step); shardsim does not price the graphs' memory");
  }
  if (l.offload != Offload::kNone) {
    // validate_args: --optimizer-cpu-offload asserts --use-precision-aware-optimizer.
    a.Flag("--optimizer-cpu-offload");
    a.Flag("--use-precision-aware-optimizer");
    a.Comment(
        "offload: --optimizer-cpu-offload runs Adam on the host for the offloaded "
        "states (2025 only; older releases cannot offload)");
  }
  if (l.offload == Offload::kOptimizerAndParams) {
    a.NotExpressible(
        "offload=optimizer+params (no weight offload to host; only the optimizer part is "
        "emitted)");
  }
  if (l.grad_compression > 1) {
    a.NotExpressible("compress=" + Ratio(l.grad_compression) +
                     " (no gradient compression in Megatron-LM)");
  }
}

// _add_mixed_precision_args (--bf16, --fp16), _add_transformer_engine_args (--fp8-format),
// _add_training_args (--use-flash-attn), _add_network_size_args (--attention-backend,
// 2025 only).
void AddPrecisionAndAttention(const Layout& l, MegatronArgs& a) {
  switch (l.dtype) {
    case DType::kBf16:
      a.Flag("--bf16");
      break;
    case DType::kFp16:
      a.Flag("--fp16");
      break;
    case DType::kFp8:  // Transformer Engine fp8 GEMMs; the rest of the model runs in bf16
      a.Flag("--bf16");
      a.Flag("--fp8-format", "hybrid");
      // fp8 weights: --fp8-param-gather, "Keep the compute param in fp8 ... and perform the param
      // all-gather in fp8" (megatron/training/arguments.py, d98e8a64dd).
      if (l.fp8_params) a.Flag("--fp8-param-gather");
      break;
    case DType::kFp32:  // Megatron's default parameter dtype
      break;
    default:
      a.NotExpressible("dtype=" + DTypeName(l.dtype));
      break;
  }
  // bf16 gradients (--bf16 otherwise accumulates and reduces them in fp32).
  if (l.grad_bf16) a.Flag("--grad-reduce-in-bf16");
  // AttnBackend (megatron/core/transformer/enums.py): Transformer Engine's FusedAttention (cuDNN)
  // is fused, FlashAttention flash; flash1 is the legacy --use-flash-attn (the flash-attn
  // package installed decides the version).
  if (l.attention == AttentionImpl::kCudnn) {
    a.Flag("--attention-backend", "fused");
  } else if (l.attention == AttentionImpl::kFlash) {
    a.Flag("--attention-backend", "flash");
  } else if (l.attention == AttentionImpl::kFlash1) {
    a.Flag("--use-flash-attn");
  } else {
    a.Flag("--attention-backend", "unfused");
  }
}

// DeepSpeed notes for what its config cannot carry. Command-line names checked against
// microsoft/Megatron-DeepSpeed megatron/arguments.py (_add_distributed_args) and
// DeepSpeed deepspeed/__init__.py (_add_core_arguments: --deepspeed, --deepspeed_config).
std::vector<std::string> DeepSpeedNotes(const ModelSpec& m, const Layout& l) {
  std::vector<std::string> notes;
  if (l.cuda_graphs != CudaGraphs::kOff) {
    notes.push_back("cuda_graphs=" + CudaGraphsName(l.cuda_graphs) +
                    " is not expressible: DeepSpeed's training engine captures no CUDA graphs (enable_cuda_graph "
                    "is its inference engine's)");
  }
  if (l.tp > 1 || l.pp > 1) {
    notes.push_back(
        "DeepSpeed's config does not set the tensor- or pipeline-parallel size: "
        "Megatron-DeepSpeed takes them on its command line, --tensor-model-parallel-size " +
        Str(l.tp) + " --pipeline-model-parallel-size " + Str(l.pp) +
        ", with --deepspeed --deepspeed_config <this file>; DeepSpeed's own PipelineModule "
        "takes num_stages in code, and the config's tensor_parallel.autotp_size is AutoTP "
        "for Hugging Face models, not Megatron-style TP");
  }
  if (l.tp > 1 && l.sp) {
    notes.push_back(
        "sp=on (Megatron sequence parallelism) is a model-code setting, not in "
        "the DeepSpeed config");
  }
  if (l.cp > 1) {
    notes.push_back("cp=" + Str(l.cp) +
                    " (context parallelism) is not in the DeepSpeed config; the batch keys "
                    "assume dp=" +
                    Str(l.dp) +
                    " data-parallel ranks, not counting the cp ranks, which the training "
                    "script's process groups must match");
  }
  if (l.ep > 1 || m.moe) {
    notes.push_back("ep=" + Str(l.ep) +
                    ": expert parallelism is set where the MoE layers are built "
                    "(deepspeed.moe.layer.MoE ep_size), or by expert_parallel.autoep_size for "
                    "Hugging Face models; not emitted");
  }
  if (l.uneven_split()) {
    notes.push_back("the uneven pipeline split (" + FormatSplit(l) +
                    ") is not a config key: DeepSpeed's PipelineModule(partition_method=...) places layers by its "
                    "own method (uniform, parameters or type:regex), set where the model is built; not emitted");
  }
  if (l.pp > 1) {
    notes.push_back("schedule=" + ScheduleName(l.schedule) +
                    (l.vpp > 1 ? ", vpp=" + Str(l.vpp) : "") +
                    ": the pipeline schedule and virtual stages are not config keys (DeepSpeed's "
                    "pipeline engine runs its own schedule)");
  }
  if (l.recompute == Recompute::kSelective || l.recompute == Recompute::kOp) {
    notes.push_back(
        "recompute=" + RecomputeName(l.recompute) + ": which layers or parts are recomputed is chosen by the "
        "model code; activation_checkpointing only configures DeepSpeed's "
        "checkpointing");
  }
  if (l.dtype == DType::kFp8) {
    notes.push_back(
        "dtype=fp8: the DeepSpeed config has no fp8 mode (fp8 GEMMs come from "
        "Transformer Engine in the model code); bf16 is enabled");
  }
  if (l.tp > 1 && l.overlap_tp != TpOverlap::kOff) {
    notes.push_back("overlap_tp=" + TpOverlapName(l.overlap_tp) +
                    " is a model-code setting (Megatron TP), not in the config");
  }
  if (l.grad_compression > 1) {
    notes.push_back("compress=" + Ratio(l.grad_compression) +
                    " (gradient compression) is not expressed in this config");
  }
  return notes;
}

}  // namespace

std::string EmitMegatron(const ModelSpec& m, const Layout& l) {
  CHECK(l.dp > 0 && l.gbs > 0) << "EmitMegatron needs a resolved layout: " << FormatLayout(l);
  MegatronArgs a;
  a.Comment("Megatron-LM pretrain_gpt.py arguments for " + m.name + ", layout " + FormatLayout(l));
  a.Comment(
      "names as in megatron/training/arguments.py (Megatron-Core era); releases before "
      "mcore became the default also need --use-mcore-models");
  AddModelShape(m, l, a);
  AddParallelism(m, l, a);
  AddBatchAndRecompute(l, a);
  AddOptimizerAndOverlap(l, a);
  AddPrecisionAndAttention(l, a);
  return a.str();
}

// Keys from docs/_pages/config-json.md; zero_optimization keys and defaults from
// deepspeed/runtime/zero/config.py (stage3_prefetch_bucket_size is the alias of
// prefetch_bucket_size, default 5e7 elements; 0 disables ZeRO-3 prefetching in
// partitioned_param_coordinator.py).
std::string EmitDeepSpeed(const ModelSpec& m, const Layout& l) {
  CHECK(l.dp > 0 && l.gbs > 0) << "EmitDeepSpeed needs a resolved layout: " << FormatLayout(l);
  // Steps per optimizer update = gbs / (dp x mbs); DeepSpeed checks train_batch_size =
  // micro batch x accumulation steps x data-parallel ranks.
  const int64_t accumulation = l.microbatches();
  JsonWriter j;
  j.BeginObject();
  j.Field("train_batch_size", l.gbs);
  j.Field("train_micro_batch_size_per_gpu", l.mbs);
  j.Field("gradient_accumulation_steps", accumulation);
  j.Field("gradient_clipping", 1.0);

  j.Key("zero_optimization").BeginObject();
  j.Field("stage", l.zero);
  j.Field("overlap_comm", l.overlap_dp);
  j.Field("contiguous_gradients", true);
  if (l.offload != Offload::kNone) {
    j.Key("offload_optimizer").BeginObject().Field("device", "cpu").EndObject();
  }
  if (l.offload == Offload::kOptimizerAndParams) {
    j.Key("offload_param").BeginObject().Field("device", "cpu").EndObject();
  }
  if (l.bucket_params > 0) j.Field("reduce_bucket_size", l.bucket_params);
  if (l.zero == 3) {
    const int64_t kPrefetchElements = 50'000'000;  // DeepSpeedZeroConfig default
    j.Field("stage3_prefetch_bucket_size", l.prefetch ? kPrefetchElements : int64_t{0});
    j.Field("stage3_max_live_parameters", l.live_params);
  }
  j.EndObject();

  if (l.dtype == DType::kBf16 || l.dtype == DType::kFp8) {
    j.Key("bf16").BeginObject().Field("enabled", true).EndObject();
  } else if (l.dtype == DType::kFp16) {
    j.Key("fp16").BeginObject().Field("enabled", true).EndObject();
  }

  if (l.recompute != Recompute::kNone) {
    // Partitioning splits each checkpoint over the model-parallel (TP) group.
    // contiguous_memory_optimization is left at its default (off): it needs number_checkpoints,
    // the checkpoints alive at once, to size its buffers (deepspeed/runtime/activation_
    // checkpointing/checkpointing.py, configure), and it only avoids fragmentation, which
    // shardsim's memory model does not price either way.
    j.Key("activation_checkpointing").BeginObject();
    j.Field("partition_activations", l.tp > 1);
    j.EndObject();
  }

  const std::vector<std::string> notes = DeepSpeedNotes(m, l);
  if (!notes.empty()) {
    j.Key("_shardsim_notes").BeginArray();
    for (const std::string& n : notes) j.Value(n);
    j.EndArray();
  }
  j.EndObject();
  return j.str();
}

}  // namespace shardsim::planner
