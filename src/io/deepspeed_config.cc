// See deepspeed_config.h.
#include "src/io/deepspeed_config.h"

#include <yaml-cpp/yaml.h>

#include <optional>

#include "src/io/yaml_reader.h"

namespace shardsim {
namespace {

// DeepSpeedZeroConfig's fields and aliases that shardsim does not model (deepspeed/runtime/
// zero/config.py at edaa72212): accepted and listed as ignored, so that only a key DeepSpeed
// itself would reject is an error.
const std::vector<std::string>& UnmodelledZeroKeys() {
  static const auto* kKeys = new std::vector<std::string>{
      "contiguous_gradients", "reduce_scatter", "use_multi_rank_bucket_allreduce",
      "allgather_partitions", "allgather_bucket_size", "load_from_fp32_weights",
      "elastic_checkpoint", "sub_group_size", "cpu_offload_param", "cpu_offload_use_pin_memory",
      "cpu_offload", "stage3_param_persistence_threshold", "stage3_model_persistence_threshold",
      "stage3_max_reuse_distance", "stage3_gather_16bit_weights_on_model_save",
      "stage3_gather_fp16_weights_on_model_save", "stage3_module_granularity_threshold",
      "stage3_use_all_reduce_for_fetch_params", "stage3_allgather_sequential",
      "ignore_unused_parameters", "legacy_stage1", "round_robin_gradients",
      "zero_hpz_partition_size", "zero_quantized_weights", "zero_quantized_nontrainable_weights",
      "zero_quantized_gradients", "zeropp_loco_param", "mics_shard_size",
      "mics_hierarchical_params_gather", "memory_efficient_linear", "pipeline_loading_checkpoint",
      "override_module_apply", "log_trace_cache_warnings", "zenflow"};
  return *kKeys;
}

// offload_optimizer / offload_param: the device; the buffer and pinning keys are accepted.
std::optional<std::string> OffloadDevice(YamlMap& zero, const std::string& key) {
  std::optional<YamlMap> m = zero.OptionalMap(key);
  if (!m) return std::nullopt;
  const std::string device = m->OptionalChoice("device", {"none", "cpu", "nvme"}).value_or("none");
  for (const char* k : {"nvme_path", "buffer_count", "buffer_size", "max_in_cpu", "pin_memory",
                        "pipeline_read", "pipeline_write", "fast_init", "ratio", "super_offload",
                        "cpuadam_cores_perc"}) {
    m->Has(k);
  }
  m->Finish();
  return device;
}

}  // namespace

StatusOr<DeepSpeedRead> ParseDeepSpeedConfig(const std::string& text, const std::string& name,
                                             const Layout& base) {
  SHARDSIM_ASSIGN_OR_RETURN(YamlFile file, YamlFile::Parse(text, name));
  YamlMap r = file.Root();
  DeepSpeedRead out;
  Layout l = base;
  const std::optional<long long> tbs = r.OptionalInt("train_batch_size");
  const std::optional<long long> micro = r.OptionalInt("train_micro_batch_size_per_gpu");
  const std::optional<long long> gas = r.OptionalInt("gradient_accumulation_steps");
  r.OptionalNumber("gradient_clipping", 0, 1e30);
  SHARDSIM_RETURN_IF_ERROR(file.status());
  // DeepSpeed's _batch_assertion: train_batch_size == micro x accumulation x dp world size.
  if (!tbs || !micro) {
    return Status::Error(name + ": give train_batch_size and train_micro_batch_size_per_gpu: "
                                "DeepSpeed derives a missing one from the world size, which the "
                                "config does not hold");
  }
  l.gbs = *tbs;
  l.mbs = *micro;
  if (gas) {
    if (*tbs % (*micro * *gas) != 0) {
      return Status::Error(name + ": train_batch_size " + std::to_string(*tbs) +
                           " is not train_micro_batch_size_per_gpu x gradient_accumulation_steps x "
                           "data-parallel ranks (" + std::to_string(*micro) + " x " +
                           std::to_string(*gas) + " does not divide it)");
    }
    l.dp = *tbs / (*micro * *gas);
  } else {
    l.dp = 0;  // from the GPU count
  }

  if (std::optional<YamlMap> zero = r.OptionalMap("zero_optimization")) {
    l.zero = static_cast<int>(zero->OptionalInt("stage", 0).value_or(0));
    if (l.zero > 3) zero->Error("stage", "expected a ZeRO stage 0..3, found " + std::to_string(l.zero));
    // overlap_comm: None means on for stage 3 only (DeepSpeedZeroConfig.overlap_comm_valid).
    l.overlap_dp = zero->OptionalBool("overlap_comm").value_or(l.zero == 3);
    if (std::optional<long long> b = zero->OptionalInt("reduce_bucket_size", 0)) l.bucket_params = *b;
    if (l.zero == 3) {
      l.prefetch = zero->OptionalInt("stage3_prefetch_bucket_size", 0).value_or(50'000'000) > 0;
      l.live_params = zero->OptionalInt("stage3_max_live_parameters", 0).value_or(1'000'000'000);
    } else {
      zero->Has("stage3_prefetch_bucket_size");
      zero->Has("stage3_max_live_parameters");
    }
    const std::optional<std::string> opt = OffloadDevice(*zero, "offload_optimizer");
    const std::optional<std::string> par = OffloadDevice(*zero, "offload_param");
    const bool opt_off = opt && *opt != "none", par_off = par && *par != "none";
    if (par_off && !opt_off) {
      zero->Error("offload_param", "offload_param without offload_optimizer: shardsim's offload "
                                   "modes move the optimizer first (offload=optimizer or optimizer+params)");
    }
    l.offload = par_off ? Offload::kOptimizerAndParams : opt_off ? Offload::kOptimizer : Offload::kNone;
    if ((opt && *opt == "nvme") || (par && *par == "nvme")) {
      out.warnings.push_back("offload device nvme is read as host memory (shardsim prices PCIe to the host, not NVMe)");
    }
    // ZeRO++ and MiCS change what is exchanged and kept (a node-local secondary copy of the
    // weights, int8 weights or gradients on the wire, sharding over a sub-group): refused when
    // on, not priced as plain ZeRO (deepspeed/runtime/zero/config.py defaults: 1, false, false, -1).
    if (zero->OptionalInt("zero_hpz_partition_size", 0).value_or(1) > 1) {
      zero->Error("zero_hpz_partition_size", "ZeRO++'s hierarchical partitioning (hpZ) is not modelled");
    }
    for (const char* q : {"zero_quantized_weights", "zero_quantized_gradients"}) {
      if (zero->OptionalBool(q).value_or(false)) zero->Error(q, std::string("ZeRO++'s quantized communication (") + q + ") is not modelled");
    }
    if (zero->OptionalInt("mics_shard_size", -1).value_or(-1) > 0) {
      zero->Error("mics_shard_size", "MiCS (sharding over a sub-group of the data-parallel ranks) is not modelled");
    }
    for (const std::string& k : UnmodelledZeroKeys()) {
      if (zero->Has(k)) out.ignored.push_back("zero_optimization." + k);
    }
    zero->Finish();
  } else {
    l.zero = 0;
    l.overlap_dp = false;
  }
  std::optional<YamlMap> bf16 = r.OptionalMap("bf16");
  std::optional<YamlMap> fp16 = r.OptionalMap("fp16");
  const bool bf = bf16 && bf16->OptionalBool("enabled").value_or(false);
  const bool hf = fp16 && fp16->OptionalBool("enabled").value_or(false);
  if (bf && hf) r.Error("fp16", "bf16 and fp16 both enabled");
  // fp8 GEMMs come from the model code (Transformer Engine), so a bf16 base stays fp8.
  if (!(bf && base.dtype == DType::kFp8 && base.dtype_given)) {
    l.dtype = bf ? DType::kBf16 : hf ? DType::kFp16 : DType::kFp32;
    l.dtype_given = true;
  }
  SHARDSIM_RETURN_IF_ERROR(file.status());
  // The other top-level sections: accepted, not modelled.
  const YAML::Node root = YAML::Load(text);
  for (const auto& kv : root) {
    const std::string key = kv.first.as<std::string>();
    static const char* kRead[] = {"train_batch_size", "train_micro_batch_size_per_gpu",
                                  "gradient_accumulation_steps", "gradient_clipping",
                                  "zero_optimization", "bf16", "fp16"};
    bool read = false;
    for (const char* k : kRead) read = read || key == k;
    if (!read && key != "_shardsim_notes") out.ignored.push_back(key);  // ours: emit.h
  }
  out.layout = l;
  return out;
}

}  // namespace shardsim
