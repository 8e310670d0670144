// Top-k routing of a mixture-of-experts layer, on the host, as Megatron-Core's TopKRouter runs it
// by default (megatron/core/transformer/moe/moe_utils.py): topk_softmax_with_capacity with the
// softmax score function and use_pre_softmax off (each token's k largest logits, then a softmax
// over those k: Mixtral's routing), apply_router_token_dropping with the "probs" drop policy
// (an expert keeps the `capacity` tokens of largest probability, capacity =
// ceil(T k / E x capacity_factor)), and switch_load_balancing_loss_func (Fedus et al. 2022):
//   aux = coeff x E / (k T^2) x sum_e n_e x sum_t s_te,
// s = softmax(logits) over all E experts, n_e the tokens whose top k hold e (before dropping).
// The single-process reference (moe_mlp.h) and the executor (runtime/exec/moe_block.h) both
// route with these functions, so a layout's routing is the reference's token for token.
#pragma once

#include <cstdint>
#include <vector>

namespace shardsim::runtime {

struct MoeRouting {
  int64_t tokens = 0, experts = 0, top_k = 0;
  // Per slot (token t, choice j) at t k + j: the expert, its combine weight (the softmax over
  // the token's k logits), and whether the expert kept it (dropped slots add nothing).
  std::vector<int32_t> expert;
  std::vector<double> weight;
  std::vector<uint8_t> kept;
  std::vector<double> scores;     // (T, E): softmax over all experts, for the aux loss
  std::vector<int64_t> selected;  // (E): n_e, tokens that chose e (before dropping)
  // The kept slots, expert after expert, tokens in order within each: the dispatch order.
  std::vector<int64_t> order;
  std::vector<int64_t> per_expert;  // (E): kept slots of each expert (runs of `order`)
  double aux_loss = 0;              // coeff x ... as above (0 when coeff is 0)
  double aux_coeff = 0;
  int64_t aux_tokens = 0;           // T of the aux loss: `tokens`, or the whole sequence's (CP)
};

// Context parallelism: each rank routes its share of a sequence's tokens, and the aux loss is
// the whole micro-batch's. `selected` (E): n_e summed over the ranks, `tokens` their T; the
// rank's aux_loss becomes its share, coeff x E / (k T^2) x sum_e n_e x sum_{its t} s_te (the
// ranks' shares add up to the whole's: Megatron-Core reduces tokens_per_expert over the
// TP x CP group, moe_utils.py get_tokens_per_expert_and_token_count).
void SetAuxStatistics(MoeRouting& r, const std::vector<int64_t>& selected, int64_t tokens);

// logits (T, E) row-major. capacity_factor 0: dropless.
template <typename S>
MoeRouting Route(const S* logits, int64_t tokens, int64_t experts, int64_t top_k, double capacity_factor,
                 double aux_coeff);

// dlogits (T, E) = d/dlogits of [sum over slots of dweight x weight + aux_scale x aux / coeff x coeff]:
// dweight (T k) the gradient of each slot's combine weight (0 where dropped: the output ignores
// it); aux_scale the weight the aux loss has in the objective (the micro-batch's share of the
// batch, as the cross-entropy's). Overwrites dlogits.
template <typename S>
void RouteBackward(const MoeRouting& r, const double* dweight, double aux_scale, S* dlogits);

}  // namespace shardsim::runtime
