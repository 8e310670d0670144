// Full mode's TP peers in lockstep (TpPeersInLockstep, src/sim/simulator.h): where a TP group
// is a whole node whose GPUs each have their own NIC on a rail-optimized network, full mode
// runs only the ranks of TP index 0 and reports each for its TP peers. That is exact (the
// peers' transfers run on links disjoint from everything else), so it must reproduce the run
// of every rank: the same iteration time, and for every rank the same breakdown and memory.
#include <gtest/gtest.h>

#include "src/layout/layout.h"
#include "src/layout/validate.h"
#include "src/sim/simulator.h"
#include "tests/test_models.h"

namespace shardsim {
namespace {

Layout Resolved(const std::string& spec, int64_t gpus, const HardwareSpec& hw, const ModelSpec& m) {
  StatusOr<Layout> l = ParseLayout(spec);
  CHECK(l.ok()) << l.status().message();
  StatusOr<Layout> r = ResolveLayoutFor(*l, gpus, hw);
  CHECK(r.ok()) << r.status().message();
  CHECK(CheckLayout(*r, m, hw, gpus).ok()) << CheckLayout(*r, m, hw, gpus).ToStatus().message();
  return *r;
}

TEST(TpLockstep, FullModeRunsOneRankPerTpGroupAndMatchesEveryRank) {
  // dgx-h100 (8 GPUs and 8 NICs a node, rail-optimized, 32 nodes a rail group) grown to 40
  // nodes, so that transfers between the two rail groups cross the spine.
  HardwareSpec hw = *LoadHardware("dgx-h100");
  hw.nodes = 40;
  const Cluster cluster(hw);
  ModelSpec dense = testing::GptModel(8, 4096, 32, 32000, 2048);
  ModelSpec moe = dense;
  moe.kv_heads = 8;
  moe.moe = MoeSpec{.experts = 8, .top_k = 2, .ffn_hidden = 8192, .aux_loss_coeff = 0.01};
  struct Case {
    const ModelSpec* m;
    int64_t gpus;
    std::string layout;
  } cases[] = {
      {&dense, 320, "tp=8,pp=4,mbs=1,gbs=80,zero=1,sp=on"},                      // dp 10: rings over both groups
      {&dense, 128, "tp=8,pp=2,cp=2,vpp=2,mbs=1,gbs=32,zero=1,sp=on,schedule=interleaved"},
      {&dense, 64, "tp=8,pp=2,mbs=1,gbs=16,zero=3,overlap_tp=on,sp=on"},
      {&dense, 64, "tp=8,pp=4,mbs=1,gbs=16,schedule=zero-bubble,recompute=full"},
      {&moe, 128, "tp=8,pp=2,ep=4,mbs=1,gbs=32,zero=2,sp=on"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.layout);
    const Layout l = Resolved(c.layout, c.gpus, hw, *c.m);
    SimOptions lockstep, every;
    lockstep.full = every.full = true;
    lockstep.critical_path = every.critical_path = false;
    every.tp_lockstep = false;
    ASSERT_TRUE(TpPeersInLockstep(hw, l, lockstep));
    ASSERT_FALSE(TpPeersInLockstep(hw, l, every));
    StatusOr<SimResult> a = Simulate(*c.m, cluster, l, lockstep);
    StatusOr<SimResult> b = Simulate(*c.m, cluster, l, every);
    ASSERT_TRUE(a.ok() && b.ok());
    // One rank of each TP group run, every rank reported.
    EXPECT_EQ(a->simulated_ranks, l.world() / 8);
    EXPECT_EQ(b->simulated_ranks, l.world());
    ASSERT_EQ(a->ranks.size(), b->ranks.size());
    EXPECT_EQ(a->tasks, b->tasks);
    // The same run: the peers' transfers move on links nothing else loads, so even the
    // picosecond rounding of each finish is the same.
    EXPECT_EQ(a->iteration_time_s, b->iteration_time_s);
    EXPECT_EQ(a->peak_memory_bytes, b->peak_memory_bytes);
    EXPECT_EQ(a->critical, b->critical);
    EXPECT_EQ(a->peak_rank, b->peak_rank);
    for (size_t i = 0; i < a->ranks.size(); ++i) {
      ASSERT_EQ(a->ranks[i].rank, b->ranks[i].rank);
      ASSERT_EQ(a->ranks[i].stage, b->ranks[i].stage);
      for (int k = 0; k < kCategoryCount; ++k) {
        ASSERT_EQ(a->ranks[i].breakdown_s[k], b->ranks[i].breakdown_s[k]) << "rank " << i << " " << CategoryName(static_cast<Category>(k));
      }
      ASSERT_EQ(a->ranks[i].peak_activations, b->ranks[i].peak_activations);
    }
  }
}

TEST(TpLockstep, OnlyWhereItIsExact) {
  const HardwareSpec h100 = *LoadHardware("dgx-h100");
  SimOptions full;
  full.full = true;
  Layout l;
  l.tp = 8;
  EXPECT_TRUE(TpPeersInLockstep(h100, l, full));
  // Symmetric mode already runs one rank per stage; a trace shows every rank's own spans.
  SimOptions sym, traced = full;
  traced.trace = true;
  EXPECT_FALSE(TpPeersInLockstep(h100, l, sym));
  EXPECT_FALSE(TpPeersInLockstep(h100, l, traced));
  // TP smaller than a node: the other groups' members share the node, and their traffic the
  // fabric links TP's collectives load.
  l.tp = 4;
  EXPECT_FALSE(TpPeersInLockstep(h100, l, full));
  l.tp = 8;
  // Fewer NICs than GPUs: TP peers share a NIC.
  HardwareSpec shared = h100;
  shared.network->nics = 4;
  EXPECT_FALSE(TpPeersInLockstep(shared, l, full));
  // A fat tree: a leaf's uplinks carry every rail of its nodes.
  HardwareSpec fat = h100;
  fat.network->topology = NetworkTopology::kFatTree;
  EXPECT_FALSE(TpPeersInLockstep(fat, l, full));
}

}  // namespace
}  // namespace shardsim
