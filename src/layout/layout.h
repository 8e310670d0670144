// Layout: how one training job is parallelized and run (TP/SP, PP and its schedule, DP with
// ZeRO, CP, EP, batch sizes, recompute, precision, offload, overlap). One type for every tool.
// Parsed from "tp=8,pp=8,dp=16,mbs=1,gbs=1536,..." or from YAML with the same keys;
// the key list and defaults are in docs/layout.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "src/hardware/hardware_spec.h"
#include "src/util/status.h"

namespace shardsim {

enum class Schedule { kGpipe, k1F1B, kInterleaved, kZeroBubble, kZeroBubbleV };
// Activation recomputation, in increasing recompute (and decreasing memory): none; selective,
// the attention core (Korthikanti et al. 2022); op, per-op selective checkpointing as
// torchtitan runs it (activation_checkpoint mode "selective", selective_ac_option "op": each
// block keeps its input, attention's output and every other matmul's output, and recomputes
// the rest, ops.h Op::op_recomputed); full, every layer from its input.
enum class Recompute { kNone, kSelective, kOp, kFull };
enum class Offload { kNone, kOptimizer, kOptimizerAndParams };
// Attention implementation: fused flash-style (no s x s tensor in memory, causal half
// skipped) or unfused (score GEMM, softmax and dropout kernels over s x s tensors, as
// Megatron-LM ran before FlashAttention; Korthikanti et al. 2022's 5as^2b term). kFlash is
// FlashAttention-2's (or a later kernel's) rate; kFlash1 the same fused kernel at
// FlashAttention (v1)'s measured rate (efficiency.attention_v1_tflops), what 2022-23 stacks ran
// (flash-attn 1.x); kCudnn the same fused kernel as cuDNN's flash fprop/bprop runs it
// (efficiency.attention_cudnn_tflops), what Transformer Engine's DotProductAttention picks on
// Hopper (its FusedAttention backend).
enum class AttentionImpl { kFlash, kUnfused, kFlash1, kCudnn };
// Whether the attention is one fused kernel (flash, flash1 or cudnn).
inline bool FusedAttention(AttentionImpl a) { return a != AttentionImpl::kUnfused; }
// Which kernels the framework runs around the GEMMs and attention:
//   kFused  fused kernels, as Megatron-Core with Transformer Engine runs them: one QKV GEMM and
//           one gate+up GEMM, a fused RoPE kernel, a fused SwiGLU, a vocabulary-parallel
//           cross-entropy on the logits in one pass;
//   kEager  PyTorch eager as torchtitan runs its Llama without torch.compile: separate wq, wk,
//           wv and w1, w3 GEMMs, RoPE as an fp32 cast, a complex multiply and a cast back, SiLU
//           and the multiply as two kernels, and the logits cast to fp32 before
//           F.cross_entropy (src/cost/ops.cc). (torchtitan's 2024 Llama also copied grouped K
//           and V to every head, repeat_kv; v0.2.2 passes enable_gqa to SDPA instead. The copy,
//           about 0.3 % of a Llama 3 8B step, is not priced.)
//   kCompiled torchtitan's Llama under torch.compile (compile.enable): the same separate
//           linears (Inductor does not merge GEMMs), with the element-wise chains fused (RoPE,
//           SiLU and the multiply, as kFused) and the loss compiled on the 16-bit logits: its
//           backward recomputes the softmax from them and their log-sum-exp (AOTAutograd's
//           min-cut partition saves the cheapest tensors, torch/_functorch/partitioners.py),
//           so no fp32 copy of the logits is made or kept.
//   kCompiledModel torch.compile on the model only (torchtitan's compile.components =
//           ["model"]): kCompiled's fused element-wise chains, kEager's fp32 loss. torchtitan
//           also ran so between pytorch/torchtitan e8977b0 (2024-12-18, "turning off compile
//           on loss function", train.py) and the loss's return to compile (components/loss.py).
//   kCompiledLoss  the loss alone compiled (compile.components = ["loss"]): kEager's
//           element-wise chains, kCompiled's loss.
enum class Kernels { kFused, kEager, kCompiled, kCompiledModel, kCompiledLoss };
// Whether the projections are separate linears (torchtitan's wq, wk, wv and w1, w3), not the
// fused QKV and gate+up GEMMs.
inline bool SeparateLinears(Kernels k) { return k != Kernels::kFused; }
// Whether the RMSNorm, RoPE and SwiGLU chains run as eager PyTorch's separate kernels.
inline bool EagerElementwise(Kernels k) { return k == Kernels::kEager || k == Kernels::kCompiledLoss; }
// Whether the loss runs compiled on the 16-bit logits (else, torchtitan's eager loss on an
// fp32 copy; kFused is Megatron-Core's vocabulary-parallel cross-entropy, neither).
inline bool CompiledLoss(Kernels k) { return k == Kernels::kCompiled || k == Kernels::kCompiledLoss; }
inline bool EagerLoss(Kernels k) { return k == Kernels::kEager || k == Kernels::kCompiledModel; }
// Which TP collectives run under GEMMs (tp > 1):
//   kOff      every TP collective is blocking;
//   kBackward in the backward pass, each column-parallel group's (Q/K/V; the MLP's up or
//             gate+up) input-gradient reduction runs under its weight-gradient GEMMs, and with
//             SP the re-gather of its input under the input-gradient GEMMs: Megatron-LM's
//             default LinearWithGradAccumulationAndAsyncCommunication.backward, and what the
//             runtime does; the forward's collectives and the output-gradient all-gathers block;
//   kOn       every TP collective hidden (Megatron-LM's --tp-comm-overlap, TransformerEngine
//             userbuffers), joined only at the pass's end.
enum class TpOverlap { kOff, kBackward, kOn };
// Which kernels the framework replays from CUDA graphs (captured once, then launched as one
// graph from the host; docs/cost-model.md, "Kernel launches and the host"):
//   kOff     none: the host launches every kernel (eager);
//   kLayers  each transformer layer's forward and backward, one graph a layer pass, the
//            embedding, the head, the loss and the optimizer left eager: Megatron-Core's
//            per-layer capture (--cuda-graph-impl local, CudaGraphManager, or
//            transformer_engine, TE make_graphed_callables; --enable-cuda-graph before);
//   kStep    the whole forward-backward of every micro-batch, one graph a step
//            (--cuda-graph-impl full_iteration, FullCudaGraphWrapper).
// Only the host's side is priced: the graphs' static input and output buffers and their
// private memory pool (one set per layer and micro-batch in flight under a pipeline,
// CudaGraphManager's runners) are not, so the memory predicted with graphs is a lower bound.
enum class CudaGraphs { kOff, kLayers, kStep };

struct Layout {
  int64_t tp = 1;   // tensor parallel
  int64_t pp = 1;   // pipeline stages
  int64_t dp = 0;   // data parallel; 0 = derived from the GPU count
  int64_t cp = 1;   // context parallel (sequence split across ranks, ring attention)
  int64_t ep = 1;   // expert parallel (folded out of tp x cp x dp with the experts' TP, expert_tp())
  // The experts' tensor parallel size (Megatron-Core's --expert-tensor-parallel-size); 0: the
  // dense TP size (ResolveLayout writes 0 for a value equal to tp).
  int64_t etp = 0;
  int64_t vpp = 1;  // virtual stages (model chunks) per pipeline rank
  int64_t mbs = 1;  // micro-batch size (sequences)
  int64_t gbs = 0;  // global batch (sequences); 0 = dp x mbs
  int zero = 0;     // ZeRO stage 0..3 (over the DP group)
  bool sp = false;  // sequence parallel (Korthikanti et al. 2022), needs tp > 1
  Recompute recompute = Recompute::kNone;
  Schedule schedule = Schedule::k1F1B;
  bool schedule_given = false;  // false: ResolveLayout picks it from vpp (and sets this)
  DType dtype = DType::kBf16;   // compute/storage precision; master weights and Adam are fp32
  bool dtype_given = false;     // false: ResolveLayoutFor picks bf16, or fp32 without bf16
  // dtype=fp8: Transformer Engine's GEMM weights stored in fp8 (NeMo's fp8_params, Megatron-LM's
  // --fp8-param-gather) instead of bf16 with an fp8 copy cached per iteration (memory.h).
  bool fp8_params = false;
  // dtype=bf16 or fp8: gradients accumulated and reduced in bf16 (Megatron-LM's
  // --grad-reduce-in-bf16; NeMo's and Megatron-Bridge's grad_reduce_in_fp32 False, Megatron-Core's
  // DistributedDataParallelConfig.grad_reduce_in_fp32) instead of fp32 (memory.h StateBytes).
  bool grad_bf16 = false;
  Offload offload = Offload::kNone;
  double grad_compression = 1;  // DP gradient bytes are divided by this ratio (>= 1)
  bool overlap_dp = true;       // DP gradient reduction overlapped with backward
  TpOverlap overlap_tp = TpOverlap::kOff;  // TP collectives overlapped with GEMMs
  bool overlap_pp = false;      // pipeline sends overlapped with compute (Megatron-LM's
                                // --overlap-p2p-communication); off: the sender waits
  bool prefetch = true;         // ZeRO-3 parameter all-gather prefetched
  AttentionImpl attention = AttentionImpl::kFlash;
  Kernels kernels = Kernels::kFused;
  CudaGraphs cuda_graphs = CudaGraphs::kOff;
  // Gradient bucket size, in parameters per rank: consecutive units (a layer, the embeddings,
  // the final norm + LM head) are reduced together until a bucket holds at least this many
  // (Megatron-LM's --ddp-bucket-size, DeepSpeed's reduce_bucket_size); 0: one bucket per unit.
  int64_t bucket_params = 0;
  // ZeRO-3: at most this many gathered parameters per rank (DeepSpeed's
  // stage3_max_live_parameters, default 1e9): the running layer's and, with prefetch, as many
  // layers ahead as fit.
  int64_t live_params = 1'000'000'000;
  // Uneven pipeline splits (pp >= 2; src/layout/pipeline.h; at most one of the two methods):
  //   first_stage_layers / last_stage_layers: the first (last) stage holds this many layers and
  //     the others share the rest evenly (Megatron-LM's --decoder-first-pipeline-num-layers /
  //     --decoder-last-pipeline-num-layers); 0: not set (the stage takes its even share);
  //   embedding_in_split / loss_in_split: the embedding (the loss) counts as one layer of the
  //     split, so the first (last) chunk holds one layer fewer (Megatron-LM's
  //     --account-for-embedding-in-pipeline-split / --account-for-loss-in-pipeline-split).
  int64_t first_stage_layers = 0, last_stage_layers = 0;
  bool embedding_in_split = false, loss_in_split = false;
  // MoE routing: the expert capacity factor (Megatron-LM's --moe-expert-capacity-factor: an
  // expert takes at most capacity x its balanced share of tokens and drops the rest; 0: no
  // capacity, nothing dropped) and the load imbalance (the busiest EP rank's routed tokens over
  // the balanced share, >= 1; 1: balanced, what a load-balancing loss aims at). The busiest
  // rank sets the pace: its experts' GEMMs, the all-to-all bytes it receives and its experts'
  // activations scale by MoeLoad().
  double moe_capacity = 0;
  double moe_imbalance = 1;
  double MoeLoad() const { return moe_capacity > 0 && moe_capacity < moe_imbalance ? moe_capacity : moe_imbalance; }
  bool uneven_split() const {
    return first_stage_layers > 0 || last_stage_layers > 0 || embedding_in_split || loss_in_split;
  }

