// EmitNemo (emit.h): NeMo 2 recipe overrides. Names checked against NVIDIA/NeMo 8cfedd7203:
// MegatronStrategy.__init__ (nemo/lightning/pytorch/strategies/megatron_strategy.py), the
// recipes' ddp / optim / plugins / callbacks (nemo/collections/llm/recipes/llama3_70b.py),
// bf16_mixed / fp16_mixed / bf16_with_fp8_mixed (nemo/collections/llm/recipes/precision/
// mixed_precision.py), MegatronCommOverlapCallback (nemo/lightning/pytorch/callbacks/
// megatron_comm_overlap.py), GPTConfig (nemo/collections/llm/gpt/model/base.py) and
// Megatron-Core's TransformerConfig (megatron/core/transformer/transformer_config.py,
// NVIDIA/Megatron-LM d98e8a64dd). tests/emit_test.cc keeps the names.
#include <cstdio>
#include <string>
#include <vector>

#include "planner/emit.h"
#include "src/io/moe_layer_freq.h"
#include "src/util/check.h"

namespace shardsim::planner {
namespace {

std::string Py(bool b) { return b ? "True" : "False"; }
std::string Py(int64_t v) { return std::to_string(v); }
std::string PyStr(const std::string& s) { return "\"" + s + "\""; }

class Overrides {
 public:
  void Set(const std::string& path, const std::string& value) { lines_.push_back("recipe." + path + " = " + value); }
  void Line(const std::string& line) { lines_.push_back(line); }
  void Comment(const std::string& text) { comments_.push_back("# " + text); }
  void NotExpressible(const std::string& what) { Comment("not expressible in NeMo 2: " + what); }
  std::string str() const {
    std::string out;
    for (const std::string& c : comments_) out += c + "\n";
    for (const std::string& l : lines_) out += l + "\n";
    return out;
  }

