// Memory per rank: weights, gradients, optimizer states (ZeRO stage, offload; ZeRO-2/3 add
// one unit's transient gradient bucket), activations (Korthikanti et al. 2022, with SP /
// recompute variants) times the micro-batches the pipeline schedule keeps in flight, and other
// (reserved context/workspace, ZeRO-3 gathered parameters, logits). All in bytes, for one
// pipeline stage's ranks.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "src/hardware/hardware_spec.h"
#include "src/layout/layout.h"
#include "src/model/model_spec.h"

namespace shardsim {

struct MemoryBreakdown {
  double weights = 0;
  double gradients = 0;
  double optimizer = 0;
  double activations = 0;
  double other = 0;
  double host = 0;  // offloaded to host memory (not part of total)
  // Of `other`: the frameworks' second copy of the logits at the loss under 16-bit training
  // (src/cost/memory.cc), when the peak is the head's moment, else 0. shardsim's runtime
  // computes the loss in place on its 16-bit logits and does not hold it
  // (tests/mpi/memory_vs_model_main.cc takes it off).
  double loss_logit_copy = 0;
  // Of `other`: NCCL's buffers for the rank's communicators (NcclBufferBytes).
  double nccl_buffers = 0;
  double total() const { return weights + gradients + optimizer + activations + other; }
};

// Bytes per parameter of each model state, before ZeRO sharding; mixed-precision Adam keeps
// K = 12 of optimizer state (fp32 master weights, momentum, variance).
//   fp16: 2 (fp16 weights) + 2 (fp16 gradients) + 12 = 16, the ZeRO paper's figure
//         (Rajbhandari et al. 2020, Sec. 3.1).
//   bf16: 2 (bf16 weights) + 4 (fp32 gradients) + 12 = 18, Megatron-LM's default
//         (megatron/training/arguments.py: "bfloat16 requires gradient accumulation and
//         all-reduce to be done in fp32", so --bf16 sets accumulate_allreduce_grads_in_fp32)
//         and what shardsim's runtime does; fp8 (Transformer Engine GEMMs over bf16
//         parameters) the same.
//   fp32 (and tf32, fp64 as fp32): 4 + 4 + 8.
//   bf16 or fp8 with grad_bf16 (Layout::grad_bf16): 2 (bf16 weights) + 2 (bf16 gradients) + 16:
//         the optimizer's fp32 copy of the gradients beside its 12 bytes (Megatron-Core's
//         optimizers give each fp32 main parameter main_grad.float(), a copy where main_grad is
//         bf16 and the same tensor where it is fp32: megatron/core/optimizer/optimizer.py
//         _copy_model_grads_to_main_grads, and the distributed optimizer's shard,
//         distrib_optimizer.py, NVIDIA/Megatron-LM d98e8a64dd), sharded as the optimizer is.
// `gradients` is also the element size of every gradient bucket and DP gradient reduction
// (all-reduce, reduce-scatter); `weights` that of every parameter all-gather (ZeRO 1/2 after
// the step, ZeRO-3 per layer). Activations and their gradients stay at the compute width.
struct StateBytes {
  double weights, gradients, optimizer;
};
StateBytes StateBytesPerParam(DType dtype);
StateBytes StateBytesPerParam(const Layout& l);  // the dtype's, with grad_bf16

// Parameters held by one rank of pipeline stage `stage` (after TP, PP and EP, before ZeRO):
// `dense` are sharded by ZeRO over dp x cp, `expert` over the expert-data-parallel group (Layout::edp).
struct StageParams {
  double dense = 0;
  double expert = 0;
  double total() const { return dense + expert; }
};
StageParams ParamsOnStage(const ModelSpec& m, const Layout& l, int64_t stage);
// The transformer layers on `stage` (StageLayers), and how many of them are MoE layers.
std::pair<double, double> LayersOnStage(const ModelSpec& m, const Layout& l, int64_t stage);

// Under fp8, what Transformer Engine keeps of the weights of every layer GEMM on the stage
// (attention, MLP, experts; not the router, embedding or head, which stay 16-bit): their fp8
// copy and its transpose for the backward's fp8 GEMMs, cast once per iteration and cached
// across its micro-batches (TE Linear's is_first_microbatch weight caching, which
// Megatron-Core's TE wrappers enable unless disable_parameter_transpose_cache:
// megatron/core/extensions/transformer_engine.py, NVIDIA/Megatron-LM d98e8a64dd), 2 bytes per
// parameter. 0 outside fp8, with fp8_params (the fp8 weights and their transpose replace
// the bf16 weights), and for torchtitan's torchao float8 (kernels=eager or compiled), which
// casts per call and caches nothing. Frameworks that call TE without is_first_microbatch
// (llm-foundry's Composer) cast every micro-batch instead and keep no copy; this counts one
// regardless.
double Fp8CachedWeightBytes(const ModelSpec& m, const Layout& l, int64_t stage);

// Weights, gradients and optimizer states of `params` on one rank under the layout's ZeRO
// stage (sharded over dp x cp; experts over Layout::edp) and offload (moved to `host`).
MemoryBreakdown ModelStateMemory(const StageParams& params, const Layout& l);

// Activation bytes one layer stores for backward, per micro-batch on one rank
// (Korthikanti et al. 2022, Sec. 4: s*b*h*(34 + 5*a*s/h) for GPT-3-style layers).
double LayerActivationBytes(const ModelSpec& m, const Layout& l, bool moe_layer);

// The transient gradient buffers of one layer's backward pass on one rank, at its largest
// (shardsim's derivation from the backward pass's data flow, which PyTorch autograd and the
// shardsim runtime share: each buffer lives from the op that produces it to the op that
// consumes it): for SwiGLU the gradients of the MLP's activation, gate and up outputs
// (3 s b F / t), plus the norm output's gradient over all rows (s b h), the re-gathered norm
// output under SP (s b h) and the residual stream's gradient (s b h, / t with SP).
double BackwardWorkspaceBytes(const ModelSpec& m, const Layout& l);

// Layer-activation sets alive at the peak on `stage` (1F1B: min(pp - stage, m) micro-batches;
// GPipe: m; interleaved: Megatron's warm-up count of chunks; ZB-V: both chunks' counts of
// ZeroBubbleVChunkInFlight; in units of whole stages).
double InFlightMicrobatches(const Layout& l, int64_t stage);
// ZB-V: the micro-batches of `chunk` of `stage` in flight at the stage's peak, in the order of
// src/layout/schedule_zbv.cc (chunk 0: min(2 pp - stage - 1, m); chunk 1: min(stage + 1, m)).
int64_t ZeroBubbleVChunkInFlight(const Layout& l, int32_t stage, int32_t chunk);

// ZeRO-2/3's transient buffers on one rank of `stage` (what runtime/exec/zero_buckets.h does,
// as DeepSpeed's ZeRO and PyTorch FSDP do per unit; Rajbhandari et al. 2020, Sec. 5.2-5.3),
// in bytes, at each moment of the backward pass StageMemory compares. Under ZeRO-2 a unit's
// gradients (a layer, the embeddings, the final norm + head) are produced into a bucket and
// reduced over DP as soon as its backward ends, so the persistent gradients are only 1/dp;
// under ZeRO-3 a unit's parameters are also gathered around each pass that uses it. Buckets
// are at StateBytesPerParam's gradient width (fp32 under bf16), gathered parameters at its
// weight width (bf16). All zero below ZeRO-2 or with dp = 1.
struct ZeroTransients {
  double layer_grads = 0;   // during a layer's backward: its bucket (+ the tied table's)
  double layer_params = 0;  // ... its gathered parameters (+ the prefetched next layer's)
  double head_grads = 0;    // during the head's backward (last stage)
  double head_params = 0;
  double embed_grads = 0;   // during the embedding's backward (first stage)
  double embed_other = 0;   // ... the residual stream's gradient (and SP's gathered rows)
  double embed_params = 0;  // during the embedding's forward: its gathered table
  // overlap_dp: a bucket whose reduce-scatter is still in flight, and this rank's chunk of its
  // sum: the head's during the top layer's backward (last stage); the layer's above during a
  // lower layer's (a chunk of two or more layers); the first layer's during the embedding's.
  double head_in_flight_grads = 0, head_in_flight_other = 0;
  double layer_in_flight_grads = 0, layer_in_flight_other = 0;
  double open_table_grads = 0;  // the tied table's bucket, open through every layer's (in layer_grads)
};
ZeroTransients ZeroTransientBytes(const ModelSpec& m, const Layout& l, int64_t stage);

// A MoE layer's shared experts on a rank: their MLP split over TP (Megatron-Core's
// SharedExpertMLP is a TP MLP), the gate whole; 0 without shared experts.
// One layer's attention parameters on a rank: what TP splits over tp, plus what it replicates
// (ModelSpec::AttentionReplicatedParams: per-head Q/K norms, MLA's down-projections).
double AttentionParamsOnRank(const ModelSpec& m, const Layout& l);
// One MLP of inner size ffn on a rank: its weights and column-parallel biases split over TP, the
// row-parallel second projection's bias (hidden, with biases) whole on every rank.
double MlpParamsOnRank(const ModelSpec& m, const Layout& l, int64_t ffn);
double SharedExpertParamsOnRank(const ModelSpec& m, const Layout& l);
// One MoE layer's routed experts on a rank: its experts / ep experts, each an MLP split over the
// experts' TP (Layout::expert_tp) as MlpParamsOnRank splits over TP.
double ExpertParamsOnRank(const ModelSpec& m, const Layout& l);

// One dense layer's parameters on a rank: attention and MLP split over TP, the two norms whole.
double DenseLayerParamsOnRank(const ModelSpec& m, const Layout& l);
// One MoE layer's parameters on a rank but its experts: attention, the norms, the router (whole)
// and the shared experts.
double MoeLayerParamsOnRank(const ModelSpec& m, const Layout& l);
// The multi-token prediction depths' parameters outside their layers, on the head's stage: per
// depth eh_proj (2h x h, split over TP) and three norms; and, where the head's stage is not the
// embedding's and the table is not tied (a tied one is there already), the copy of the
// embedding table the depths look the shifted tokens up in (Megatron-Core builds the embedding
// on the last stage too when it runs MTP, its gradient summed with the first stage's over the
// embedding group, as a tied table's). 0 without MTP.
double MtpHeadParamsOnRank(const ModelSpec& m, const Layout& l);

// The largest weight tensor of a dense layer on a rank, Megatron's fused forms (QKV; the MLP's
// first projection, gate and up together under SwiGLU; its second; the attention output), split
// over TP: what a sub-layer bucket or a ZeRO-3 gather below one layer holds at least.
double LargestLayerTensorOnRank(const ModelSpec& m, const Layout& l);

// ZeRO-3: the layers ahead of the running one whose parameters are gathered early: one with
// prefetch (the next layer's while the running layer computes, as FSDP's and DeepSpeed's
// prefetch and the runtime do), none without, or when live_params cannot hold two layers of
// `layer_params` (DeepSpeed's stage3_max_live_parameters).
int64_t ZeroPrefetchDepth(const Layout& l, double layer_params);

// Layers whose gradients one bucket holds at most (bucket_params; 0: one), within a chunk of
// `chunk_layers`. (A bucket_params below one layer makes sub-layer buckets, ZeroTransientBytes;
// the reductions are still priced per layer, the same bytes back to back.)
int64_t LayersPerBucket(const Layout& l, double layer_params, int64_t chunk_layers);

// NCCL's buffers on a rank of `stage`: per channel of the GPU (GpuSpec::nccl_channels) and peer
// connection, the three protocols' FIFOs in 2 MiB granules, 12 MiB; a collective group (TP, DP,
// the expert-data-parallel group, a tied embedding's) opens two connections, a point-to-point
// group (CP's ring, EP's all-to-all, the pipeline's neighbours) one per peer. 0 on hardware
// without nccl_channels. Part of `other`.
double NcclBufferBytes(const ModelSpec& m, const HardwareSpec& hw, const Layout& l, int64_t stage);

MemoryBreakdown StageMemory(const ModelSpec& m, const HardwareSpec& hw, const Layout& l,
                            int64_t stage);

}  // namespace shardsim
