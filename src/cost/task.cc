// Names of the task vocabulary and the members of each kind of group; see task.h.
#include "src/cost/task.h"

#include "src/layout/placement.h"

namespace shardsim {

const char* StreamName(Stream s) {
  static const char* kNames[] = {"compute", "tp", "cp", "ep", "pp-forward", "pp-backward",
                                 "dp", "offload"};
  return kNames[static_cast<int>(s)];
}

const char* CategoryName(Category c) {
  static const char* kNames[] = {"compute", "recompute", "tp_comm", "cp_comm", "ep_comm",
                                 "pp_comm", "dp_comm", "bubble", "optimizer", "offload"};
  return kNames[static_cast<int>(c)];
}

const char* GroupKindName(GroupKind g) {
  static const char* kNames[] = {"tp", "cp", "ep", "dp", "edp", "embedding", "etp"};
  return kNames[static_cast<int>(g)];
}

std::vector<int64_t> GroupMembers(const Layout& l, int64_t rank, GroupKind g) {
  const RankCoord me = CoordOf(l, rank);
  switch (g) {
    case GroupKind::kTp: return GroupOf(l, rank, ParallelDim::kTp);
    case GroupKind::kCp: return GroupOf(l, rank, ParallelDim::kCp);
    case GroupKind::kEp: return GroupOf(l, rank, ParallelDim::kEp);
    case GroupKind::kDp: return DpCpGroupOf(l, rank);  // the dense weights' replicas, DP x CP
    case GroupKind::kEdp: return EdpGroupOf(l, rank);
    case GroupKind::kEtp: return GroupOf(l, rank, ParallelDim::kEtp);
    case GroupKind::kEmbedding: {
      std::vector<int64_t> out{RankOf(l, RankCoord{me.tp, me.cp, me.dp, 0})};
      if (HeadStage(l) != 0) out.push_back(RankOf(l, RankCoord{me.tp, me.cp, me.dp, HeadStage(l)}));
      return out;
    }
  }
  return {rank};
}

}  // namespace shardsim
