// Every key of torchtitan's TOML job config at pytorch/torchtitan v0.2.2 (73a0e6979): the
// fields of torchtitan/config/job_config.py's JobConfig as "section.key", nested dataclasses
// dotted further. torchtitan rejects any other key ("Invalid field names", ConfigManager.
// _dict_to_dataclass), and so does the reader (torchtitan_config.h). tests/torchtitan_test.cc
// checks this list against tests/data/frameworks/torchtitan-73a0e6979.txt, which
// scripts/framework-names.sh extracts from the source.
#include "src/io/torchtitan_config.h"

namespace shardsim {

const std::vector<std::string>& TorchtitanJobConfigKeys() {
  static const auto* kKeys = new std::vector<std::string>{
      "activation_checkpoint.debug", "activation_checkpoint.determinism_check",
      "activation_checkpoint.early_stop", "activation_checkpoint.memory_budget",
      "activation_checkpoint.mode", "activation_checkpoint.per_op_sac_force_recompute_mm_shapes_by_fqns",
      "activation_checkpoint.preserve_rng_state", "activation_checkpoint.selective_ac_option",
      "activation_checkpoint.visualize_memory_budget_pareto", "checkpoint.async_mode",
      "checkpoint.create_seed_checkpoint", "checkpoint.enable",
      "checkpoint.enable_first_step_checkpoint", "checkpoint.enable_ft_dataloader_checkpoints",
      "checkpoint.exclude_from_loading", "checkpoint.export_dtype", "checkpoint.folder",
      "checkpoint.initial_load_in_hf", "checkpoint.initial_load_in_hf_quantized",
      "checkpoint.initial_load_model_only", "checkpoint.initial_load_path", "checkpoint.interval",
      "checkpoint.keep_latest_k", "checkpoint.last_save_in_hf", "checkpoint.last_save_model_only",
      "checkpoint.load_only", "checkpoint.load_step", "comm.init_timeout_seconds", "comm.mode",
      "comm.save_traces_file_prefix", "comm.save_traces_folder", "comm.trace_buf_size",
      "comm.train_timeout_seconds", "compile.backend", "compile.components", "compile.enable",
      "debug.deterministic", "debug.deterministic_warn_only", "debug.moe_force_load_balance",
      "debug.seed", "experimental.custom_args_module", "experimental.custom_import",
      "fault_tolerance.enable", "fault_tolerance.group_size", "fault_tolerance.min_replica_size",
      "fault_tolerance.process_group", "fault_tolerance.process_group_timeout_ms",
      "fault_tolerance.replica_id", "fault_tolerance.semi_sync_method", "job.config_file",
      "job.custom_config_module", "job.description", "job.dump_folder", "job.print_config",
      "job.save_config_file", "lr_scheduler.decay_ratio", "lr_scheduler.decay_type",
      "lr_scheduler.min_lr_factor", "lr_scheduler.total_steps", "lr_scheduler.warmup_steps",
      "memory_estimation.disable_fake_mode", "memory_estimation.enable",
      "metrics.disable_color_printing", "metrics.enable_tensorboard", "metrics.enable_wandb",
      "metrics.log_freq", "metrics.save_for_all_ranks", "metrics.save_tb_folder", "model.converters",
      "model.flavor", "model.hf_assets_path", "model.name", "model.print_after_conversion",
      "model.tokenizer_path", "optimizer.beta1", "optimizer.beta2", "optimizer.early_step_in_backward",
      "optimizer.eps", "optimizer.implementation", "optimizer.lr", "optimizer.name",
      "optimizer.weight_decay", "parallelism.context_parallel_degree",
      "parallelism.context_parallel_load_balancer", "parallelism.context_parallel_rotate_method",
      "parallelism.data_parallel_replicate_degree", "parallelism.data_parallel_shard_degree",
      "parallelism.disable_loss_parallel", "parallelism.enable_async_tensor_parallel",
      "parallelism.expert_parallel_comm_backend", "parallelism.expert_parallel_degree",
      "parallelism.expert_tensor_parallel_degree", "parallelism.fsdp_reshard_after_forward",
      "parallelism.module_fqns_per_model_part", "parallelism.pipeline_parallel_degree",
      "parallelism.pipeline_parallel_expert_parallel_overlap",
      "parallelism.pipeline_parallel_first_stage_less_layers",
      "parallelism.pipeline_parallel_last_stage_less_layers",
      "parallelism.pipeline_parallel_layers_per_stage", "parallelism.pipeline_parallel_microbatch_size",
      "parallelism.pipeline_parallel_schedule", "parallelism.pipeline_parallel_schedule_csv",
      "parallelism.tensor_parallel_degree", "profiling.enable_memory_snapshot",
      "profiling.enable_profiling", "profiling.profile_freq", "profiling.profiler_active",
      "profiling.profiler_warmup", "profiling.save_memory_snapshot_folder",
      "profiling.save_traces_folder", "quantize.grouped_mm.float8.fqns", "quantize.grouped_mm.mx.fqns",
      "quantize.grouped_mm.mx.recipe_name", "quantize.linear.float8.emulate",
      "quantize.linear.float8.enable_fsdp_float8_all_gather", "quantize.linear.float8.filter_fqns",
      "quantize.linear.float8.precompute_float8_dynamic_scale_for_fsdp",
      "quantize.linear.float8.recipe_name", "quantize.linear.mx.filter_fqns",
      "quantize.linear.mx.mxfp8_dim1_cast_kernel_choice", "quantize.linear.mx.recipe_name",
      "training.dataloader.num_workers", "training.dataloader.persistent_workers",
      "training.dataloader.pin_memory", "training.dataloader.prefetch_factor", "training.dataset",
      "training.dataset_path", "training.dtype", "training.enable_cpu_offload", "training.gc_debug",
      "training.gc_freq", "training.global_batch_size", "training.local_batch_size", "training.max_norm",
      "training.mixed_precision_param", "training.mixed_precision_reduce", "training.seq_len",
      "training.steps", "validation.dataloader.num_workers", "validation.dataloader.persistent_workers",
      "validation.dataloader.pin_memory", "validation.dataloader.prefetch_factor", "validation.dataset",
      "validation.dataset_path", "validation.enable", "validation.freq", "validation.local_batch_size",
      "validation.seq_len", "validation.steps"};
  return *kKeys;
}

}  // namespace shardsim
