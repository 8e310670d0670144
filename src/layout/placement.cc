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
    case ParallelDim::kEp: {
      CHECK(l.dp % l.ep == 0) << "ep must divide dp";
      const int64_t base = me.dp / l.ep * l.ep;
      add(l.ep, [base](RankCoord& c, int64_t i) { c.dp = base + i; });
      break;
    }
  }
  return group;
}

std::vector<int64_t> EdpGroupOf(const Layout& l, int64_t rank) {
  const RankCoord me = CoordOf(l, rank);
  std::vector<int64_t> group;
  for (int64_t d = me.dp % l.ep; d < l.dp; d += l.ep) {
    for (int64_t c = 0; c < l.cp; ++c) group.push_back(RankOf(l, RankCoord{me.tp, c, d, me.pp}));
  }
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
