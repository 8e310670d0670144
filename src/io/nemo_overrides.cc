// See nemo_overrides.h.
#include "src/io/nemo_overrides.h"
#include "src/io/cuda_graph_scope.h"
#include "src/io/mcore_settings.h"
#include "src/io/mla_keys.h"
#include "src/io/moe_layer_freq.h"

#include <sstream>

#include "src/io/located_values.h"
#include "src/util/strings.h"

namespace shardsim {
namespace {

const std::vector<std::string>& Paths() {
  static const auto* kPaths = new std::vector<std::string>{
      "model.config.num_layers", "model.config.hidden_size", "model.config.ffn_hidden_size",
      "model.config.num_attention_heads", "model.config.num_query_groups", "model.config.kv_channels",
      "model.config.seq_length", "model.config.gated_linear_unit", "model.config.normalization",
      "model.config.position_embedding_type", "model.config.rotary_base",
      "model.config.share_embeddings_and_output_weights", "model.config.add_bias_linear",
      "model.config.add_qkv_bias", "model.config.qk_layernorm", "model.config.multi_latent_attention",
      "model.config.q_lora_rank", "model.config.kv_lora_rank", "model.config.qk_head_dim",
      "model.config.qk_pos_emb_head_dim", "model.config.v_head_dim", "model.config.attention_dropout", "model.config.hidden_dropout",
      "model.config.num_moe_experts", "model.config.moe_router_topk", "model.config.moe_ffn_hidden_size",
      "model.config.moe_layer_freq", "model.config.moe_shared_expert_intermediate_size",
      "model.config.moe_shared_expert_gate", "model.config.mtp_num_layers", "model.config.recompute_granularity", "model.config.recompute_method",
      "model.config.recompute_num_layers", "model.config.attention_backend",
      "trainer.strategy.tensor_model_parallel_size", "trainer.strategy.pipeline_model_parallel_size",
      "trainer.strategy.virtual_pipeline_model_parallel_size", "trainer.strategy.context_parallel_size",
      "trainer.strategy.sequence_parallel", "trainer.strategy.expert_model_parallel_size",
      "trainer.strategy.expert_tensor_parallel_size", "model.config.moe_token_dispatcher_type",
      "model.config.moe_grouped_gemm",
      // Read to refuse or warn about what shardsim does not model (CheckMcoreSettings).
      "model.config.recompute_modules", "trainer.strategy.fsdp", "model.config.cp_comm_type",
      "trainer.strategy.num_distributed_optimizer_instances", "trainer.strategy.pipeline_model_parallel_layout",
      "trainer.strategy.microbatch_group_size_per_vp_stage", "trainer.strategy.moe_extended_tp",
      "model.config.first_last_layers_bf16", "trainer.plugins.first_last_layers_bf16", "trainer.plugins.fp4",
      "model.config.moe_expert_capacity_factor",
      "trainer.strategy.num_layers_in_first_pipeline_stage", "trainer.strategy.num_layers_in_last_pipeline_stage",
      "trainer.strategy.account_for_embedding_in_pipeline_split",
      "trainer.strategy.account_for_loss_in_pipeline_split", "data.micro_batch_size", "data.global_batch_size",
      "data.seq_length", "optim.config.use_distributed_optimizer", "trainer.strategy.ddp.overlap_grad_reduce",
      "trainer.strategy.ddp.overlap_param_gather", "trainer.strategy.ddp.bucket_size", "trainer.plugins",
      "trainer.plugins.fp8_param_gather", "trainer.plugins.grad_reduce_in_fp32",
      "trainer.strategy.ddp.grad_reduce_in_fp32",
      // MegatronCommOverlapCallback's arguments, as "callback.<name>".
      "callback.tp_comm_overlap", "callback.overlap_p2p_comm", "model.config.enable_cuda_graph",
      "model.config.cuda_graph_scope"};
  return *kPaths;
}

std::string Unquote(const std::string& v) {
  if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front()) return v.substr(1, v.size() - 2);
  return v;
}

}  // namespace

std::vector<std::string> NemoPathsRead() { return Paths(); }


