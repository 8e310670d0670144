// The mixture-of-experts MLP of one layer on a rank, expert parallel over Group::kEp, as
// Megatron-Core's MoELayer runs it with the alltoall token dispatcher
// (megatron/core/transformer/moe/token_dispatcher.py): route this rank's tokens
// (runtime/cpu/moe_routing.h, on the host), permute the kept (token, expert) slots into expert
// order, all-to-all them to the EP members that hold the experts, run each local expert's MLP
// on the rows it received (regrouped expert by expert), send the outputs back and add each
// token's. The same arithmetic in the same order as the reference (runtime/cpu/moe_mlp.h), so
// with ep = 1 it is that reference bitwise.
//   Per layer and micro-batch the device collectives are one all-to-all forward (dispatch) and
// one back (combine), and in the backward the same two: what the layer plan prices
// (src/cost/layer_plan.cc, "ep all-to-all dispatch/combine", each this rank's kept slots x
// hidden). The routing (each slot's expert, weight and whether it was kept) and the combine
// weights' gradients travel as host collectives over kEp.
//   With TP the experts' MLPs are split over it, or, with the experts' TP set to 1 (etp=1,
// MoeRank::expert_tp), held whole by their EP member. Where each TP rank routes its own rows
// (MoeRank::input_split: SP with ep > 1, or etp=1) x and out are this rank's n_local rows and
// the aux loss's counts are summed over TP. Under SP with ep > 1 and etp = tp
// (MoeRank::gathers_over_tp) the layer runs as Megatron-Core's alltoall dispatcher does: the
// rows an EP member received are all-gathered over TP before its experts (padded to the busiest
// TP rank's count) and reduce-scattered after them, in the backward the reverse, and the routing
// is gathered over TP too. With etp=1 the EP group folds over TP x CP x DP (src/layout/
// placement.h ExpertCoordOf), each member's experts run the rows it received whole, and there is
// no TP exchange. Otherwise the caller gathers the rows before the layer and reduces its output
// after it, as a dense MLP's, and every TP rank routes all of them.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/cpu/moe_mlp.h"
#include "runtime/cpu/moe_routing.h"
#include "runtime/exec/block.h"
#include "runtime/exec/exec_context.h"
#include "runtime/exec/moe_saved.h"

namespace shardsim::runtime {

// x (n, C) the MLP norm's output; out (n, C) overwritten with the MLP's output. `experts`: the
// local experts' weights, in index order.
template <typename T>
Status MoeForward(ExecContext& ctx, const BlockDims& d, const MoeRank& er, const T* router,
                  const std::vector<ExpertWeights<T>>& experts, const T* x, T* out, MoeSaved& s);

// dout (n, C) the output's gradient: adds into dx (n, C), drouter (E, C) and the local experts'
// gradients; aux_scale weighs the load-balancing loss (the micro-batch's share of the batch).
// With `stash` (zero-bubble's B pass) the experts' and the router's weight-gradient GEMMs are
// deferred to it with the buffers they read (x, and s.input, must then stay alive until W).
template <typename T>
Status MoeBackward(ExecContext& ctx, const BlockDims& d, const MoeRank& er, const T* router, float* drouter,
                   const std::vector<ExpertWeights<T>>& experts, const std::vector<ExpertWeights<float>>& dexperts,
                   const T* x, MoeSaved& s, const T* dout, T* dx, double aux_scale,
                   WeightGradStash* stash = nullptr);

}  // namespace shardsim::runtime
