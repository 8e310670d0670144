// Rank placement: which GPU runs which (tp, cp, dp, pp) coordinate, and the groups of ranks
// that talk in each collective. Order, innermost first: TP, CP, DP, PP (Megatron-LM's default
// "tp-cp-dp-pp"), so TP groups sit within a node. Rank r runs on GPU r; GPU g is on node
// g / gpus_per_node. An EP group is `ep` consecutive DP indices with the same tp, cp and pp.
#pragma once

#include <cstdint>
#include <vector>

#include "src/layout/layout.h"

namespace shardsim {

enum class ParallelDim { kTp, kCp, kDp, kPp, kEp };
const char* ParallelDimName(ParallelDim d);

struct RankCoord {
  int64_t tp = 0, cp = 0, dp = 0, pp = 0;
};

RankCoord CoordOf(const Layout& l, int64_t rank);
int64_t RankOf(const Layout& l, const RankCoord& c);
// The ranks of `rank`'s group along `dim`, in group order (index 0 first).
std::vector<int64_t> GroupOf(const Layout& l, int64_t rank, ParallelDim dim);
// The dense weights' replicas of `rank`: the same tp and pp, every (dp, cp), in rank order
// (cp fastest; index dp x cp + cp). Megatron-Core reduces gradients and shards ZeRO over it
// (the data-parallel group with context parallelism, intra_dp_cp_group).
std::vector<int64_t> DpCpGroupOf(const Layout& l, int64_t rank);
// The expert-data-parallel group of `rank` (Layout::edp members): the same tp and pp, every cp,
// the dp indices congruent to its own modulo ep (the ranks holding the same experts), in rank
// order (cp fastest).
std::vector<int64_t> EdpGroupOf(const Layout& l, int64_t rank);

}  // namespace shardsim
