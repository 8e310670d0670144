// See mcore_settings.h. Defaults are Megatron-LM's arguments.py and Megatron-Core's
// TransformerConfig at NVIDIA/Megatron-LM 000c4ac24f61.
#include "src/io/mcore_settings.h"

#include <algorithm>

#include "src/util/strings.h"

namespace shardsim {

const McoreKeys& MegatronArgumentKeys() {
  static const auto* kKeys = new McoreKeys{
      "Megatron-LM",
      "--tensor-model-parallel-size",
      "--expert-model-parallel-size",
      "--expert-tensor-parallel-size",
      "--moe-extended-tp",
      "--moe-token-dispatcher-type",
      "pass --moe-token-dispatcher-type alltoall",
      "--moe-grouped-gemm",
      "--recompute-modules",
      "--cp-comm-type",
      "--num-distributed-optimizer-instances",
      "--pipeline-model-parallel-layout",
      "--microbatch-group-size-per-virtual-pipeline-stage",
      "--fp4-format",
      {"--use-torch-fsdp2", "--use-megatron-fsdp"},
      {"--first-last-layers-bf16"}};
  return *kKeys;
}

const McoreKeys& NemoOverrideKeys() {
  static const auto* kKeys = new McoreKeys{
      "Megatron-Core",
      "tensor_model_parallel_size",
      "expert_model_parallel_size",
      "trainer.strategy.expert_tensor_parallel_size",
      "trainer.strategy.moe_extended_tp",
      "model.config.moe_token_dispatcher_type",
      "set it to \"alltoall\"",
      "model.config.moe_grouped_gemm",
      "model.config.recompute_modules",
      "model.config.cp_comm_type",
      "trainer.strategy.num_distributed_optimizer_instances",
      "trainer.strategy.pipeline_model_parallel_layout",
      "trainer.strategy.microbatch_group_size_per_vp_stage",
      "trainer.plugins.fp4",
      {"trainer.strategy.fsdp"},
      {"model.config.first_last_layers_bf16", "trainer.plugins.first_last_layers_bf16"}};
  return *kKeys;
}

namespace {

// A setting given, NeMo's None counting as not (LocatedValues::Has keeps None: mla_keys.cc
// tells an explicit None from an absent key).
bool Given(const LocatedValues& r, const std::string& key) { return r.Has(key) && r.Text(key, "None") != "None"; }

// A switch given (Megatron-LM's, which takes no value) or a bool set True (NeMo's).
bool On(LocatedValues& r, const std::string& key) {
  return Given(r, key) && (r.Text(key, "").empty() || r.Bool(key, false));
}

}  // namespace

void CheckMcoreSettings(LocatedValues& r, const McoreKeys& k, const ModelSpec& m, Layout& l,
                        std::vector<std::string>* warnings) {
  auto refuse = [&](const std::string& key, const std::string& what) {
    const std::string value = r.Text(key, "");
    r.Error(key, key + (value.empty() ? "" : " " + value) + ": " + what + " is not modelled");
  };
  const std::string dispatcher = r.Choice(k.dispatcher, "allgather", {"allgather", "alltoall", "flex"});
  if (m.moe) {
    // The experts' TP size (Layout::etp; the TP size where not given, arguments.py 439-440),
    // folded with EP out of the stage's TP x CP x DP ranks (placement.h ExpertCoordOf); the
    // layout check says where it does not fit.
    if (Given(r, k.etp)) l.etp = r.Int(k.etp, l.tp);
    if (On(r, k.extended_tp)) refuse(k.extended_tp, "experts split over TP x EP (shardsim splits them as the attention)");
    // The token dispatcher: shardsim prices alltoall (ops.cc, layer_plan.cc); allgather, the
    // default (_add_moe_args; TransformerConfig), hands every token to every expert-parallel rank
    // and is not modelled; flex (DeepEP, HybridEP) exchanges the same tokens all-to-all.
    if (l.ep > 1 && dispatcher == "allgather") {
      r.Error(k.dispatcher, k.dispatcher + " allgather" + (Given(r, k.dispatcher) ? "" : " (" + k.owner + "'s default)") +
                                " with " + k.ep + " " + std::to_string(l.ep) +
                                ": shardsim prices the alltoall dispatcher; the allgather one, every token to every "
                                "expert-parallel rank, is not modelled (" + k.dispatcher_fix + ")");
    }
    if (l.ep > 1 && dispatcher == "flex") {
      warnings->push_back(r.Where(k.dispatcher) + ": " + k.dispatcher +
                          " flex priced as alltoall (the same tokens exchanged; DeepEP's and HybridEP's fused "
                          "kernels are not modelled)");
    }
    // Without the grouped GEMM Megatron-Core runs a rank's experts one after another
    // (SequentialMLP, transformer_engine_spec_provider.py grouped_mlp_modules); shardsim prices
    // them as one grouped GEMM: a lower bound there.
    const int64_t per_rank = m.moe->experts / std::max<int64_t>(1, l.ep);
    if (per_rank > 1 && !On(r, k.grouped_gemm)) {
      warnings->push_back((Given(r, k.grouped_gemm) ? k.grouped_gemm + " " + r.Text(k.grouped_gemm, "") : "no " + k.grouped_gemm) +
                          ": Megatron-Core runs each rank's " + std::to_string(per_rank) +
                          " experts one after another (SequentialMLP); shardsim prices them as one grouped GEMM, "
                          "so the experts' time is a lower bound");
    }
  }
  // Selective recompute is the attention core's (recompute=selective, Korthikanti et al. 2022);
  // the modules' default, ["core_attn"], is that (they matter only to it). An empty list
  // (Megatron-LM's nargs="*" flag given without values, NeMo's []) recomputes nothing: the
  // default applies only where the list is None (TransformerConfig.__post_init__:
  // `if self.recompute_modules is None: self.recompute_modules = ["core_attn"]`, at
  // NVIDIA/Megatron-LM d98e8a64dd), so selective granularity over no module is recompute=none.
  if (l.recompute == Recompute::kSelective && Given(r, k.recompute_modules)) {
    const std::vector<std::string> modules = SplitValueList(r.Text(k.recompute_modules, ""));
    if (modules.empty()) {
      l.recompute = Recompute::kNone;
      warnings->push_back(k.recompute_modules + " with no module: selective recompute of nothing, read as recompute=none");
    } else if (modules != std::vector<std::string>{"core_attn"}) {
      refuse(k.recompute_modules, "recomputing other modules than the attention core (core_attn)");
    }
  }
  for (const std::string& fsdp : k.fsdp) {
    if (Given(r, fsdp)) refuse(fsdp, "Megatron-Core's FSDP (price a ZeRO-3-like run with --layout zero=3 instead)");
  }
  // Context parallelism is the ring exchange of keys and values (p2p, the default).
  if (l.cp > 1 && Given(r, k.cp_comm_type)) {
    for (const std::string& type : SplitValueList(r.Text(k.cp_comm_type, ""))) {
      if (type != "p2p") {
        refuse(k.cp_comm_type, "context parallelism by " + type + " (shardsim prices p2p, the ring)");
        break;
      }
    }
  }
  if (l.zero >= 1 && r.Int(k.optimizer_instances, 1) > 1) {
    refuse(k.optimizer_instances, "a distributed optimizer sharded over part of the data-parallel ranks");
  }
  if (Given(r, k.pipeline_layout)) {
    refuse(k.pipeline_layout, "a custom pipeline layout (the first and last stages' layer counts are read)");
  }
  if (l.vpp > 1 && Given(r, k.microbatch_group) && r.Int(k.microbatch_group, 1) != l.pp) {
    refuse(k.microbatch_group, "an interleaved schedule whose micro-batch groups are not the pipeline size");
  }
  for (const std::string& edges : k.bf16_edges) {
    if (l.dtype == DType::kFp8 && On(r, edges)) refuse(edges, "bf16 first and last layers under fp8");
  }
  if (Given(r, k.fp4)) refuse(k.fp4, "fp4 training");
}

}  // namespace shardsim