StatusOr<MegatronRead> ParseNemoOverrides(const std::string& text, const std::string& name) {
  MegatronRead out;
  LocatedValues r(name, /*none_is_absent=*/true);
  std::istringstream in(text);
  int number = 0;
  auto where = [&](int col) { return name + ":" + std::to_string(number) + ":" + std::to_string(col); };
  const std::string kAppend = "recipe.trainer.callbacks.append(run.Config(MegatronCommOverlapCallback";
  auto put = [&](const std::string& path, const std::string& value, int col) -> Status {
    if (!r.Set(path, Unquote(Trim(value)), {number, col}, {number, col})) {
      return Status::Error(where(col) + ": " + path + " set twice");
    }
    for (const std::string& p : Paths()) {
      if (p == path) return Status::Ok();
    }
    const std::string near = ClosestMatch(path, Paths());
    if (!near.empty()) out.warnings.push_back(where(col) + ": recipe." + path + " is not a setting shardsim reads (did you mean recipe." + near + "?)");
    out.ignored.push_back(path);
    return Status::Ok();
  };
  for (std::string raw; std::getline(in, raw);) {
    ++number;
    const std::string line = Trim(raw);
    if (line.empty() || line[0] == '#' || line.rfind("import ", 0) == 0 || line.rfind("from ", 0) == 0) continue;
    const int col = static_cast<int>(raw.find_first_not_of(" \t")) + 1;
    if (line.rfind(kAppend, 0) == 0) {
      // run.Config(MegatronCommOverlapCallback, key=value, ...)
      const std::string inner = line.substr(kAppend.size());
      if (inner.size() < 2 || inner.compare(inner.size() - 2, 2, "))") != 0) {
        return Status::Error(where(col) + ": expected recipe.trainer.callbacks.append(run.Config(MegatronCommOverlapCallback, key=value, ...))");
      }
      for (const std::string& arg : Split(inner.substr(0, inner.size() - 2), ',')) {
        const std::string a = Trim(arg);
        if (a.empty()) continue;
        const size_t eq = a.find('=');
        if (eq == std::string::npos) return Status::Error(where(col) + ": MegatronCommOverlapCallback: expected key=value, found '" + a + "'");
        SHARDSIM_RETURN_IF_ERROR(put("callback." + Trim(a.substr(0, eq)), a.substr(eq + 1), col));
      }
      continue;
    }
    const size_t eq = line.find('=');
    if (line.rfind("recipe.", 0) != 0 || eq == std::string::npos || line.find("==") != std::string::npos) {
      return Status::Error(where(col) + ": expected `recipe.<path> = <value>`, found '" + line + "'");
    }
    const std::string path = Trim(line.substr(7, eq - 7));
    if (path == "trainer.callbacks") continue;  // the emitter's `= recipe.trainer.callbacks or []`
    SHARDSIM_RETURN_IF_ERROR(put(path, line.substr(eq + 1), col));
  }

  ModelSpec& m = out.model;
  for (const char* required : {"model.config.num_layers", "model.config.hidden_size", "model.config.num_attention_heads",
                               "model.config.seq_length"}) {
    if (!r.Has(required)) r.Error(required, "recipe." + std::string(required) + ": missing (the model's shape)");
  }
  SHARDSIM_RETURN_IF_ERROR(r.status());
  m.layers = r.Int("model.config.num_layers", 0);
  m.hidden = r.Int("model.config.hidden_size", 0);
  m.heads = r.Int("model.config.num_attention_heads", 0);
  m.kv_heads = r.Int("model.config.num_query_groups", m.heads);  // None: every head its own K/V
  m.head_dim = r.Int("model.config.kv_channels", m.heads > 0 ? m.hidden / m.heads : 0);
  m.ffn_hidden = r.Int("model.config.ffn_hidden_size", 4 * m.hidden);
  m.seq_len = r.Int("model.config.seq_length", 0);
  if (r.Has("data.seq_length") && r.Int("data.seq_length", m.seq_len) != m.seq_len) {
    r.Error("data.seq_length", "recipe.data.seq_length differs from recipe.model.config.seq_length");
  }
  m.activation = r.Bool("model.config.gated_linear_unit", false) ? Activation::kSwiglu : Activation::kGelu;
  m.norm = r.Choice("model.config.normalization", "LayerNorm", {"LayerNorm", "RMSNorm"}) == "RMSNorm" ? Norm::kRmsNorm
                                                                                                    : Norm::kLayerNorm;
  m.position = r.Choice("model.config.position_embedding_type", "learned_absolute", {"learned_absolute", "rope"}) == "rope"
                   ? Position::kRope
                   : Position::kLearned;
  if (m.position == Position::kRope) m.rotary_base = static_cast<double>(r.Int("model.config.rotary_base", 10000));
  m.tied_embeddings = r.Bool("model.config.share_embeddings_and_output_weights", true);
  m.bias = r.Bool("model.config.add_bias_linear", true);
  m.qkv_bias = !m.bias && r.Bool("model.config.add_qkv_bias", false);
  m.qk_norm = r.Bool("model.config.qk_layernorm", false);
  if (r.Bool("model.config.multi_latent_attention", false)) {
    // MLATransformerConfig (megatron/core/transformer/transformer_config.py): q_lora_rank 512
    // (None: no query rank), kv_lora_rank 512, qk_head_dim 128, qk_pos_emb_head_dim 64,
    // v_head_dim 128.
    ReadMla(r, {"model.config.q_lora_rank", "model.config.kv_lora_rank", "model.config.qk_head_dim",
                "model.config.qk_pos_emb_head_dim", "model.config.v_head_dim", 512, 512}, m);
  }
  m.dropout = r.Number("model.config.attention_dropout", 0.1, 0, 1) > 0 ||
              r.Number("model.config.hidden_dropout", 0.1, 0, 1) > 0;
  if (r.Text("model.config.num_moe_experts", "None") != "None") {
    MoeSpec s;
    s.experts = r.Int("model.config.num_moe_experts", 0, 2);
    s.top_k = r.Int("model.config.moe_router_topk", 2);
    s.ffn_hidden = r.Int("model.config.moe_ffn_hidden_size", m.ffn_hidden);
    ReadMoeLayerFreq(r, "model.config.moe_layer_freq", m.layers, s);  // an integer or a list expression
    if (r.Text("model.config.moe_shared_expert_intermediate_size", "None") != "None") {
      s.shared_ffn_hidden = r.Int("model.config.moe_shared_expert_intermediate_size", 0, 0);
    }
    s.shared_gate = r.Bool("model.config.moe_shared_expert_gate", false);
    m.moe = s;
  }
  if (r.Text("model.config.mtp_num_layers", "None") != "None") m.mtp_layers = r.Int("model.config.mtp_num_layers", 0, 0);

  Layout& l = out.layout;
  l.tp = r.Int("trainer.strategy.tensor_model_parallel_size", 1);
  l.pp = r.Int("trainer.strategy.pipeline_model_parallel_size", 1);
  l.vpp = r.Int("trainer.strategy.virtual_pipeline_model_parallel_size", 1);
  l.cp = r.Int("trainer.strategy.context_parallel_size", 1);
  l.ep = r.Int("trainer.strategy.expert_model_parallel_size", 1);
  if (r.Text("model.config.moe_expert_capacity_factor", "None") != "None") {
    l.moe_capacity = r.Number("model.config.moe_expert_capacity_factor", 0, 0, 64);
  }
  l.sp = l.tp > 1 && r.Bool("trainer.strategy.sequence_parallel", false);
  l.first_stage_layers = r.Int("trainer.strategy.num_layers_in_first_pipeline_stage", 0);
  l.last_stage_layers = r.Int("trainer.strategy.num_layers_in_last_pipeline_stage", 0);
  l.embedding_in_split = r.Bool("trainer.strategy.account_for_embedding_in_pipeline_split", false);
  l.loss_in_split = r.Bool("trainer.strategy.account_for_loss_in_pipeline_split", false);
  l.schedule = l.vpp > 1 ? Schedule::kInterleaved : Schedule::k1F1B;
  l.schedule_given = true;
  l.mbs = r.Int("data.micro_batch_size", 1);
  l.gbs = r.Int("data.global_batch_size", 0);
  const std::string granularity = r.Text("model.config.recompute_granularity", "None");
  if (granularity == "selective") {
    l.recompute = Recompute::kSelective;
  } else if (granularity == "full") {
    l.recompute = Recompute::kFull;
    const std::string method = r.Choice("model.config.recompute_method", "uniform", {"uniform", "block"});
    const int64_t n = r.Int("model.config.recompute_num_layers", 1);
    if (method != "uniform" || n != 1) {
      out.warnings.push_back("recompute_method " + method + ", recompute_num_layers " + std::to_string(n) +
                             ": read as recompute=full of every layer from its own input");
    }
  } else if (granularity != "None") {
    r.Choice("model.config.recompute_granularity", "None", {"None", "selective", "full"});
  }
  l.zero = r.Bool("optim.config.use_distributed_optimizer", false) ? 1 : 0;
  l.overlap_dp = r.Bool("trainer.strategy.ddp.overlap_grad_reduce", false);
  l.bucket_params = r.Int("trainer.strategy.ddp.bucket_size", 0, 0);
  const std::string plugin = r.Choice("trainer.plugins", "bf16_mixed()", {"bf16_mixed()", "fp16_mixed()", "bf16_with_fp8_mixed()"});
  l.dtype = plugin == "fp16_mixed()" ? DType::kFp16 : plugin == "bf16_with_fp8_mixed()" ? DType::kFp8 : DType::kBf16;
  l.dtype_given = true;
  // bf16_with_fp8_mixed() gathers fp8 weights unless told not to.
  l.fp8_params = l.dtype == DType::kFp8 && r.Bool("trainer.plugins.fp8_param_gather", true);
  // Gradients in fp32 unless grad_reduce_in_fp32 is False: MegatronMixedPrecision's argument
  // (True in bf16_mixed() and bf16_with_fp8_mixed(), nemo/collections/llm/recipes/precision/
  // mixed_precision.py), which it writes into the DDP config over the strategy's own.
  const bool ddp_fp32 = r.Bool("trainer.strategy.ddp.grad_reduce_in_fp32", true);
  const bool fp32_grads = r.Bool("trainer.plugins.grad_reduce_in_fp32", ddp_fp32);
  l.grad_bf16 = !fp32_grads && l.dtype != DType::kFp16;
  // AttnBackend as in Megatron-LM's arguments (megatron_args.cc): fused is cuDNN, auto TE's choice.
  const std::string backend = r.Text("model.config.attention_backend", "AttnBackend.auto");
  l.attention = backend == "AttnBackend.unfused" || backend == "AttnBackend.local" ? AttentionImpl::kUnfused
                : backend == "AttnBackend.fused"                                  ? AttentionImpl::kCudnn
                                                                                  : AttentionImpl::kFlash;
  out.attention_auto = backend == "AttnBackend.auto";
  if (l.tp > 1) l.overlap_tp = r.Bool("callback.tp_comm_overlap", false) ? TpOverlap::kOn : TpOverlap::kBackward;
  l.overlap_pp = l.vpp > 1 && r.Bool("callback.overlap_p2p_comm", true);
  // CUDA graphs: each layer (Megatron-Core's "full" scope, the layer), or the whole step
  // ("full_iteration"); the scope's values as src/io/cuda_graph_scope.h reads them, a module
  // scope ("attn", ...) priced as the whole layer, with a warning.
  StatusOr<CudaGraphScopes> scopes =
      ReadCudaGraphScopes(SplitValueList(r.Text("model.config.cuda_graph_scope", "full")));
  if (!scopes.ok()) {
    r.Error("model.config.cuda_graph_scope", "model.config.cuda_graph_scope: " + scopes.status().message());
  } else if (r.Bool("model.config.enable_cuda_graph", false)) {
    l.cuda_graphs = scopes->full_iteration ? CudaGraphs::kStep : CudaGraphs::kLayers;
    if (scopes->full_iteration && !scopes->modules.empty()) {
      r.Error("model.config.cuda_graph_scope", "model.config.cuda_graph_scope: full_iteration takes no module scope");
    }
    if (!scopes->full_iteration && !scopes->modules.empty()) {
      out.warnings.push_back(r.Where("model.config.cuda_graph_scope") + ": cuda_graph_scope " +
                             Join(scopes->modules, " ") +
                             " graphs part of each layer; shardsim prices the whole layer graphed, so the "
                             "host's launch time is a lower bound");
    }
  }
  CheckMcoreSettings(r, NemoOverrideKeys(), out.model, l, &out.warnings);
  SHARDSIM_RETURN_IF_ERROR(r.status());
  return out;
}

}  // namespace shardsim
