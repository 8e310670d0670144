// A cluster built for the job's GPUs only (Cluster(hw, gpus)) routes and prices exactly as the
// whole description does: a job on the first GPUs never crosses another node or another
// group's leaves (src/hardware/cluster.h), and the spine stays whenever the description has
// more than one leaf.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "src/cost/collective.h"
#include "src/hardware/cluster.h"
#include "src/hardware/hardware_spec.h"

namespace shardsim {
namespace {

HardwareSpec MustLoad(const std::string& name) {
  StatusOr<HardwareSpec> hw = LoadHardware(name);
  CHECK(hw.ok()) << hw.status().message();
  return *hw;
}

// A 200-GPU job on 8-GPU nodes needs 25 nodes: on dgx-a100-80gb (128 nodes, leaf groups of 20)
// groups 0 and 1 with their rail leaves and the spine; on dgx-h100 (32 nodes, one group of 8
// rail leaves) that group and the spine.
TEST(ClusterPartial, RoutesAndPricesEqualTheWholeCluster) {
  for (const std::string name : {"dgx-a100-80gb", "dgx-h100"}) {
    SCOPED_TRACE(name);
    const HardwareSpec hw = MustLoad(name);
    const Cluster whole(hw);
    const int64_t gpus = 25 * hw.node.gpus;
    const Cluster part(hw, gpus);
    EXPECT_EQ(part.gpu_count(), gpus);
    EXPECT_EQ(part.node_count(), 25);
    EXPECT_EQ(whole.node_count(), hw.nodes);
    EXPECT_EQ(part.TranslationPeriod(), whole.TranslationPeriod());
    for (int64_t a = 0; a < gpus; a += 7) {
      for (int64_t b = 0; b < gpus; b += 11) {
        if (a == b) continue;
        const Route& r = whole.RouteBetween(a, b);
        const Route& q = part.RouteBetween(a, b);
        EXPECT_EQ(q.links.size(), r.links.size()) << a << " -> " << b;
        EXPECT_EQ(q.latency_s, r.latency_s) << a << " -> " << b;
        EXPECT_EQ(q.bottleneck_bandwidth, r.bottleneck_bandwidth) << a << " -> " << b;
        EXPECT_EQ(q.crosses_network, r.crosses_network) << a << " -> " << b;
      }
    }
    const CollectiveModel cw(whole), cp(part);
    // A strided group across all 25 nodes (one GPU per node, as a DP group of tp 8) and a
    // whole node, both sizes.
    std::vector<int64_t> strided, node;
    for (int64_t n = 0; n < 25; ++n) strided.push_back(n * hw.node.gpus + 1);
    for (int64_t g = 0; g < hw.node.gpus; ++g) node.push_back(g);
    for (const auto* group : {&strided, &node}) {
      for (Collective c : {Collective::kAllReduce, Collective::kAllGather, Collective::kAllToAll}) {
        for (double bytes : {4096.0, 256e6}) {
          EXPECT_EQ(cp.Estimate(c, *group, bytes).time_s, cw.Estimate(c, *group, bytes).time_s);
        }
      }
    }
  }
}

// One node's worth or less still builds one node; more GPUs than the description builds it all.
TEST(ClusterPartial, BuildsAtLeastOneNodeAndAtMostAll) {
  const HardwareSpec hw = MustLoad("dgx-h100");
  EXPECT_EQ(Cluster(hw, 1).node_count(), 1);
  EXPECT_EQ(Cluster(hw, hw.node.gpus + 1).node_count(), 2);
  EXPECT_EQ(Cluster(hw, hw.total_gpus() * 4).node_count(), hw.nodes);
}

}  // namespace
}  // namespace shardsim
