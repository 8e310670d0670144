// Rank placement: which GPU runs which (tp, cp, dp, pp) coordinate, and the groups of ranks
// that talk in each collective. Order, innermost first: TP, CP, DP, PP (Megatron-LM's default
// "tp-cp-dp-pp"), so TP groups sit within a node. Rank r runs on GPU r; GPU g is on node
// g / gpus_per_node. The experts' groups fold the same ranks otherwise (ExpertCoordOf).
#pragma once

#include <cstdint>
#include <vector>

#include "src/layout/layout.h"

namespace shardsim {

enum class ParallelDim { kTp, kCp, kDp, kPp, kEp, kEtp };
const char* ParallelDimName(ParallelDim d);

struct RankCoord {
  int64_t tp = 0, cp = 0, dp = 0, pp = 0;
};

RankCoord CoordOf(const Layout& l, int64_t rank);
int64_t RankOf(const Layout& l, const RankCoord& c);

// A rank's place in the experts' grid. Megatron-Core folds each pipeline stage's TP x CP x DP
// ranks, numbered as above (tp fastest, then cp, then dp), into the experts' TP (innermost),
// EP, then expert-DP (megatron/core/parallel_state.py at NVIDIA/Megatron-LM d98e8a64dd: the
// expert RankGenerator over etp, ep, expert dp and pp with the order "tp-cp-ep-dp-pp", cp 1;
// torchtitan's sparse mesh ("pp", "dp_replicate", "efsdp", "ep", "etp") likewise, 73a0e6979
// torchtitan/distributed/parallel_dims.py). With the experts' TP the dense TP and cp 1, an EP
// group is ep consecutive DP indices with the same tp; with cp > 1 it runs over CP x DP.
struct ExpertCoord {
  int64_t etp = 0, ep = 0, edp = 0, pp = 0;
};
ExpertCoord ExpertCoordOf(const Layout& l, int64_t rank);
int64_t RankOfExpert(const Layout& l, const ExpertCoord& c);
// The ranks of `rank`'s group along `dim`, in group order (index 0 first); kEp and kEtp in the
// experts' grid (ExpertCoordOf).
std::vector<int64_t> GroupOf(const Layout& l, int64_t rank, ParallelDim dim);
// The dense weights' replicas of `rank`: the same tp and pp, every (dp, cp), in rank order
// (cp fastest; index dp x cp + cp). Megatron-Core reduces gradients and shards ZeRO over it
// (the data-parallel group with context parallelism, intra_dp_cp_group).
std::vector<int64_t> DpCpGroupOf(const Layout& l, int64_t rank);
// The expert-data-parallel group of `rank` (Layout::edp members, the ranks holding the same
// experts' shards): the same experts' TP and EP index and stage, in rank order.
std::vector<int64_t> EdpGroupOf(const Layout& l, int64_t rank);

}  // namespace shardsim
