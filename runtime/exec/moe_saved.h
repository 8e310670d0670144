// What an expert-parallel MoE layer's forward keeps for its backward on a rank, and where the
// rank sits among the experts (moe_block.h runs the layer; BlockSaved holds this).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/cpu/moe_mlp.h"
#include "runtime/cpu/moe_routing.h"
#include "src/cost/ops.h"
#include "src/model/model_spec.h"

namespace shardsim::runtime {

// Where a rank sits among the experts.
struct MoeRank {
  int64_t ep = 1;                // EP group size
  int64_t rank = 0;              // this rank in it
  double capacity_factor = 0;    // the layout's moe_capacity
  int64_t tp = 1, tp_rank = 0;   // TP (the dense layers')
  int64_t expert_tp = 1;         // the ranks an expert's MLP splits over (Layout::expert_tp)
  // Those ranks: the TP group where the experts split as the dense layers (etp unset), else the
  // experts' own (Group::kEtp, folded with EP out of TP x CP x DP); this rank's place in it.
  Group expert_tp_group = Group::kTp;
  int64_t expert_tp_rank = 0;
  bool sp = false;               // SP: the router's gradient is this rank's rows' (summed over TP)
  int64_t cp = 1;                // CP: the aux loss's statistics summed over the CP group
  // Whether each TP rank routes and dispatches its own n_local rows (src/cost/ops.h
  // MoeInputSplitOverTp: Megatron-Core's alltoall dispatcher under SP with ep > 1, or with the
  // experts' TP set apart from the dense TP); otherwise every TP rank routes all n rows, gathered
  // before the layer and reduced after it as a dense MLP's.
  bool input_split = false;
  // Whether the rows an EP member receives are all-gathered over the experts' TP group for their
  // split MLPs and reduce-scattered back after them (ops.h MoeGathersOverExpertTp).
  bool gathers = false;
  int64_t LocalExperts(const ModelSpec& m) const { return m.moe->experts / ep; }
};

// What an MoE layer's forward keeps for its backward.
struct MoeSaved {
  MoeRouting routing;  // this rank's tokens
  // The dispatch: this rank's kept slots in routing.order, as device token indices, and how
  // many go to (and come back from) each EP member.
  DeviceBuffer slot_token;            // (S) int32
  std::vector<int64_t> send_rows;     // (ep)
  // What the local experts received, regrouped expert-major: each row's place in the received
  // buffer (regroup), the inverse (ungroup), its combine weight, and its origin (the source
  // member and slot, where the weight's gradient goes).
  DeviceBuffer regroup, ungroup;      // (R) int32
  DeviceBuffer weight;                // (R) fp32
  std::vector<int64_t> recv_rows;     // (ep)
  std::vector<int64_t> expert_rows;   // (local experts)
  // (R): the source (its EP index; under gathers, expert-TP index x ep + EP index) and slot
  std::vector<std::pair<int32_t, int64_t>> origin;
  // gathers: each expert-TP rank's received rows, and the padded block of the all-gather
  // (the largest of them); regroup then indexes the gathered (tp x block) rows.
  std::vector<int64_t> tp_rows;
  int64_t tp_block = 0;
  DeviceBuffer input, hidden, up, act;  // (R, C), (R, F_e) x3; up for SwiGLU only
  void Clear() { *this = MoeSaved(); }
};

// An MoE layer's arguments to BlockForward / BlockBackward (block.h).
template <typename T>
struct MoeArgs {
  MoeRank rank;
  std::vector<ExpertWeights<T>> experts;    // the local experts, in index order
  std::vector<ExpertWeights<float>> grads;  // their gradients (backward only)
  double aux_scale = 0;                     // backward: the load-balancing loss's weight
};

}  // namespace shardsim::runtime
