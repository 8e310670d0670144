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
  // A column-parallel projection of a branch's input (qkv; the MLP's up or gate_up, experts'
  // included): the projections whose summed input gradient TP reduces in backward, and whose
  // weight-gradient GEMMs hide that reduction under overlap_tp=backward.
  bool column_parallel = false;
  double backward_factor = 2;  // backward cost / forward cost
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
};

// Per-rank forward ops of one transformer layer for one micro-batch.
std::vector<Op> LayerOps(const ModelSpec& m, const Layout& l, bool moe_layer);
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

}  // namespace shardsim
