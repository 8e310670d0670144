// Collective costs on the cluster graph against the ring formula and the link bottleneck, and
// NCCL's protocols on the ring (LL and LL128 beside Simple) with the bundled DGX H100's figures
// (hardware/dgx-h100.yaml; NCCL tuning.cc, REFERENCES.md 2.2-2.3).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "src/cost/collective.h"
#include "tests/test_hardware.h"
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
// 2 log2(16) = 8 latency steps beat the ring's 2 x 15 = 30. The tree's bus bandwidth is 0.92 of
// the links' (NCCL's tree all-reduce), and at 1024 B NCCL's corrected one, x0.9 (Simple,
// log2(1024 / 64) = 4).
TEST(CollectiveTest, TreeWinsForSmallMessagesAcrossNodes) {
  const HardwareSpec hw = testing::TestCluster(16, 1, "300 GB/s", "3 us", "100 Gb/s", "5 us", 1, 16);
  const Cluster cluster(hw);
  const CollectiveModel model(cluster);
  const CollectiveCost small = model.Estimate(Collective::kAllReduce, Range(16), 1024);
  EXPECT_EQ(small.algorithm, CollectiveAlgorithm::kTree);
  EXPECT_NEAR(small.time_s, 2 * 1024 / (12.5e9 * 0.92 * 0.9) + 2 * 4 * 5e-6, 1e-12);
  const CollectiveCost large = model.Estimate(Collective::kAllReduce, Range(16), 1e9);
  EXPECT_EQ(large.algorithm, CollectiveAlgorithm::kRing);
}

// One DGX H100 node, all-reduce over its 8 GPUs: n = 8, bus factor 2 x 7/8 = 1.75, 14 steps.
// The fabric: 450 GB/s x 0.824 = 370.8 GB/s per GPU, 3.4 us a step, base 8.4 us; 32 channels.
//   Simple: 1.75 S / 370.8e9 + 8.4 + 14 x 3.4 = 56.0 us.
//   LL:     busbw min(0.5 x 370.8, 141.0 one node) = 141 GB/s; 6.6 + 14 x 0.6 = 15.0 us.
//   LL128:  busbw min(0.92 x 370.8 = 341.136, 36.7 x 32 = 1174.4) = 341.136 GB/s; 14 + 14 x 1.9 = 40.6 us.
// So LL wins up to 25.6 us / (1.75 (1/141e9 - 1/341.136e9)) = 3.5 MB, LL128 up to
// 15.4 us / (1.75 (1/341.136e9 - 1/370.8e9)) = 37.5 MB, and Simple beyond.
TEST(CollectiveProtocolTest, RingPicksLlThenLl128ThenSimpleAsNcclDoes) {
  StatusOr<HardwareSpec> hw = LoadHardware("dgx-h100");
  ASSERT_TRUE(hw.ok()) << hw.status().message();
  ASSERT_EQ(hw->collective_protocols.size(), 2u);
  const Cluster cluster(*hw);
  const CollectiveModel model(cluster);
  const std::vector<int64_t> node = Range(8);

  const double small = 65536;  // 64 KiB: 1.75 x 65536 / 141e9 + 15.0 us
  const CollectiveCost a = model.Estimate(Collective::kAllReduce, node, small);
  EXPECT_EQ(a.algorithm, CollectiveAlgorithm::kRing);
  EXPECT_EQ(a.protocol, CollectiveProtocol::kLl);
  EXPECT_NEAR(a.time_s, 1.75 * small / 141e9 + 15.0e-6, 1e-12);
  EXPECT_NEAR(a.latency_s, 15.0e-6, 1e-12);
  EXPECT_EQ(AlgorithmLabel(a), "ring LL");

  const double mid = 16777216;  // 16 MiB: 1.75 x S / 341.136e9 + 40.6 us (Simple: +56.0 us at 370.8)
  const CollectiveCost b = model.Estimate(Collective::kAllReduce, node, mid);
  EXPECT_EQ(b.protocol, CollectiveProtocol::kLl128);
  EXPECT_NEAR(b.time_s, 1.75 * mid / 341.136e9 + 40.6e-6, 1e-12);

  const double large = 1073741824;  // 1 GiB: Simple, 1.75 x S / 370.8e9 + 56.0 us
  const CollectiveCost c = model.Estimate(Collective::kAllReduce, node, large);
  EXPECT_EQ(c.protocol, CollectiveProtocol::kSimple);
  EXPECT_NEAR(c.time_s, 1.75 * large / 370.8e9 + 56.0e-6, 1e-12);
  EXPECT_EQ(AlgorithmLabel(c), "ring");
}