  int64_t model_parallel() const { return tp * pp * cp; }
  int64_t world() const { return tp * pp * dp * cp; }
  // The ranks holding the same dense weights: the DP x CP group over which gradients are
  // reduced and ZeRO shards optimizer states, gradients and parameters (Megatron-Core's
  // intra_dp_cp_group: megatron/core/distributed/distributed_data_parallel.py and
  // megatron/core/optimizer/__init__.py at NVIDIA/Megatron-LM d98e8a64dd; CP ranks compute
  // different tokens' gradients of the same weights).
  int64_t dp_cp() const { return dp * cp; }
  // The experts' tensor parallel size: etp, or tp where not set.
  int64_t expert_tp() const { return etp > 0 ? etp : tp; }
  // Whether the experts split otherwise than the dense layers (etp set, and not to tp).
  bool own_expert_tp() const { return etp > 0 && etp != tp; }
  // An expert's replicas. Megatron-Core folds the experts' TP, EP and expert-data-parallel
  // groups out of a pipeline stage's TP x CP x DP ranks ("MoE Parallel Folding", Liu et al.
  // 2025, arXiv 2504.14960; megatron/core/parallel_state.py at NVIDIA/Megatron-LM d98e8a64dd:
  // expert_data_parallel_size = world / (etp x ep x pp)): expert DP = TP x CP x DP / (ETP x
  // EP), which is CP x DP / EP where the experts' TP is the dense TP.
  int64_t edp() const { return tp * cp * dp / (expert_tp() * ep); }
  // Micro-batches per iteration per DP replica (gradient accumulation steps).
  int64_t microbatches() const { return gbs / (dp * mbs); }
};

std::string ScheduleName(Schedule s);
std::string RecomputeName(Recompute r);
std::string OffloadName(Offload o);
std::string AttentionName(AttentionImpl a);
std::string KernelsName(Kernels k);  // "fused", "eager", "compiled", "compiled-model", "compiled-loss"
std::string CudaGraphsName(CudaGraphs g);  // "off", "layers", "step"
// What a layout with graphs leaves unpriced, the start of every warning that says so (the
// layout check, plan --fix): "cuda_graphs=layers prices the host's launches only: ...".
std::string CudaGraphsCaveat(CudaGraphs g);
std::string TpOverlapName(TpOverlap o);  // "off", "backward", "on"

// Parses a spec string; syntax errors name the key, the expected value and a "did you mean".
// dp and gbs may be left 0 and filled in by ResolveLayout.
StatusOr<Layout> ParseLayout(const std::string& spec);
// The same keys as a YAML map (a file holding only a layout, or a plan's `layout:` section).
StatusOr<Layout> ParseLayoutYaml(const std::string& text, const std::string& name);

// Fills derived fields: dp from the GPU count, gbs = dp x mbs when absent, default schedule.
// Errors only for a GPU count below 1.
StatusOr<Layout> ResolveLayout(Layout layout, int64_t gpus);

// ResolveLayout, then the hardware-dependent default: dtype bf16 where the GPU has a bf16
// rate, else fp32 (CPU hosts).
StatusOr<Layout> ResolveLayoutFor(Layout layout, int64_t gpus, const HardwareSpec& hw);

// Normalized spec: every key in a fixed order, except those still to be derived (dp 0,
// gbs 0, schedule or dtype not given); ParseLayout(FormatLayout(l)) == l.
std::string FormatLayout(const Layout& l);
// The value FormatLayout writes for one key (schedule, dtype and fp8_params whether or not it
// writes them; dp and gbs as set), or nullopt for a name that is no layout key: what a stack
// rule tests (src/layout/stack.h), without formatting the whole layout.
std::optional<std::string> LayoutValue(const Layout& l, std::string_view key);

}  // namespace shardsim
