// One decoder block on a Backend, as one tensor-parallel rank runs it (the same math as
// runtime/cpu/transformer_block.h, the single-process reference, which it is tested against):
//   mid = x + g(Out(Attention(Rope(Q f(Norm1 x)), Rope(K f(Norm1 x)), V f(Norm1 x))))
//   out = mid + g(Down(Act(f(Norm2 mid))))
// f and g are the TP group's operators (exec_context.h): identity / all-reduce, or with SP
// all-gather / reduce-scatter, in which case x, mid and out hold this rank's rows only.
// Activation recomputation (Korthikanti et al. 2022): selective drops the attention
// probabilities and recomputes them in backward; full keeps only x (the caller re-runs
// BlockForward before BlockBackward). attention=flash never keeps the probabilities: only the
// row log-sum-exp, from which the backward pass rebuilds them (Kernels::FlashAttention*).
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/cpu/transformer_block.h"
#include "runtime/exec/cp_split.h"
#include "runtime/exec/exec_context.h"
#include "runtime/exec/moe_saved.h"
#include "runtime/exec/te_gemm.h"
#include "src/model/model_spec.h"

namespace shardsim::runtime {

// Shapes of one micro-batch on one rank; `m` is the TP-local model (rank_shard.local_model()).
struct BlockDims {
  const ModelSpec* m = nullptr;
  int64_t b = 0, t = 0;   // sequences, tokens per sequence on this rank (T / cp)
  int64_t n = 0;          // b * t rows
  int64_t n_local = 0;    // rows this rank holds outside the parallel regions (n / tp with SP)
  bool flash = false;     // attention=flash: keep the softmax's log-sum-exp, not its output
  CpSplit cp;             // context parallelism: which chunks of each sequence (context_parallel.h)
};

// What the forward pass keeps for the backward pass, for one layer and micro-batch.
struct BlockSaved {
  DeviceBuffer norm1, norm1_mean, norm1_rstd;  // (n_local, C), (n_local), (n_local)
  DeviceBuffer q, k, v;                        // (n, H*d), (n, KV*d) x2, local heads, roped
  DeviceBuffer probs;                          // (B, H, T, T), or per CP half (B, H, L, T_all);
                                               // empty under selective recompute
  DeviceBuffer lse;                            // (B, H, T) fp32, attention=flash instead of probs
  DeviceBuffer attn;                           // (n, H*d)
  DeviceBuffer mid;                            // (n_local, C)
  DeviceBuffer norm2, norm2_mean, norm2_rstd;
  DeviceBuffer hidden, up, act;                // (n, F) local; up for SwiGLU only
  MoeSaved moe;                                // an MoE layer's routing and experts' rows
  // dtype=fp8: the TE modules' inputs as TE saves them for the weight gradients (te_gemm.h), in
  // place of norm1 (Q, K, V's; this rank's rows under SP), attn (linear_proj's; attn stays
  // when attention=flash, whose backward reads the output), norm2 (a dense MLP's fc1) and act
  // (fc2's).
  Fp8Saved qkv_in, proj_in, fc1_in, fc2_in;
  void Clear() { *this = BlockSaved(); }
};

// x, out (n_local, C). Allocates `saved` as `kind` (activations; the caller decides what a
// recomputed copy counts as). keep_probs false: selective recompute.
// T: the storage type of activations and working weights (float or Bf16); saved tensors are
// T except the norm statistics (fp32).
// `moe`: an MoE layer's experts (w.router set), null for a dense layer.
template <typename T>
Status BlockForward(ExecContext& ctx, const BlockDims& d, const BlockWeights<T>& w, const T* x,
                    T* out, BlockSaved& saved, bool keep_probs, const MoeArgs<T>* moe = nullptr);

// Zero-bubble's split backward (Qi et al. 2023, "Zero Bubble Pipeline Parallelism"): what a
// layer's B pass (input gradients) leaves for its W pass (weight gradients). Each deferred GEMM
// keeps its output gradient and its input (this rank's, gathered under SP); the norms' and the
// row-parallel biases' gradients are computed in B, where their inputs are at hand, and wait in
// `small` only when the layer's gradients are not there yet (ZeRO-2/3's bucket opens in W).
struct WeightGradStash {
  struct Gemm {
    float* BlockWeights<float>::*weight;  // the weight gradient it adds into (null: `direct`)
    float* BlockWeights<float>::*bias;    // a column-parallel bias's, or null
    const void* dout;                     // (rows, m) T
    const void* in;                       // (rows, k) T, or fp8 codes when in_fp8
    int64_t k = 0, m = 0;
    int64_t rows = -1;                    // -1: the micro-batch's n (an expert's or a row range's otherwise)
    float* direct = nullptr;              // an expert's weight gradient (outside the layer's bucket)
    bool te = true;                       // a Transformer Engine module's (te_gemm.h); the router's is not
    bool in_fp8 = false;                  // dtype=fp8: `in` is the module's saved codes
    float in_scale_inv = 1;
  };
  std::vector<Gemm> gemms;          // in the B pass's order
  std::vector<DeviceBuffer> keep;   // what the pointers above point into
  DeviceBuffer small;               // fp32 (6, C): the norms' gains and biases, bo, b_out
  bool empty() const { return gemms.empty(); }
};

// dresid (n_local, C): on entry d(out), on return d(x). Adds into dw (fp32 gradients whatever
// T is). Frees `saved` as it goes. With `stash` (zero-bubble's B pass) the GEMMs compute only
// their input gradients and their weight gradients' operands go to the stash, for
// BlockWeightGrad; the norms' and row-parallel biases' gradients go into `dw` if it is given
// (non-empty), else to the stash. Under zero-bubble overlap_tp hides nothing (the weight gradients
// it would hide the reductions under are deferred), so the TP reductions block, as the
// simulator prices them.
template <typename T>
Status BlockBackward(ExecContext& ctx, const BlockDims& d, const BlockWeights<T>& w,
                     const BlockWeights<float>& dw, const T* x, BlockSaved& saved, T* dresid,
                     WeightGradStash* stash = nullptr, const MoeArgs<T>* moe = nullptr);

// Zero-bubble's W pass of one layer: the stash's GEMMs, in B's order, and its small gradients,
// added into dw. Frees the stash.
template <typename T>
Status BlockWeightGrad(ExecContext& ctx, const BlockDims& d, WeightGradStash& stash,
                     const BlockWeights<float>& dw);

}  // namespace shardsim::runtime
