// One pre-norm decoder block, forward and backward (GPT-2 / Llama order):
//   mid = x + Out(Attention(Rope(Q(Norm1 x)), Rope(K(Norm1 x)), V(Norm1 x)))
//   out = mid + Down(Act(Norm2 mid))      Act = GELU(fc) or silu(gate) * up
// The transformer stacks these between the embedding and the final norm.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/cpu/moe_mlp.h"
#include "runtime/cpu/param_layout.h"
#include "runtime/cpu/rope.h"
#include "src/model/model_spec.h"

namespace shardsim::runtime {

// One block's tensors inside a flat buffer (the parameters, or their gradients); nullptr
// where the model has no such tensor (biases, LayerNorm's bias, SwiGLU's up).
template <typename S>
struct BlockWeights {
  S* attn_norm_gain = nullptr;  // (C)
  S* attn_norm_bias = nullptr;  // (C)
  S* wq = nullptr;              // (H*d, C)
  S* bq = nullptr;              // (H*d)
  S* wk = nullptr;              // (KV*d, C)
  S* bk = nullptr;              // (KV*d)
  S* wv = nullptr;              // (KV*d, C)
  S* bv = nullptr;              // (KV*d)
  S* wo = nullptr;              // (C, H*d)
  S* bo = nullptr;              // (C)
  S* mlp_norm_gain = nullptr;   // (C)
  S* mlp_norm_bias = nullptr;   // (C)
  S* w_in = nullptr;            // (F, C): mlp.fc (GELU) or mlp.gate (SwiGLU)
  S* b_in = nullptr;            // (F)
  S* w_up = nullptr;            // (F, C): mlp.up, SwiGLU only
  S* b_up = nullptr;            // (F)
  S* w_out = nullptr;           // (C, F): mlp.proj (GELU) or mlp.down (SwiGLU)
  S* b_out = nullptr;           // (C)
  S* router = nullptr;          // (E, C): an MoE layer's, whose MLP is its experts (moe_mlp.h)
};

// Looks up layer `layer`'s tensors by name in `layout` and points into `base`.
template <typename S>
BlockWeights<S> BlockWeightsAt(const ParamLayout& layout, const ModelSpec& m, int64_t layer,
                               S* base);

// What the forward pass saves for the backward pass (N = B*T tokens).
template <typename S>
struct BlockActivations {
  std::vector<S> norm1;       // (N, C) attention norm output
  std::vector<S> norm1_mean;  // (N) LayerNorm only
  std::vector<S> norm1_rstd;  // (N)
  std::vector<S> q;           // (N, H*d), after RoPE
  std::vector<S> k;           // (N, KV*d), after RoPE
  std::vector<S> v;           // (N, KV*d)
  std::vector<S> probs;       // (B, H, T, T) attention probabilities
  std::vector<S> attn;        // (N, H*d) attention output, input of attn.out
  std::vector<S> mid;         // (N, C) residual stream after attention
  std::vector<S> norm2;       // (N, C) MLP norm output
  std::vector<S> norm2_mean;  // (N) LayerNorm only
  std::vector<S> norm2_rstd;  // (N)
  std::vector<S> hidden;      // (N, F) fc output (GELU input) or gate (SwiGLU)
  std::vector<S> up;          // (N, F) SwiGLU only
  std::vector<S> act;         // (N, F) activation, input of the down projection
  MoeActivations<S> moe;      // an MoE layer's routing and experts' intermediates

  void Resize(const ModelSpec& m, int64_t b, int64_t t);

};

// Gradients of one block's activations; reused by every layer in turn.
template <typename S>
struct BlockScratch {
  std::vector<S> dnorm;    // (N, C)
  std::vector<S> dattn;    // (N, H*d)
  std::vector<S> dq;       // (N, H*d)
  std::vector<S> dk;       // (N, KV*d)
  std::vector<S> dv;       // (N, KV*d)
  std::vector<S> dhidden;  // (N, F)
  std::vector<S> dup;      // (N, F)
  std::vector<S> dact;     // (N, F)

  void Resize(const ModelSpec& m, int64_t b, int64_t t);

};

// x, out (B, T, C). `rope` is used when m.position is kRope. `moe`: an MoE layer's experts
// (null for a dense layer).
template <typename S>
void BlockForward(const ModelSpec& m, const BlockWeights<S>& w, const RopeTable<S>& rope,
                  const S* x, S* out, BlockActivations<S>& a, int64_t b, int64_t t,
                  const MoeLayer<S>* moe = nullptr);

// dresid (B, T, C): on entry the gradient w.r.t. the block's output, on return w.r.t. its
// input x (the residual connections make this an in-place update). Adds into `dw` (and an MoE
// layer's `dmoe`; aux_scale weighs its load-balancing loss).
template <typename S>
void BlockBackward(const ModelSpec& m, const BlockWeights<S>& w, const BlockWeights<S>& dw,
                   const RopeTable<S>& rope, const S* x, const BlockActivations<S>& a, S* dresid,
                   BlockScratch<S>& s, int64_t b, int64_t t, const MoeLayer<S>* moe = nullptr,
                   const MoeLayer<S>* dmoe = nullptr, double aux_scale = 0);

}  // namespace shardsim::runtime
