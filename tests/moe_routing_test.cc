// MoE routing as layout keys (issue 16 item 1): moe_capacity (an expert's capacity factor,
// tokens beyond it dropped) and moe_imbalance (the busiest EP rank's routed tokens over the
// balanced share). The busiest rank sets the pace: its experts' GEMMs, the all-to-all bytes and
// its experts' activations scale by the load min(imbalance, capacity); model FLOPs do not.
// Figures for models/mixtral-8x7b.yaml (32768 tokens, top 2, h 4096, experts of 14336).
#include <gtest/gtest.h>

#include <string>

#include "planner/emit.h"
#include "src/cost/estimate.h"
#include "src/cost/memory.h"
#include "src/cost/ops.h"
#include "src/hardware/cluster.h"
#include "src/hardware/hardware_spec.h"
#include "src/io/megatron_args.h"
#include "src/io/nemo_overrides.h"
#include "src/layout/layout.h"
#include "src/model/model_spec.h"

namespace shardsim {
namespace {

const HardwareSpec& H100() {
  static const HardwareSpec h = *LoadHardware("dgx-h100");
  return h;
}

Layout Resolved(const std::string& spec, int64_t gpus) {
  StatusOr<Layout> parsed = ParseLayout(spec);
  EXPECT_TRUE(parsed.ok()) << parsed.status().message();
  StatusOr<Layout> l = ResolveLayoutFor(*parsed, gpus, H100());
  EXPECT_TRUE(l.ok()) << l.status().message();
  return l.ok() ? *l : Layout{};
}

ModelSpec Mixtral() { return *LoadModel("mixtral-8x7b"); }

TEST(MoeRouting, KeysParseFormatAndBound) {
  StatusOr<Layout> l = ParseLayout("moe_capacity=1.25,moe_imbalance=1.5");
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_EQ(l->MoeLoad(), 1.25);  // the capacity caps the busiest expert's tokens
  EXPECT_NE(FormatLayout(*l).find(",moe_capacity=1.25,moe_imbalance=1.5"), std::string::npos) << FormatLayout(*l);
  l = ParseLayout("moe_imbalance=1.5");
  EXPECT_EQ(l->MoeLoad(), 1.5);  // no capacity: nothing dropped
  l = ParseLayout("moe_capacity=0.5");
  EXPECT_EQ(l->MoeLoad(), 0.5);  // half the balanced share kept, the rest dropped
  // Defaults write nothing (the goldens' layouts are unchanged).
  EXPECT_EQ(FormatLayout(Layout{}).find("moe_"), std::string::npos);
  StatusOr<Layout> bad = ParseLayout("moe_imbalance=0.5");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("1 to 64"), std::string::npos) << bad.status().message();
  EXPECT_FALSE(ParseLayout("moe_capacity=-1").ok());
  EXPECT_FALSE(ParseLayout("moe_capacity=inf").ok());
}

// Expert gate_up at mbs 1: 2 x (32768 x 2) tokens x (2 x 14336) x 4096 = 15,393,162,788,864
// FLOPs balanced; the busiest rank at 1.5x routes 98,304 tokens: 23,089,744,183,296. Model
// FLOPs stay the balanced ones.
TEST(MoeRouting, TheBusiestRanksExpertsDoTheWork) {
  const ModelSpec m = Mixtral();
  auto gate_up = [&](const Layout& l) {
    for (const Op& op : LayerOps(m, l, true)) {
      if (op.name == "expert_gate_up") return op.flops;
    }
    return 0.0;
  };
  const Layout even = Resolved("mbs=1,gbs=1", 1), skewed = Resolved("mbs=1,gbs=1,moe_imbalance=1.5", 1);
  EXPECT_EQ(gate_up(even), 15393162788864.0);
  EXPECT_EQ(gate_up(skewed), 23089744183296.0);
  EXPECT_EQ(IterationFlops(m, skewed, false), IterationFlops(m, even, false));
}

// Activations of one MoE layer, tp 1, no recompute: the busiest rank keeps 0.5 x 65,536 more
// routed tokens' expert input (2 bytes x 4096) and SwiGLU intermediates (gate and up outputs 2 x
// 2 bytes, SwiGLU output 2 bytes, x 14336): 32768 x (8192 + 86016) = 3,087,007,744 bytes.
TEST(MoeRouting, TheBusiestRankKeepsMoreActivations) {
  const ModelSpec m = Mixtral();
  const double even = LayerActivationBytes(m, Resolved("mbs=1,gbs=1,recompute=none", 1), true);
  const double skewed = LayerActivationBytes(m, Resolved("mbs=1,gbs=1,recompute=none,moe_imbalance=1.5", 1), true);
  EXPECT_EQ(skewed - even, 3087007744.0);
}

// The dispatch all-to-all of ep 8 carries 32768 tokens x 2 x 4096 x 2 bytes = 536,870,912 bytes
// a rank balanced; at a load of 1.25 (imbalance 2 capped by capacity 1.25): 671,088,640.
TEST(MoeRouting, TheAllToAllCarriesTheBusiestRanksTokens) {
  const ModelSpec m = Mixtral();
  const Cluster cluster(H100(), 8);
  auto dispatch = [&](const std::string& spec) {
    const Estimate e = EstimateIteration(m, cluster, Resolved(spec, 8));
    for (const CollectiveTiming& c : e.collectives) {
      if (c.purpose == "ep all-to-all dispatch") return c.cost.bytes;
    }
    return 0.0;
  };
  EXPECT_EQ(dispatch("ep=8,mbs=1,gbs=8"), 536870912.0);
  EXPECT_EQ(dispatch("ep=8,mbs=1,gbs=8,moe_imbalance=2,moe_capacity=1.25"), 671088640.0);
}

TEST(MoeRouting, CapacityGoesThroughTheExports) {
  const ModelSpec m = Mixtral();
  const Layout l = Resolved("ep=8,mbs=1,gbs=8,moe_capacity=1.25,moe_imbalance=1.5", 8);
  const std::string megatron = planner::EmitMegatron(m, l);
  EXPECT_NE(megatron.find("--moe-expert-capacity-factor 1.25"), std::string::npos) << megatron;
  EXPECT_NE(megatron.find("routed 1.5x the balanced share"), std::string::npos) << megatron;
  StatusOr<MegatronRead> back = ParseMegatronArgs(megatron, "m.sh");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->layout.moe_capacity, 1.25);
  EXPECT_EQ(back->layout.moe_imbalance, 1.0);  // not a setting: the round trip says so
  StatusOr<MegatronRead> nemo = ParseNemoOverrides(planner::EmitNemo(m, l), "n.py");
  ASSERT_TRUE(nemo.ok()) << nemo.status().message();
  EXPECT_EQ(nemo->layout.moe_capacity, 1.25);
}

}  // namespace
}  // namespace shardsim
