// Tests of the hardware loader (src/hardware/hardware_yaml.cc) and of the cluster graph
// built from it (src/hardware/cluster.cc): vertex and link counts, routes and bottlenecks.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>

#include "src/hardware/cluster.h"
#include "src/hardware/hardware_spec.h"
#include "tests/contains.h"

namespace shardsim {
namespace {

namespace fs = std::filesystem;
using testing::Contains;

const std::string kSource = SHARDSIM_SOURCE_DIR;

HardwareSpec MustLoad(const std::string& path_or_name) {
  StatusOr<HardwareSpec> hw = LoadHardware(path_or_name);
  EXPECT_TRUE(hw.ok()) << hw.status().message();
  return hw.ok() ? *hw : HardwareSpec{};
}

std::map<VertexKind, int64_t> CountVertices(const Cluster& c) {
  std::map<VertexKind, int64_t> counts;
  for (auto [it, end] = boost::vertices(c.graph()); it != end; ++it) ++counts[c.graph()[*it].kind];
  return counts;
}

TEST(HardwareLoader, EveryBundledClusterLoadsAndBuildsItsGraph) {
  int loaded = 0;
  for (const auto& entry : fs::directory_iterator(kSource + "/hardware")) {
    if (entry.path().extension() != ".yaml") continue;
    SCOPED_TRACE(entry.path().string());
    StatusOr<HardwareSpec> hw = LoadHardware(entry.path().string());
    ASSERT_TRUE(hw.ok()) << hw.status().message();
    EXPECT_EQ(hw->name, entry.path().stem().string());
    EXPECT_GT(hw->gpu.memory_bytes, hw->gpu.reserved_memory_bytes);
    EXPECT_FALSE(hw->gpu.peak_flops.empty());
    // Several nodes need a network; a one-node description may carry one for `--nodes` (dgx-a800).
    if (hw->nodes > 1) {
      EXPECT_TRUE(hw->network.has_value());
    }
    const Cluster cluster(*hw);
    EXPECT_EQ(cluster.gpu_count(), hw->total_gpus());
    // The two ends of the cluster can reach each other.
    if (cluster.gpu_count() > 1) {
      const Route& r = cluster.RouteBetween(0, cluster.gpu_count() - 1);
      EXPECT_FALSE(r.links.empty());
      EXPECT_GT(r.bottleneck_bandwidth, 0);
    }
    ++loaded;
  }
  EXPECT_GE(loaded, 6);  // cpu-host, dgx-a100-80gb, dgx-a800, dgx-h100, dgx-h200, h200
}

TEST(HardwareLoader, DgxA100Figures) {
  const HardwareSpec hw = MustLoad("dgx-a100-80gb");
  EXPECT_EQ(hw.nodes, 128);
  EXPECT_EQ(hw.node.gpus, 8);
  EXPECT_EQ(hw.total_gpus(), 1024);
  // "81920 MiB" = 81920 * 2^20 = 80 * 2^30 bytes.
  EXPECT_EQ(hw.gpu.memory_bytes, 80.0 * (1LL << 30));
  EXPECT_EQ(hw.gpu.reserved_memory_bytes, 1.0 * (1LL << 30));
  ASSERT_TRUE(hw.gpu.Peak(DType::kBf16).has_value());
  EXPECT_DOUBLE_EQ(*hw.gpu.Peak(DType::kBf16), 312e12);
  EXPECT_FALSE(hw.gpu.Peak(DType::kFp8).has_value());  // Ampere has no FP8
  EXPECT_DOUBLE_EQ(hw.gpu.memory_bandwidth, 2.039e12);
  EXPECT_EQ(hw.node.fabric.kind, FabricKind::kNvSwitch);
  EXPECT_DOUBLE_EQ(hw.node.fabric.bandwidth, 300e9);
  ASSERT_TRUE(hw.network.has_value());
  EXPECT_EQ(hw.network->nics, 8);
  // 200 Gb/s line rate = 200e9 / 8 = 25e9 B/s; x nic_efficiency 0.96 = 24e9 B/s achievable.
  EXPECT_DOUBLE_EQ(hw.network->nic_bandwidth, 25e9);
  EXPECT_DOUBLE_EQ(hw.network->nic_efficiency, 0.96);
  EXPECT_DOUBLE_EQ(hw.network->effective_nic_bandwidth(), 24e9);
  EXPECT_EQ(hw.network->topology, NetworkTopology::kRailOptimized);
  EXPECT_DOUBLE_EQ(hw.collective_base_latency_s, 8.4e-6);
}

TEST(ClusterGraph, DgxA100VertexAndLinkCounts) {
  const Cluster c(MustLoad("dgx-a100-80gb"));
  // Per node (cluster.cc): 1 host, 8 GPUs, 1 NVSwitch vertex, 8 NICs.
  // Network: rail-optimized, 20 nodes per switch -> ceil(128 / 20) = 7 groups, one leaf per
  // rail (8 NICs) per group = 56 leaves; more than one leaf, so one spine.
  std::map<VertexKind, int64_t> n = CountVertices(c);
  EXPECT_EQ(n[VertexKind::kGpu], 128 * 8);
  EXPECT_EQ(n[VertexKind::kFabricSwitch], 128);
  EXPECT_EQ(n[VertexKind::kHost], 128);
  EXPECT_EQ(n[VertexKind::kNic], 128 * 8);
  EXPECT_EQ(n[VertexKind::kLeafSwitch], 7 * 8);
  EXPECT_EQ(n[VertexKind::kSpineSwitch], 1);
  // Links, each added in both directions. Per node: 8 GPU-host, 8 GPU-NVSwitch, 8 GPU-NIC
  // (NIC k serves GPU k), 8 NIC-leaf = 32 -> 64 directed; 128 nodes = 8192. Plus 56
  // leaf-spine links = 112 directed. Total 8304.
  EXPECT_EQ(boost::num_edges(c.graph()), 8304u);
  EXPECT_EQ(c.Describe(),
            "1024 GPUs, 128 intra-node switches, 128 hosts, 1024 NICs, 56 leaf switches, "
            "1 spine switches, 8304 directed links");
}

TEST(ClusterGraph, RouteInsideANodeUsesNvSwitch) {
  const HardwareSpec hw = MustLoad("dgx-a100-80gb");
  const Cluster c(hw);
  // GPU 0 -> NVSwitch -> GPU 1: two links of fabric.latency / 2 = 1.7 us each, 3.4 us in all,
  // at 300 GB/s x 0.8 = 240 GB/s.
  const Route& r = c.RouteBetween(0, 1);
  EXPECT_FALSE(r.crosses_network);
  EXPECT_EQ(r.links.size(), 2u);
  EXPECT_DOUBLE_EQ(r.latency_s, hw.node.fabric.latency_s);
  EXPECT_DOUBLE_EQ(r.latency_s, 3.4e-6);
  EXPECT_DOUBLE_EQ(r.bottleneck_bandwidth, 240e9);
  // Same node, other end: still NVSwitch.
  EXPECT_FALSE(c.RouteBetween(0, 7).crosses_network);
}

TEST(ClusterGraph, RouteBetweenNodesIsLimitedByTheNic) {
  const HardwareSpec hw = MustLoad("dgx-a100-80gb");
  const Cluster c(hw);
  // GPU 0 (node 0) -> GPU 8 (node 1, local index 0). Nodes 0 and 1 share group 0, and NIC 0
  // of each node sits on rail 0's leaf: GPU0 -> NIC0 -> leaf0-rail0 -> NIC0 -> GPU8, 4 links.
  // Bandwidths: GPU-NIC is the host link 32 GB/s; NIC-leaf 200 Gb/s x 0.96 = 24 GB/s, the
  // bottleneck. Latency: 0 (GPU-NIC) + 2.6/2 + 2.6/2 + 0 = network latency 2.6 us.
  const Route& r = c.RouteBetween(0, 8);
  EXPECT_TRUE(r.crosses_network);
  EXPECT_EQ(r.links.size(), 4u);
  EXPECT_DOUBLE_EQ(r.bottleneck_bandwidth, hw.network->nic_bandwidth * hw.network->nic_efficiency);
  EXPECT_DOUBLE_EQ(r.bottleneck_bandwidth, 24e9);
  EXPECT_DOUBLE_EQ(r.latency_s, 2.6e-6);
}

TEST(ClusterGraph, RouteAcrossLeafGroupsGoesThroughTheSpine) {
  const Cluster c(MustLoad("dgx-a100-80gb"));
  // Node 20 is the first node of group 1 (20 nodes per switch); its GPU 160 is local index 0.
  // GPU0 -> NIC0 -> leaf(g0, rail0) -> spine -> leaf(g1, rail0) -> NIC0 -> GPU160: 6 links.
  // The spine links carry 20 ports x 24 GB/s / oversubscription 1 = 480 GB/s, so the NIC's
  // 24 GB/s is still the bottleneck; switch_latency is absent (0), so 2.6 us as before.
  const Route& r = c.RouteBetween(0, 160);
  EXPECT_TRUE(r.crosses_network);
  EXPECT_EQ(r.links.size(), 6u);
  EXPECT_DOUBLE_EQ(r.bottleneck_bandwidth, 24e9);
  EXPECT_DOUBLE_EQ(r.latency_s, 2.6e-6);
}

TEST(ClusterGraph, RouteToHostUsesTheHostLink) {
  const Cluster c(MustLoad("dgx-a100-80gb"));
  // One link GPU -> host at link_bandwidth 32 GB/s, link_latency 1 us.
  const Route r = c.RouteToHost(9);
  EXPECT_EQ(r.links.size(), 1u);
  EXPECT_DOUBLE_EQ(r.bottleneck_bandwidth, 32e9);
  EXPECT_DOUBLE_EQ(r.latency_s, 1e-6);
}

TEST(ClusterGraph, SingleNodeClustersHaveNoNetwork) {
  // cpu-host: 1 node of 2 "GPUs" (cores) on shared memory -> one fabric switch vertex.
  const Cluster cpu(MustLoad("cpu-host"));
  std::map<VertexKind, int64_t> n = CountVertices(cpu);
  EXPECT_EQ(n[VertexKind::kGpu], 2);
  EXPECT_EQ(n[VertexKind::kFabricSwitch], 1);
  EXPECT_EQ(n[VertexKind::kHost], 1);
  EXPECT_EQ(n[VertexKind::kNic], 0);
  EXPECT_EQ(n[VertexKind::kLeafSwitch], 0);
  EXPECT_FALSE(cpu.RouteBetween(0, 1).crosses_network);
  // h200: a single GPU, so no intra-node switch either.
  const Cluster one(MustLoad("h200"));
  n = CountVertices(one);
  EXPECT_EQ(n[VertexKind::kGpu], 1);
  EXPECT_EQ(n[VertexKind::kFabricSwitch], 0);
  EXPECT_EQ(one.RouteBetween(0, 0).links.size(), 0u);
}

TEST(HardwareLoader, UnknownBundledNameSuggestsTheClosest) {
  StatusOr<HardwareSpec> hw = LoadHardware("dgx-h10");
  ASSERT_FALSE(hw.ok());
  EXPECT_TRUE(Contains(hw.status().message(), "did you mean 'dgx-h100'"));
}

}  // namespace
}  // namespace shardsim

namespace shardsim {
namespace {

// The device's memory in use for a peak: reserved + (peak - reserved) / (1 - fragmentation).
// H100 (dgx-h100: 81,559 MiB, 1 GiB reserved, fragmentation 0.10): a 64 GiB peak shows as
// 1 + 63 / 0.9 = 71 GiB; the usable capacity, 1 + (79.647 - 1) x 0.9 GiB, shows as the whole
// device (so "fits" and "in use <= capacity" are one test).
TEST(HardwareSpecTest, DeviceMemoryInUseAddsTheAllocatorShare) {
  StatusOr<HardwareSpec> hw = LoadHardware("dgx-h100");
  ASSERT_TRUE(hw.ok()) << hw.status().message();
  const double gib = 1024.0 * 1024 * 1024;
  EXPECT_NEAR(hw->gpu.DeviceMemoryInUse(64 * gib) / gib, 71.0, 1e-9);
  EXPECT_NEAR(hw->gpu.DeviceMemoryInUse(hw->gpu.UsableMemoryBytes()), 81559.0 * 1024 * 1024, 1e-3);
}

}  // namespace
}  // namespace shardsim