 private:
  std::vector<std::string> comments_, lines_;
};

// The model as Megatron-Core's TransformerConfig / NeMo's GPTConfig fields.
void ModelConfig(const ModelSpec& m, Overrides& o) {
  o.Set("model.config.num_layers", Py(m.layers));
  o.Set("model.config.hidden_size", Py(m.hidden));
  o.Set("model.config.ffn_hidden_size", Py(m.ffn_hidden));
  o.Set("model.config.num_attention_heads", Py(m.heads));
  o.Set("model.config.num_query_groups", Py(m.kv_heads));
  if (m.mla) {
    // MLATransformerConfig's fields (NeMo's DeepSeek recipes).
    o.Set("model.config.multi_latent_attention", Py(true));
    o.Set("model.config.q_lora_rank", m.mla->q_lora_rank > 0 ? Py(m.mla->q_lora_rank) : "None");
    o.Set("model.config.kv_lora_rank", Py(m.mla->kv_lora_rank));
    o.Set("model.config.qk_head_dim", Py(m.head_dim - m.mla->rope_head_dim));
    o.Set("model.config.qk_pos_emb_head_dim", Py(m.mla->rope_head_dim));
    o.Set("model.config.v_head_dim", Py(m.mla->v_head_dim));
  } else {
    o.Set("model.config.kv_channels", Py(m.head_dim));
  }
  o.Set("model.config.seq_length", Py(m.seq_len));
  o.Set("data.seq_length", Py(m.seq_len));
  o.Set("model.config.gated_linear_unit", Py(m.activation == Activation::kSwiglu));
  o.Set("model.config.normalization", PyStr(m.norm == Norm::kRmsNorm ? "RMSNorm" : "LayerNorm"));
  o.Set("model.config.position_embedding_type", PyStr(m.position == Position::kRope ? "rope" : "learned_absolute"));
  if (m.position == Position::kRope && m.rotary_base > 0) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.0f", m.rotary_base);
    o.Set("model.config.rotary_base", buf);
  }
  o.Set("model.config.share_embeddings_and_output_weights", Py(m.tied_embeddings));
  o.Set("model.config.add_bias_linear", Py(m.bias));
  o.Set("model.config.add_qkv_bias", Py(m.HasQkvBias()));
  if (m.qk_norm) o.Set("model.config.qk_layernorm", Py(true));  // Qwen3's Q/K norms, in its normalization
  if (m.qk_norm_full) o.NotExpressible("Q/K norms over all heads at once (OLMo 2): qk_layernorm normalises each head");
  if (m.norms_per_layer != 2) {
    o.NotExpressible(std::to_string(m.norms_per_layer) + " norms a layer (Megatron-Core's layer has 2)");
  }
  if (!m.norm_weights) o.NotExpressible("norms without weights (OLMo's LayerNorm)");
  if (m.final_logit_softcap > 0) {
    o.NotExpressible(
        "the logits' soft-cap (Gemma 2's final_logit_softcapping): no Megatron-Core "
        "TransformerConfig field");
  }
  if (m.attn_logit_softcap > 0) {
    o.NotExpressible(
        "the attention scores' soft-cap (Gemma 2's attn_logit_softcapping): no Megatron-Core "
        "TransformerConfig field");
  }
  if (m.sliding_window > 0) {
    o.NotExpressible("sliding_window " + std::to_string(m.sliding_window) + " (TransformerConfig.window_size is not "
                     "written: set it as your Megatron-Core version counts the window; priced as a causal window)");
  }
  if (!m.dropout) {
    o.Set("model.config.attention_dropout", "0.0");
    o.Set("model.config.hidden_dropout", "0.0");
  }
  if (m.moe) {
    o.Set("model.config.num_moe_experts", Py(m.moe->experts));
    o.Set("model.config.moe_router_topk", Py(m.moe->top_k));
    o.Set("model.config.moe_ffn_hidden_size", Py(m.moe->ffn_hidden));
    o.Set("model.config.moe_layer_freq", MoeLayerFreqText(*m.moe, m.layers, true));
    if (m.moe->shared_ffn_hidden > 0) {
      o.Set("model.config.moe_shared_expert_intermediate_size", Py(m.moe->shared_ffn_hidden));
      if (m.moe->shared_gate) o.Set("model.config.moe_shared_expert_gate", Py(true));
    }
  }
  // TransformerConfig.mtp_num_layers (Megatron-Core's multi-token prediction depths).
  if (m.mtp_layers > 0) o.Set("model.config.mtp_num_layers", Py(m.mtp_layers));
}

void Parallelism(const ModelSpec& m, const Layout& l, Overrides& o) {
  o.Set("trainer.strategy.tensor_model_parallel_size", Py(l.tp));
  o.Set("trainer.strategy.pipeline_model_parallel_size", Py(l.pp));
  o.Set("trainer.strategy.virtual_pipeline_model_parallel_size", l.vpp > 1 ? Py(l.vpp) : "None");
  o.Set("trainer.strategy.context_parallel_size", Py(l.cp));
  o.Set("trainer.strategy.sequence_parallel", Py(l.tp > 1 && l.sp));
  if (m.moe || l.ep > 1) o.Set("trainer.strategy.expert_model_parallel_size", Py(l.ep));
  // MegatronStrategy's expert_tensor_parallel_size (None: the TP size).
  if (m.moe && l.own_expert_tp()) o.Set("trainer.strategy.expert_tensor_parallel_size", Py(l.etp));
  // The alltoall token dispatcher, as shardsim prices it (Megatron-Core's TransformerConfig
  // default is allgather).
  if (m.moe) o.Set("model.config.moe_token_dispatcher_type", PyStr("alltoall"));
  // The rank's experts as one grouped GEMM (TEGroupedMLP); TransformerConfig's default is False.
  if (m.moe) o.Set("model.config.moe_grouped_gemm", Py(true));
  if (m.moe && l.moe_capacity > 0) {  // TransformerConfig.moe_expert_capacity_factor (None: no capacity)
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", l.moe_capacity);
    o.Set("model.config.moe_expert_capacity_factor", buf);
  }
  if (l.first_stage_layers > 0) o.Set("trainer.strategy.num_layers_in_first_pipeline_stage", Py(l.first_stage_layers));
  if (l.last_stage_layers > 0) o.Set("trainer.strategy.num_layers_in_last_pipeline_stage", Py(l.last_stage_layers));
  if (l.embedding_in_split) o.Set("trainer.strategy.account_for_embedding_in_pipeline_split", "True");
  if (l.loss_in_split) o.Set("trainer.strategy.account_for_loss_in_pipeline_split", "True");
  if (l.pp > 1 && l.schedule != Schedule::k1F1B && l.schedule != Schedule::kInterleaved) {
    o.NotExpressible("schedule=" + ScheduleName(l.schedule) + " (Megatron-Core runs 1F1B and interleaved 1F1B)");
  }
}

void Training(const Layout& l, Overrides& o) {
  o.Set("data.micro_batch_size", Py(l.mbs));
  o.Set("data.global_batch_size", Py(l.gbs));
  switch (l.recompute) {
    case Recompute::kNone:
      o.Set("model.config.recompute_granularity", "None");
      break;
    case Recompute::kSelective:
      o.Set("model.config.recompute_granularity", PyStr("selective"));
      break;
    case Recompute::kOp:
      o.NotExpressible("recompute=op (torchtitan's per-op checkpointing of every other matmul's output): "
                       "Megatron-Core recomputes whole layers or listed modules (recompute_modules)");
      break;
    case Recompute::kFull:
      o.Set("model.config.recompute_granularity", PyStr("full"));
      o.Set("model.config.recompute_method", PyStr("uniform"));
      o.Set("model.config.recompute_num_layers", "1");
      break;
  }
  o.Set("optim.config.use_distributed_optimizer", Py(l.zero >= 1));
  if (l.zero >= 2) o.NotExpressible("zero=" + std::to_string(l.zero) + " (the distributed optimizer is ZeRO-1)");
  o.Set("trainer.strategy.ddp.overlap_grad_reduce", Py(l.overlap_dp));
  o.Set("trainer.strategy.ddp.overlap_param_gather", Py(l.overlap_dp && l.zero >= 1));
  if (l.bucket_params > 0) o.Set("trainer.strategy.ddp.bucket_size", Py(l.bucket_params));
  if (l.offload != Offload::kNone) o.NotExpressible("offload=" + OffloadName(l.offload));
  if (l.grad_compression > 1) o.NotExpressible("gradient compression");
  switch (l.dtype) {
    case DType::kBf16: o.Set("trainer.plugins", "bf16_mixed()"); break;
    case DType::kFp16: o.Set("trainer.plugins", "fp16_mixed()"); break;
    case DType::kFp8:
      o.Set("trainer.plugins", "bf16_with_fp8_mixed()");
      // bf16_with_fp8_mixed() sets fp8_param_gather = True: fp8 weights (fp8_params).
      o.Set("trainer.plugins.fp8_param_gather", Py(l.fp8_params));
      break;
    default: o.NotExpressible("dtype=" + DTypeName(l.dtype)); break;
  }
  // MegatronMixedPrecision's grad_reduce_in_fp32 (True in both bf16 plugins).
  if (l.grad_bf16) o.Set("trainer.plugins.grad_reduce_in_fp32", Py(false));
  // AttnBackend: what the layout prices, not TE's own choice (auto: cuDNN on Hopper).
  o.Set("model.config.attention_backend", l.attention == AttentionImpl::kUnfused ? "AttnBackend.unfused"
                                          : l.attention == AttentionImpl::kCudnn ? "AttnBackend.fused"
                                                                                 : "AttnBackend.flash");
  if (l.attention == AttentionImpl::kFlash1) o.NotExpressible("attention=flash1 (NeMo 2 runs FlashAttention-2 or cuDNN)");
  // TP overlap: userbuffers (on) or Transformer Engine's NCCL overlap of the backward (the
  // default without userbuffers); pipeline sends overlapped in the interleaved schedule.
  const bool interleaved = l.vpp > 1;
  o.Line("recipe.trainer.callbacks = recipe.trainer.callbacks or []");
  o.Line("recipe.trainer.callbacks.append(run.Config(MegatronCommOverlapCallback, tp_comm_overlap=" +
         Py(l.tp > 1 && l.overlap_tp == TpOverlap::kOn) + ", overlap_p2p_comm=" + Py(interleaved && l.overlap_pp) +
         "))");
  if (l.tp > 1 && l.overlap_tp == TpOverlap::kOff) {
    o.NotExpressible("overlap_tp=off (Transformer Engine overlaps the backward's TP communication without userbuffers)");
  }
  // CUDA graphs: Megatron-Core's TransformerConfig.enable_cuda_graph captures each layer;
  // cuda_graph_scope "full_iteration" the whole step (NeMo 2 recipes set them on the model's
  // config; Transformer Engine's RNG tracker, which graphs need, Megatron-Core turns on).
  if (l.cuda_graphs != CudaGraphs::kOff) {
    o.Set("model.config.enable_cuda_graph", Py(true));
    if (l.cuda_graphs == CudaGraphs::kStep) o.Set("model.config.cuda_graph_scope", PyStr("full_iteration"));
  }
}

}  // namespace

