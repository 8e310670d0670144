// The operators of one training iteration, with their FLOPs, HBM bytes and GEMM shapes as one
// rank executes them under a layout's partitioning (TP/SP splits heads, MLP and vocabulary;
// CP splits the sequence; EP splits the experts). Time comes from op_time.h.
//
// FLOPs follow the convention of Narayanan et al. 2021 (SC'21) eq. 3: only matmuls count,
// 2 FLOPs per multiply-add, the attention score and context matmuls over the full s x s
// matrix, backward = 2 x forward. `executed_flops` is what the kernel really does (a causal
// fused attention skips the masked half); it drives time, not MFU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/layout/layout.h"
#include "src/model/model_spec.h"

namespace shardsim {

enum class OpKind { kMatmul, kAttention, kMemory };

// What an op is, for every reader that treats ops differently (calibrate's kernels, the
// estimate's table); readers switch on it, never on the display name.
enum class OpRole : uint8_t {
  kNorm,              // a layer's two norms and the final norm
  kQkv,               // the fused Q, K, V projection
  kAttentionScores,   // unfused: Q K^T
  kSoftmax,           // unfused: scale, mask, softmax
  kAttentionDropout,  // unfused: dropout on the probabilities
  kAttentionContext,  // unfused: P V
  kFlashAttention,    // fused scores, softmax and context
  kProjection,        // the attention output projection
  kResidual,          // residual add (+ dropout)
  kRouter,            // MoE router
  kMlpUp,             // the MLP's first projection (up, or gate and up fused)
  kMlpActivation,     // GELU, or SwiGLU's SiLU(gate) * up
  kMlpDown,           // the MLP's second projection
  kEmbedding,         // token (+ position) lookup
  kLmHead,            // the vocabulary projection
  kCrossEntropy,      // softmax cross-entropy over the vocabulary shard
  kMoePermute,        // MoE: tokens permuted into expert order before the experts, back after
  kRope,              // rotary embedding of Q and K
};
const char* OpRoleName(OpRole r);

// Where an op sits in a transformer layer, between its communication points: the attention
// branch (norm1 .. residual1), the MLP's input (norm2, the router), the MLP or the experts,
// and the MLP's output (residual2). Embedding and head ops are kAttention.
enum class LayerPart : uint8_t { kAttention, kMlpInput, kMlp, kMlpOutput };

struct Op {
  std::string name;  // for display only
  OpKind kind = OpKind::kMemory;
  OpRole role = OpRole::kResidual;
  LayerPart part = LayerPart::kAttention;
  double flops = 0;           // forward model FLOPs on this rank
  double executed_flops = 0;  // forward FLOPs the kernel executes
  double bytes = 0;           // forward HBM traffic
  int64_t m = 0, n = 0, k = 0;  // GEMM shape (kMatmul)
  // Transcendental evaluations (exp, tanh) in the forward pass: priced by the hardware's
  // transcendental_rate where it has one (a CPU core, where they, not memory, bound
  // SwiGLU, GELU, softmax and the loss).
  double transcendentals = 0;
  bool recomputed_selective = false;  // recomputed under recompute=selective
  // Under recompute=op, the share of the op's forward the backward recomputes (OpCheckpoint).
  double op_recomputed = 0;
  // A column-parallel projection of a branch's input (qkv; the MLP's up or gate_up, experts'
  // included): the projections whose summed input gradient TP reduces in backward, and whose
  // weight-gradient GEMMs hide that reduction under overlap_tp=backward.
  bool column_parallel = false;
  double backward_factor = 2;  // backward cost / forward cost
  // Kernels one forward pass launches (the backward launches max(1, ceil(backward_factor))
  // per forward kernel; an fp8 quantization, Op::fp8_cast_*_bytes, one more per pass). One,
  // except the element-wise chains eager PyTorch runs op by op (kernels=eager: RMSNorm,
  // RoPE, SwiGLU, the loss; ops.cc). Each launch costs the device its fixed kernel latency and
  // the host the framework's launch overhead (HostSpec::launch_s, layer_plan.cc HostFloor).
  int32_t launches = 1;
  // A transformer layer's op (LayerOps), not the embedding's or the head's: what cuda_graphs=
  // layers replays from a graph (Layout::cuda_graphs).
  bool in_layer = true;
  // Under dtype=fp8 (Transformer Engine's recipe, as Megatron-Core runs it), a GEMM that stays
  // in bf16: not a Transformer Engine module, so fp8_autocast leaves it alone (the output
  // layer is tensor_parallel.ColumnParallelLinear, megatron/core/models/gpt/gpt_model.py; the
  // router runs router_gating_linear in its router dtype, megatron/core/transformer/moe/router.py;
  // NVIDIA/Megatron-LM d98e8a64dd).
  bool bf16_under_fp8 = false;
  // The fp8 quantization kernels a Transformer Engine GEMM runs before its GEMM, separate
  // memory-bound kernels on the same stream (transformer_engine/pytorch/module/linear.py:
  // the input quantized in forward, the output gradient in backward; csrc/extensions/cast.cu:
  // a quantize reads the 16-bit tensor and writes its fp8 data and, for the other GEMM
  // operand layout Hopper's fp8 GEMMs need, its transpose: 2 + 1 + 1 bytes per element).
  // Zero outside fp8 runs.
  double fp8_cast_forward_bytes = 0, fp8_cast_backward_bytes = 0;
  // The fused attention kernel's query/key and value head sizes: its executed FLOPs scale with
  // the head size it is compiled for (GpuEfficiency::attention_head_dims, op_time.cc). 0 else.
  int64_t head_dim = 0, v_head_dim = 0;
  // The fused attention kernel's sequence length, the keys of one call: the sequence, or under
  // context parallelism its 1 / cp chunk (ring attention runs the kernel chunk by chunk). Its
  // rate depends on it (GpuEfficiency::attention_by_seq). 0 else.
  int64_t attention_seq = 0;
  // Which fused attention kernel it is, for its rate (op_time.cc AttentionRate): kFlash the
  // description's attention_tflops (GpuEfficiency::AttentionAt), kFlash1 its
  // attention_v1_tflops, kCudnn its attention_cudnn_tflops.
  AttentionImpl attention_impl = AttentionImpl::kFlash;
};

// Whether the model's RMSNorm runs as eager PyTorch ops (kernels=eager): six kernels through
// fp32 that keep an fp32 copy of the input (ops.cc NormBytesPerElement; memory.cc).
inline bool EagerRmsNorm(const ModelSpec& m, const Layout& l) {
  return EagerElementwise(l.kernels) && m.norm == Norm::kRmsNorm;
}

// Per-rank forward ops of one transformer layer for one micro-batch (under recompute=op with
// Op::op_recomputed set, OpCheckpoint).
std::vector<Op> LayerOps(const ModelSpec& m, const Layout& l, bool moe_layer);

// recompute=op, torchtitan's per-op selective activation checkpointing
// (torchtitan/parallelisms/parallelize_llama.py _apply_ac_to_transformer_block, "op", read at
// pytorch/torchtitan 395a52627 (2024-04-18, the commit of docs/performance.md's Llama tables)
// and 3faaa1a0d): each transformer block runs under torch.utils.checkpoint with a policy that
// saves the outputs of the ops in _save_list (aten.mm, the SDPA flash and efficient kernels,
// the functional reduce-scatter) "except every second mm", counting the block's aten.mm calls
// in forward order, and recomputes everything else when the backward first needs it. Its
// Llama runs seven separate linears a block, wq wk wv, wo, w1 w3 w2, so wk (2nd), wo (4th)
// and w3 (6th) are recomputed: the share of a fused op here is that of its parts (qkv is wq,
// wk, wv by width; SwiGLU's gate_up is w1, w3). Attention kernels are saved; norms,
// activation functions, residual adds and the unfused attention's batched GEMMs (aten.bmm,
// not in the list) are recomputed. Approximations: an MoE layer's router and expert GEMMs
// are counted as mm calls in their order (torchtitan's experts run grouped GEMMs, which its
// 2024 list does not name); under fp8 the linears are torch._scaled_mm, which the 2024 list
// does not name either, and are counted as mm calls.
void OpCheckpoint(const ModelSpec& m, const Layout& l, std::vector<Op>& ops);
// What one layer keeps per micro-batch under recompute=op: its input, the saved matmul
// outputs, and the attention kernel's output and log-sum-exp (fp32 per query row and head).
double OpCheckpointSavedBytes(const ModelSpec& m, const Layout& l, bool moe_layer);
// Embedding lookup on the first stage.
std::vector<Op> EmbeddingOps(const ModelSpec& m, const Layout& l);
// Final norm, LM head and cross-entropy on the last stage; with multi-token prediction, each
// depth's embedding lookup, norms, projection and its own final norm, head and cross-entropy
// too (its transformer layer is one of the head chunk's layers, pipeline.h ChunkOf).
std::vector<Op> HeadOps(const ModelSpec& m, const Layout& l);

// Model FLOPs of one whole iteration (all ranks, all micro-batches), forward + backward
// (+ recompute when `with_recompute`): the numerator of MFU (without) and HFU (with).
double IterationFlops(const ModelSpec& m, const Layout& l, bool with_recompute);

// Tokens one rank processes per micro-batch: mbs x seq_len / cp.
int64_t TokensPerRank(const ModelSpec& m, const Layout& l);

// Whether an MoE layer's experts take their tokens over TP inside the token dispatcher, as
// Megatron-Core's alltoall dispatcher runs it under sequence parallelism with ep > 1
// (megatron/core/transformer/moe/token_dispatcher.py, MoEAlltoAllTokenDispatcher,
// NVIDIA/Megatron-LM core_v0.11.0): the layer's input stays split over TP (no SP all-gather
// before the MoE layer, no reduce-scatter after it); each TP rank routes and permutes its own
// T / tp tokens, all-to-alls them over EP, then all-gathers the received tokens over the
// (expert) TP group (gather_from_sequence_parallel_region) for the experts' TP-split GEMMs,
// and after them reduce-scatters the outputs (reduce_scatter_to_sequence_parallel_region)
// before the combine all-to-all. Expert TP is the attention's TP (expert_tensor_parallel_size
// defaults to tensor_model_parallel_size). The runtime's test, on the sizes it runs (etp unset).
bool MoeDispatchGathersOverTp(int64_t tp, bool sp, int64_t ep);
// Whether an MoE layer's input stays split over TP, each TP rank routing its own T / tp tokens:
// as above (etp unset: sp, tp > 1, ep > 1), and with the experts' TP set apart from the dense
// TP (Layout::etp, which needs sp with tp > 1): MoEAlltoAllTokenDispatcher takes the layer's
// input as it comes, SP-split, whatever the experts' TP (token_dispatcher.py at NVIDIA/Megatron-LM
// d98e8a64dd).
bool MoeInputSplitOverTp(const Layout& l);
// Whether the dispatcher all-gathers the tokens it received over the experts' TP group (and
// reduce-scatters the experts' outputs before the combine): the experts' TP above 1 and its
// members holding different tokens (SP-split TP peers, or, with etp set, any folded group).
// The group is the TP group where etp is unset, GroupKind::kEtp otherwise.
bool MoeGathersOverExpertTp(const Layout& l);
// The tokens an MoE layer's router and permutation see on one rank: T / tp under
// MoeInputSplitOverTp, else T.
int64_t MoeRoutedTokensPerRank(const ModelSpec& m, const Layout& l);
// The routed token copies one rank's experts take at balanced routing: its routed tokens x
// top_k (what it receives from its EP peers on average), times the experts' TP where the
// dispatcher gathers over it. Etp unset with sp, tp > 1, ep > 1: T / tp x top_k x tp = T x top_k.
int64_t MoeExpertTokensPerRank(const ModelSpec& m, const Layout& l);

}  // namespace shardsim