// A ring across two nodes keeps its per-step latency under every protocol (the description's
// network latency is the wire's and the library's post overhead), so LL's fixed term is the
// Simple ring's less Simple's base 8.4 us plus LL's 6.6 us; its bus bandwidth is capped at
// 39.0 GB/s (llMaxBws, two nodes, Intel host). An all-gather (no tree to compete) of 4 KiB
// over both nodes' 16 GPUs: bus factor 15/16 = 0.9375.
TEST(CollectiveProtocolTest, AcrossNodesOnlyTheBaseAndTheBandwidthChange) {
  StatusOr<HardwareSpec> hw = LoadHardware("dgx-h100");
  ASSERT_TRUE(hw.ok()) << hw.status().message();
  const Cluster cluster(*hw);
  const CollectiveModel model(cluster);
  const std::vector<int64_t> group = Range(16);  // both nodes, 8 GPUs each
  const double S = 4096;  // latency-bound
  const CollectiveCost simple = model.EstimateWith(Collective::kAllGather, CollectiveAlgorithm::kRing, group, S);
  const CollectiveCost best = model.Estimate(Collective::kAllGather, group, S);
  ASSERT_EQ(best.algorithm, CollectiveAlgorithm::kRing);
  ASSERT_EQ(best.protocol, CollectiveProtocol::kLl);
  EXPECT_TRUE(best.crosses_network);
  EXPECT_NEAR(best.latency_s, simple.latency_s - 8.4e-6 + 6.6e-6, 1e-12);
  EXPECT_NEAR(best.time_s - best.latency_s, 0.9375 * S / 39.0e9, 1e-12);
}

// The tree under LL and LL128 (an all-reduce over both DGX H100 nodes, 16 GPUs): its fixed term
// is the Simple tree's less Simple's base (8.4 us) and intra-node chain (2 x 7 steps x the
// fabric's 3.4 us = 47.6 us), plus the protocol's base and its chain at its tree fabric
// latency (LL: 6.8 + 2 x 7 x 0.6 = 15.2 us; LL128: 14 + 2 x 7 x 1.25 = 31.5 us); the inter-node
// steps stay. Its bus bandwidth is NCCL's tree correction (by size) x the Simple tree's times 1/3.8 (LL, capped at llMaxBws'
// 39.0 GB/s for two nodes) or 120/128 (LL128, capped at 36.7 GB/s x 32 channels). At 4 KiB the
// tree under LL wins (the ring pays 30 steps), at 4 MiB under LL128; at 1 GiB Simple does.
TEST(CollectiveProtocolTest, TheTreeRunsLlAndLl128AcrossNodes) {
  StatusOr<HardwareSpec> hw = LoadHardware("dgx-h100");
  ASSERT_TRUE(hw.ok()) << hw.status().message();
  ASSERT_EQ(hw->gpu.nccl_channels, 32);
  const Cluster cluster(*hw);
  const CollectiveModel model(cluster);
  const std::vector<int64_t> group = Range(16);
  const double probe = 1e9;
  const CollectiveCost simple = model.EstimateWith(Collective::kAllReduce, CollectiveAlgorithm::kTree, group, probe);
  ASSERT_TRUE(std::isfinite(simple.time_s));
  const double inter = simple.latency_s - 8.4e-6 - 47.6e-6;  // the inter-node steps
  const double simple_busbw = simple.busbw * simple.time_s / (simple.time_s - simple.latency_s);
  const double factor = 2.0 * 15 / 16;  // all-reduce bus factor, 16 ranks

  const double S = 4096;
  const CollectiveCost small = model.Estimate(Collective::kAllReduce, group, S);
  EXPECT_EQ(small.algorithm, CollectiveAlgorithm::kTree);
  EXPECT_EQ(small.protocol, CollectiveProtocol::kLl);
  EXPECT_EQ(AlgorithmLabel(small), "tree LL");
  EXPECT_NEAR(small.latency_s, 15.2e-6 + inter, 1e-12);
  // NCCL's tree correction at 4096 B: log2(4096 / 64) = 6, LL's 0.7 of the bandwidth.
  const double ll_busbw = std::min(simple_busbw / 3.8, 39.0e9);
  EXPECT_NEAR(small.time_s, factor * S / (ll_busbw * 0.7) + 15.2e-6 + inter, 1e-12);

  // At 4 MiB LL's lower bandwidth costs more than LL128's 16.3 us of extra latency, and the
  // tree under LL128 (about 58 us) beats the rings and Simple.
  const double ll128_busbw = std::min(simple_busbw * 120.0 / 128.0, 36.7e9 * 32);
  const double ll128_fixed = 31.5e-6 + inter;
  const double M = 4194304;  // 4 MiB: log2(M / 64) = 16, corrected x0.7 under LL, x0.8 under LL128
  const double ll_time = factor * M / (ll_busbw * 0.7) + 15.2e-6 + inter;
  const double ll128_time = factor * M / (ll128_busbw * 0.8) + ll128_fixed;
  const CollectiveCost mid = model.Estimate(Collective::kAllReduce, group, M);
  EXPECT_LT(ll128_time, ll_time);
  EXPECT_EQ(AlgorithmLabel(mid), "tree LL128");
  EXPECT_NEAR(mid.time_s, ll128_time, 1e-12);
  const CollectiveCost large = model.Estimate(Collective::kAllReduce, group, 1073741824.0);
  EXPECT_EQ(large.protocol, CollectiveProtocol::kSimple);
}

