// Issue 15, item 5: symmetric simulation on nodes whose GPUs share NICs. Symmetric mode
// simulates one rank per stage; on a node with fewer NICs than GPUs the other ranks' copies of
// its DP, CP and pipeline transfers load the same NIC (AddLockstepCopies, src/sim/simulator.cc).
// Full mode simulates every rank, so the two must agree; before the copies were added the
// symmetric DP and pipeline transfers ran at the NIC's whole rate, half of --full's time or
// less.
#include <gtest/gtest.h>

#include "src/layout/layout.h"
#include "src/layout/validate.h"
#include "src/sim/simulator.h"
#include "tests/test_models.h"

namespace shardsim {
namespace {

TEST(SharedNics, SymmetricAgreesWithFullWithinOnePercent) {
  // 4 nodes of 8 GPUs with 2 NICs each (4 GPUs per NIC), 100 Gb/s NICs so that the network
  // matters; NVLink-class fabric inside the node.
  // (and the same with 4 NICs, 2 GPUs per NIC).
  for (int64_t nics : {2, 4}) {
    const HardwareSpec hw = testing::TestCluster(4, 8, "300 GB/s", "3 us", "100 Gb/s", "5 us", nics, 4, "8 us");
    const Cluster cluster(hw);
    const ModelSpec m = testing::GptModel(8, 2048, 16, 32000, 2048);
    for (const char* spec : {"tp=2,pp=1,dp=16,mbs=1,gbs=64,zero=1",
                             "tp=2,pp=2,dp=8,mbs=1,gbs=64",
                             "tp=4,pp=2,dp=4,mbs=1,gbs=32,zero=2",
                             "tp=1,pp=4,dp=8,mbs=2,gbs=64,schedule=1f1b",
                             "tp=2,pp=2,dp=2,cp=4,mbs=1,gbs=16,zero=1",
                             "tp=1,pp=2,dp=16,vpp=2,mbs=1,gbs=64,schedule=interleaved,zero=3",
                             "tp=2,pp=2,dp=8,mbs=1,gbs=64,overlap_dp=off,recompute=full"}) {
      SCOPED_TRACE(std::string(spec) + " with " + std::to_string(nics) + " NICs");
      StatusOr<Layout> l = ParseLayout(spec);
      ASSERT_TRUE(l.ok()) << l.status().message();
      StatusOr<Layout> r = ResolveLayoutFor(*l, 32, hw);
      ASSERT_TRUE(r.ok());
      ASSERT_TRUE(CheckLayout(*r, m, hw, 32).ok()) << CheckLayout(*r, m, hw, 32).ToStatus().message();
      SimOptions sym, full;
      full.full = true;
      StatusOr<SimResult> a = Simulate(m, cluster, *r, sym);
      StatusOr<SimResult> b = Simulate(m, cluster, *r, full);
      ASSERT_TRUE(a.ok() && b.ok());
      EXPECT_NEAR(a->iteration_time_s, b->iteration_time_s, 0.01 * b->iteration_time_s)
          << "symmetric " << a->iteration_time_s << " s, full " << b->iteration_time_s << " s";
    }
  }
}

}  // namespace
}  // namespace shardsim
