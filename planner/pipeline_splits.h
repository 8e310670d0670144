// The pipeline splits the planner searches for pp stages of vpp chunks (src/layout/pipeline.h
// says what each split places where; CheckLayout states when a split is valid).
#pragma once

#include <cstdint>
#include <vector>

#include "src/layout/layout.h"
#include "src/model/model_spec.h"

namespace shardsim::planner {

// The layout keys of one split; all zero / off: the even split.
struct PipelineSplit {
  int64_t first_stage_layers = 0, last_stage_layers = 0;
  bool embedding_in_split = false, loss_in_split = false;
  void ApplyTo(Layout& l) const;
};

// The final norm, LM head and loss's forward FLOPs per token in units of one transformer
// layer's (the average over the model's dense and MoE layers): 2 V h for the logits against
// 2 x (a layer's active weights) + 2 s a d_head for its GEMMs and causal attention (Narayanan
// et al. 2021, Sec. 5.1's 24 B s h^2 + 4 B s^2 h per layer and 6 B s h V for the logits are
// these figures times 3 passes and B s tokens). With multi-token prediction the head's stage
// also runs each depth's layer, projection and head (ModelSpec::mtp_layers): (1 + D) 2 V h plus
// 2 x the depths' active weights plus D x the attention term. What the cost-balanced split
// weighs the end stages' extra work with; the embedding lookup is taken as free.
double HeadInLayers(const ModelSpec& m);

// The splits searched for (pp, vpp) with schedule `s`, each distinct and valid:
//   - the even split, where pp x vpp divides the layers (every framework's default);
//   - Megatron-Core's accounting of the embedding and the loss as layers, and of the loss alone
//     (account_for_embedding_in_pipeline_split / account_for_loss_in_pipeline_split), where
//     pp x vpp divides the layers so counted;
//   - the cost-balanced split (BalancedSplit);
// of splits that place the same layers on the same positions only the first is kept.
// Empty for pp = 1 (no split) unless vpp = 1: then the one even split.
std::vector<PipelineSplit> SearchedSplits(const ModelSpec& m, int64_t pp, int64_t vpp, Schedule s);

// The first/last split that minimises the largest stage's work in layers (the first stage's
// layers, a middle stage's, the last stage's plus HeadInLayers), every stage's layers a
// multiple of vpp and at least vpp; on a tie the one whose end stages' larger work is least,
// then the one closest to even. Written with only the
// keys that differ from the middle stages'; all zero when it is the even split, when no such
// split exists, or when its largest stage exceeds the ideal (layers + head) / pp by more than
// vpp layers (too many stages for the layers: no split is balanced).
PipelineSplit BalancedSplit(const ModelSpec& m, int64_t pp, int64_t vpp);

}  // namespace shardsim::planner