// Without `tree:` figures the tree runs Simple only, however small the message.
TEST(CollectiveProtocolTest, WithoutTreeFiguresTheTreeRunsSimple) {
  StatusOr<HardwareSpec> loaded = LoadHardware("dgx-h100");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  HardwareSpec hw = *loaded;
  for (ProtocolSpec& p : hw.collective_protocols) p.tree.reset();
  const Cluster cluster(hw);
  const CollectiveModel model(cluster);
  const CollectiveCost small = model.Estimate(Collective::kAllReduce, Range(16), 4096);
  EXPECT_FALSE(small.algorithm == CollectiveAlgorithm::kTree && small.protocol != CollectiveProtocol::kSimple);
}

// A description without protocols prices Simple only, as before them.
TEST(CollectiveProtocolTest, WithoutProtocolsTheRingRunsSimple) {
  StatusOr<HardwareSpec> loaded = LoadHardware("dgx-h100");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  HardwareSpec hw = *loaded;
  hw.collective_protocols.clear();
  const Cluster cluster(hw);
  const CollectiveModel model(cluster);
  const CollectiveCost a = model.Estimate(Collective::kAllReduce, Range(8), 65536);
  EXPECT_EQ(a.protocol, CollectiveProtocol::kSimple);
  EXPECT_NEAR(a.time_s, 1.75 * 65536 / 370.8e9 + 56.0e-6, 1e-12);
}

// The loader: each protocol once, and its fields strict.
TEST(CollectiveProtocolTest, LoaderRejectsARepeatedProtocolAndUnknownKeys) {
  // The test node (tests/test_hardware.h) with a collectives section.
  const std::string base = testing::TwoGpuNodeYaml("100 GB/s") +
                           "collectives:\n  base_latency: \"8.4 us\"\n  protocols:\n";
  const std::string ll = "    - {name: ll, base_latency: \"6.6 us\", fabric_latency: \"0.6 us\", bandwidth_factor: 0.5}\n";
  StatusOr<HardwareSpec> ok = ParseHardwareYaml(base + ll, "p");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->collective_protocols.size(), 1u);
  StatusOr<HardwareSpec> twice = ParseHardwareYaml(base + ll + ll, "p");
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("listed twice"), std::string::npos) << twice.status().message();
  StatusOr<HardwareSpec> typo = ParseHardwareYaml(
      base + "    - {name: ll, base_latency: \"6.6 us\", fabric_latncy: \"0.6 us\", bandwidth_factor: 0.5}\n", "p");
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.status().message().find("fabric_latency"), std::string::npos) << typo.status().message();
  // The tree's figures: read, and strict too.
  const std::string tree_ll = "    - {name: ll, base_latency: \"6.6 us\", fabric_latency: \"0.6 us\", bandwidth_factor: 0.5,\n"
                              "       tree: {base_latency: \"6.8 us\", fabric_latency: \"0.6 us\", bandwidth_factor: 0.2632,\n"
                              "              max_channel_busbw: {two_nodes: \"36.7 GB/s\", more_nodes: \"29 GB/s\"}}}\n";
  StatusOr<HardwareSpec> tree = ParseHardwareYaml(base + tree_ll, "p");
  ASSERT_TRUE(tree.ok()) << tree.status().message();
  ASSERT_TRUE(tree->collective_protocols[0].tree.has_value());
  EXPECT_NEAR(tree->collective_protocols[0].tree->base_latency_s, 6.8e-6, 1e-15);
  EXPECT_NEAR(tree->collective_protocols[0].tree->max_channel_busbw_more_nodes, 29e9, 1e-3);
  std::string bad_tree = tree_ll;
  bad_tree.replace(bad_tree.find("more_nodes"), 10, "more_node");
  StatusOr<HardwareSpec> bad = ParseHardwareYaml(base + bad_tree, "p");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("more_nodes"), std::string::npos) << bad.status().message();
}

}  // namespace
}  // namespace shardsim
