// Collective costs on the cluster graph against the ring formula and the link bottleneck.
#include <gtest/gtest.h>

#include <numeric>

#include "src/cost/collective.h"
#include "tests/test_models.h"

namespace shardsim {
namespace {

std::vector<int64_t> Range(int64_t n, int64_t first = 0) {
  std::vector<int64_t> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

// One node of n = 8 GPUs on an NVSwitch: B = 300 GB/s per GPU, alpha = 3 us per step.
// Ring all-reduce of S = 1 GiB: 2(n-1)/n S/B + 2(n-1) alpha
//   = 14/8 x 1073741824 / 300e9 + 14 x 3e-6 = 6.2635e-3 + 42e-6 s.
TEST(CollectiveTest, RingAllReduceFormulaInsideANode) {
  const HardwareSpec hw = testing::TestCluster(1, 8, "300 GB/s", "3 us", "100 Gb/s", "5 us", 1);
  const Cluster cluster(hw);
  const CollectiveModel model(cluster);
  const double S = 1073741824.0, B = 300e9, alpha = 3e-6, n = 8;
  const CollectiveCost c =
      model.EstimateWith(Collective::kAllReduce, CollectiveAlgorithm::kRing, Range(8), S);
  EXPECT_NEAR(c.time_s, 2 * (n - 1) / n * S / B + 2 * (n - 1) * alpha, 1e-12);
  // nccl-tests' busbw = algbw x 2(n-1)/n, which approaches B as latency vanishes.
  EXPECT_NEAR(c.busbw, S / c.time_s * 2 * (n - 1) / n, 1e-3);
  EXPECT_FALSE(c.crosses_network);
}

// All-gather and reduce-scatter: (n-1)/n S/B + (n-1) alpha, S the gathered total.
TEST(CollectiveTest, RingAllGatherAndReduceScatter) {
  const HardwareSpec hw = testing::TestCluster(1, 4, "100 GB/s", "2 us", "100 Gb/s", "5 us", 1);
  const Cluster cluster(hw);
  const CollectiveModel model(cluster);
  const double S = 400e6, B = 100e9, alpha = 2e-6, n = 4;
  for (Collective c : {Collective::kAllGather, Collective::kReduceScatter}) {
    EXPECT_NEAR(model.EstimateWith(c, CollectiveAlgorithm::kRing, Range(4), S).time_s,
                (n - 1) / n * S / B + (n - 1) * alpha, 1e-12);
  }
}

// One GPU per node on 4 nodes: the ring's every step crosses a NIC of 100 Gb/s = 12.5 GB/s,
// far below the 300 GB/s fabric; alpha = the NIC-to-NIC latency (5 us, one leaf switch).
// Time = 2(n-1)/n S / 12.5e9 + 2(n-1) x 5e-6.
TEST(CollectiveTest, GroupAcrossNodesIsLimitedByTheNetwork) {
  const HardwareSpec hw = testing::TestCluster(4, 8, "300 GB/s", "3 us", "100 Gb/s", "5 us", 8, 4);
  const Cluster cluster(hw);
  const CollectiveModel model(cluster);
  const double S = 1e9, n = 4;
  const std::vector<int64_t> group = {0, 8, 16, 24};  // GPU 0 of each node
  const CollectiveCost c =
      model.EstimateWith(Collective::kAllReduce, CollectiveAlgorithm::kRing, group, S);
  EXPECT_NEAR(c.time_s, 2 * (n - 1) / n * S / 12.5e9 + 2 * (n - 1) * 5e-6, 1e-12);
  EXPECT_TRUE(c.crosses_network);
}

// All 16 GPUs of 2 nodes with 8 NICs each: 8 rings (one per NIC) each carry S/8; each NIC
// carries one ring's inter-node flow while each GPU's NVSwitch port carries 7 flows:
// per byte of a ring's chunk, max(1 / 12.5e9, 7 / 300e9) = 1 / 12.5e9, so the node's 8 NICs
// together set the pace: time = 2(n-1)/n S / (8 x 12.5e9) + 2(n-1) x alpha_net.
TEST(CollectiveTest, MultiNodeRingUsesEveryNic) {
  const HardwareSpec hw = testing::TestCluster(2, 8, "300 GB/s", "3 us", "100 Gb/s", "5 us", 8);
  const Cluster cluster(hw);
  const CollectiveModel model(cluster);
  const double S = 1e9, n = 16;
  const CollectiveCost c =
      model.EstimateWith(Collective::kAllReduce, CollectiveAlgorithm::kRing, Range(16), S);
  EXPECT_NEAR(c.time_s, 2 * (n - 1) / n * S / (8 * 12.5e9) + 2 * (n - 1) * 5e-6, 1e-12);
}

// Send/recv between GPUs of two nodes: S / 12.5e9 + 5 us; base latency adds once.
TEST(CollectiveTest, SendRecvAndBaseLatency) {
  const HardwareSpec hw =
      testing::TestCluster(2, 8, "300 GB/s", "3 us", "100 Gb/s", "5 us", 8, 2, "8.4 us");
  const Cluster cluster(hw);
  const CollectiveModel model(cluster);
  EXPECT_NEAR(model.Estimate(Collective::kSendRecv, {0, 8}, 1e8).time_s,
              1e8 / 12.5e9 + 5e-6 + 8.4e-6, 1e-12);
}

// The cheapest algorithm wins: for a small all-reduce across 16 nodes x 1 GPU the tree's
// 2 log2(16) = 8 latency steps beat the ring's 2 x 15 = 30.
TEST(CollectiveTest, TreeWinsForSmallMessagesAcrossNodes) {
  const HardwareSpec hw = testing::TestCluster(16, 1, "300 GB/s", "3 us", "100 Gb/s", "5 us", 1, 16);
  const Cluster cluster(hw);
  const CollectiveModel model(cluster);
  const CollectiveCost small = model.Estimate(Collective::kAllReduce, Range(16), 1024);
  EXPECT_EQ(small.algorithm, CollectiveAlgorithm::kTree);
  EXPECT_NEAR(small.time_s, 2 * 1024 / 12.5e9 + 2 * 4 * 5e-6, 1e-12);
  const CollectiveCost large = model.Estimate(Collective::kAllReduce, Range(16), 1e9);
  EXPECT_EQ(large.algorithm, CollectiveAlgorithm::kRing);
}

}  // namespace
}  // namespace shardsim
