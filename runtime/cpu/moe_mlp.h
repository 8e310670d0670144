// The mixture-of-experts MLP of one layer in one process (the single-process reference, as
// runtime/cpu/transformer_block.h's dense MLP): the router's logits x W_r^T, routed by
// moe_routing.h, each expert's MLP (the model's activation, no biases) on the rows of the tokens
// it kept, and every token's output the weighted sum of its kept experts' outputs:
//   out_t = sum_j Down_e(w_tj Act(x_t W_in,e, x_t W_up,e))   over t's kept slots j, e = e_tj
// (Megatron-Core's MoELayer with the alltoall dispatcher's permute / unpermute, moe_utils.py;
// the weight multiplies the activation, before the down projection, as Megatron-Core v0.13's
// memory-efficient permutation does). Experts run in index order and tokens in order within
// each, the order the executor's dispatch keeps (runtime/exec/moe_block.h).
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/cpu/moe_routing.h"
#include "runtime/cpu/param_layout.h"
#include "src/model/model_spec.h"

namespace shardsim::runtime {

// One expert's tensors in a flat buffer.
template <typename S>
struct ExpertWeights {
  S* w_in = nullptr;   // (F_e, C): gate (SwiGLU) or fc (GELU)
  S* w_up = nullptr;   // (F_e, C): SwiGLU only
  S* w_out = nullptr;  // (C, F_e): down or proj
};

template <typename S>
ExpertWeights<S> ExpertWeightsAt(const ParamLayout& layout, const ModelSpec& m, int64_t layer, int64_t expert,
                                 S* base);

// What an MoE layer's forward keeps: the routing and, per expert (its kept rows in dispatch
// order), the MLP's intermediates and output.
template <typename S>
struct MoeActivations {
  MoeRouting routing;
  std::vector<std::vector<S>> hidden, up, act;  // per expert: (r_e, F_e)
};

// The experts of a layer and the layout's routing settings.
template <typename S>
struct MoeLayer {
  std::vector<ExpertWeights<S>> experts;  // all E, in index order
  double capacity_factor = 0;              // the layout's moe_capacity (0: dropless)
};

// x (N, C) the MLP norm's output; out (N, C) overwritten.
template <typename S>
void MoeMlpForward(const ModelSpec& m, const S* router, const MoeLayer<S>& layer, const S* x, S* out,
                   MoeActivations<S>& a, int64_t n);

// dout (N, C) the output's gradient; adds into dx (N, C), drouter and the experts' `dlayer`.
// aux_scale: the weight of this micro-batch's aux loss in the objective (its share of the batch).
template <typename S>
void MoeMlpBackward(const ModelSpec& m, const S* router, S* drouter, const MoeLayer<S>& layer,
                    const MoeLayer<S>& dlayer, const S* x, const MoeActivations<S>& a, const S* dout, S* dx,
                    double aux_scale, int64_t n);

}  // namespace shardsim::runtime