std::string EmitNemo(const ModelSpec& m, const Layout& l) {
  CHECK(l.dp > 0 && l.gbs > 0) << "EmitNemo needs a resolved layout: " << FormatLayout(l);
  Overrides o;
  o.Comment("NeMo 2 recipe overrides for " + m.name + ", layout " + FormatLayout(l));
  o.Comment("names as in NVIDIA/NeMo 8cfedd7203 (MegatronStrategy, GPTConfig, MegatronCommOverlapCallback)");
  o.Comment("apply to this model's recipe, e.g. recipe = llm.<model>.pretrain_recipe(num_nodes=..., num_gpus_per_node=...),");
  o.Comment("with " + std::to_string(l.world()) + " ranks in all: NeMo derives dp = world / (tp x pp x cp) = " +
            std::to_string(l.dp));
  o.Line("import nemo_run as run");
  o.Line("from nemo.collections.llm.recipes.precision.mixed_precision import bf16_mixed, bf16_with_fp8_mixed, fp16_mixed");
  o.Line("from nemo.lightning.pytorch.callbacks.megatron_comm_overlap import MegatronCommOverlapCallback");
  o.Line("from megatron.core.transformer.enums import AttnBackend");
  ModelConfig(m, o);
  Parallelism(m, l, o);
  Training(l, o);
  return o.str();
}

}  // namespace shardsim::planner
