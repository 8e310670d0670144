// See placement.h.
#include "src/layout/placement.h"

#include "src/util/check.h"

namespace shardsim {

const char* ParallelDimName(ParallelDim d) {
  switch (d) {
    case ParallelDim::kTp: return "tp";
    case ParallelDim::kCp: return "cp";
    case ParallelDim::kDp: return "dp";
    case ParallelDim::kPp: return "pp";
    case ParallelDim::kEp: return "ep";
    case ParallelDim::kEtp: return "etp";
  }
  return "?";
}

RankCoord CoordOf(const Layout& l, int64_t rank) {
  CHECK(rank >= 0 && rank < l.world()) << "rank " << rank << " outside world " << l.world();
  RankCoord c;
  c.tp = rank % l.tp;
  rank /= l.tp;
  c.cp = rank % l.cp;
  rank /= l.cp;
  c.dp = rank % l.dp;
  c.pp = rank / l.dp;
  return c;
}

int64_t RankOf(const Layout& l, const RankCoord& c) {
  return c.tp + l.tp * (c.cp + l.cp * (c.dp + l.dp * c.pp));
}

ExpertCoord ExpertCoordOf(const Layout& l, int64_t rank) {
  CHECK(rank >= 0 && rank < l.world()) << "rank " << rank << " outside world " << l.world();
  const int64_t stage = l.tp * l.cp * l.dp, etp = l.expert_tp();
  CHECK(stage % (etp * l.ep) == 0) << "ep x etp must divide tp x cp x dp";
  ExpertCoord c;
  c.pp = rank / stage;
  const int64_t local = rank % stage;
  c.etp = local % etp;
  c.ep = local / etp % l.ep;
  c.edp = local / (etp * l.ep);
  return c;
}

int64_t RankOfExpert(const Layout& l, const ExpertCoord& c) {
  return c.pp * l.tp * l.cp * l.dp + c.etp + l.expert_tp() * (c.ep + l.ep * c.edp);
}

std::vector<int64_t> GroupOf(const Layout& l, int64_t rank, ParallelDim dim) {
  const RankCoord me = CoordOf(l, rank);
  std::vector<int64_t> group;
  auto add = [&](int64_t size, auto set) {
    for (int64_t i = 0; i < size; ++i) {
      RankCoord c = me;
      set(c, i);
      group.push_back(RankOf(l, c));
    }
  };
  switch (dim) {
    case ParallelDim::kTp: add(l.tp, [](RankCoord& c, int64_t i) { c.tp = i; }); break;
    case ParallelDim::kCp: add(l.cp, [](RankCoord& c, int64_t i) { c.cp = i; }); break;
    case ParallelDim::kDp: add(l.dp, [](RankCoord& c, int64_t i) { c.dp = i; }); break;
    case ParallelDim::kPp: add(l.pp, [](RankCoord& c, int64_t i) { c.pp = i; }); break;
    case ParallelDim::kEp:
    case ParallelDim::kEtp: {
      const ExpertCoord e = ExpertCoordOf(l, rank);
      const bool ep = dim == ParallelDim::kEp;
      for (int64_t i = 0; i < (ep ? l.ep : l.expert_tp()); ++i) {
        ExpertCoord c = e;
        (ep ? c.ep : c.etp) = i;
        group.push_back(RankOfExpert(l, c));
      }
      break;
    }
  }
  return group;
}

std::vector<int64_t> EdpGroupOf(const Layout& l, int64_t rank) {
  const ExpertCoord me = ExpertCoordOf(l, rank);
  std::vector<int64_t> group;
  for (int64_t d = 0; d < l.edp(); ++d) group.push_back(RankOfExpert(l, ExpertCoord{me.etp, me.ep, d, me.pp}));
  return group;
}

std::vector<int64_t> DpCpGroupOf(const Layout& l, int64_t rank) {
  const RankCoord me = CoordOf(l, rank);
  std::vector<int64_t> group;
  for (int64_t d = 0; d < l.dp; ++d) {
    for (int64_t c = 0; c < l.cp; ++c) group.push_back(RankOf(l, RankCoord{me.tp, c, d, me.pp}));
  }
  return group;
}

}  // namespace shardsim
