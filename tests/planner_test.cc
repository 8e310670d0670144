// The planner against brute force over the simulator, the safety of its memory pruning, its
// determinism, and its errors.
#include <gtest/gtest.h>

#include <random>

#include "planner/planner.h"
#include "src/layout/validate.h"
#include "tests/test_models.h"

namespace shardsim::planner {
namespace {

// 2 nodes x 4 GPUs, A100-like links; every figure in test_models.h.
HardwareSpec SmallCluster() {
  return testing::TestCluster(2, 4, "300 GB/s", "3 us", "200 Gb/s", "5 us", 4, 2, "8 us");
}

PlanOptions Options(int64_t gpus, int64_t gbs) {
  PlanOptions o;
  o.gpus = gpus;
  o.global_batch = gbs;
  o.threads = 2;
  return o;
}

// Brute force: simulate every valid layout of the space; the best that fits must be the
// planner's winner (it ranks analytically, prunes, and simulates only its top 10).
TEST(PlannerTest, WinnerEqualsBruteForceOverTheSimulator) {
  const ModelSpec m = testing::GptModel(8, 1024, 16, 4096, 1024);
  const HardwareSpec hw = SmallCluster();
  const Cluster cluster(hw);
  const PlanOptions o = Options(8, 16);
  double best = std::numeric_limits<double>::infinity();
  std::string best_layout;
  int simulated = 0;
  for (const Layout& l : EnumerateLayouts(m, hw, o)) {
    if (!CheckLayout(l, m, hw, 8).ok()) continue;
    SimOptions so;
    so.critical_path = false;
    StatusOr<SimResult> r = Simulate(m, cluster, l, so);
    ASSERT_TRUE(r.ok()) << r.status().message();
    ++simulated;
    if (r->fits && r->iteration_time_s < best) {
      best = r->iteration_time_s;
      best_layout = FormatLayout(l);
    }
  }
  ASSERT_GT(simulated, 100);
  StatusOr<PlanResult> plan = Plan(m, cluster, o);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_FALSE(plan->ranked.empty());
  EXPECT_DOUBLE_EQ(plan->ranked.front().sim.iteration_time_s, best)
      << "planner: " << FormatLayout(plan->ranked.front().layout) << "\nbrute force: " << best_layout;
}

// Property: over random small models, GPU counts and batches, the memory figure pruning uses
// is never above the simulated peak, so no layout that fits is ever pruned.
TEST(PlannerTest, PruningNeverRemovesALayoutThatFits) {
  std::mt19937 rng(20261129);
  const HardwareSpec hw = SmallCluster();
  const Cluster cluster(hw);
  int checked = 0;
  for (int round = 0; round < 6; ++round) {
    const int64_t heads = std::vector<int64_t>{4, 8, 16}[rng() % 3];
    const int64_t layers = std::vector<int64_t>{4, 6, 8}[rng() % 3];
    const ModelSpec m = testing::GptModel(layers, heads * 64, heads, 1000 + rng() % 4000, 256 << (rng() % 3));
    const int64_t gpus = std::vector<int64_t>{2, 4, 8}[rng() % 3];
    const PlanOptions o = Options(gpus, 8);
    const std::vector<Layout> all = EnumerateLayouts(m, hw, o);
    for (size_t i = 0; i < all.size(); i += 7) {  // a deterministic sample of the space
      const Layout& l = all[i];
      if (!CheckLayout(l, m, hw, gpus).ok()) continue;
      SimOptions so;
      so.critical_path = false;
      StatusOr<SimResult> r = Simulate(m, cluster, l, so);
      ASSERT_TRUE(r.ok());
      EXPECT_LE(PeakMemoryBound(m, hw, l), r->peak_memory_bytes * (1 + 1e-12)) << FormatLayout(l);
      ++checked;
    }
  }
  EXPECT_GT(checked, 50);
}

// Same input, same output, whatever the thread count.
TEST(PlannerTest, DeterministicAcrossThreadCounts) {
  const ModelSpec m = testing::GptModel(8, 1024, 16, 4096, 1024);
  const HardwareSpec hw = SmallCluster();
  const Cluster cluster(hw);
  PlanOptions one = Options(8, 16), two = Options(8, 16);
  one.threads = 1;
  two.threads = 2;
  const PlanResult a = *Plan(m, cluster, one);
  const PlanResult b = *Plan(m, cluster, two);
  ASSERT_EQ(a.ranked.size(), b.ranked.size());
  for (size_t i = 0; i < a.ranked.size(); ++i) {
    EXPECT_EQ(FormatLayout(a.ranked[i].layout), FormatLayout(b.ranked[i].layout));
    EXPECT_EQ(a.ranked[i].sim.iteration_time_s, b.ranked[i].sim.iteration_time_s);
  }
  EXPECT_EQ(a.why, b.why);
}

// --fix narrows the space; contradictory constraints are a clear error.
TEST(PlannerTest, FixAndForbid) {
  const ModelSpec m = testing::GptModel(8, 1024, 16, 4096, 1024);
  const HardwareSpec hw = SmallCluster();
  const Cluster cluster(hw);
  PlanOptions o = Options(8, 16);
  o.fixed = *ParseFixed("tp=2,recompute=none");
  o.forbidden = *ParseForbidden("zero=3,zero=2");
  const PlanResult r = *Plan(m, cluster, o);
  ASSERT_FALSE(r.ranked.empty());
  for (const Candidate& c : r.ranked) {
    EXPECT_EQ(c.layout.tp, 2);
    EXPECT_EQ(c.layout.recompute, Recompute::kNone);
    EXPECT_LT(c.layout.zero, 2);
  }
  o.fixed = *ParseFixed("tp=3");  // 16 heads: tp=3 divides nothing
  StatusOr<PlanResult> bad = Plan(m, cluster, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("no layout matches"), std::string::npos);
  EXPECT_FALSE(ParseFixed("tpp=2").ok());
  EXPECT_FALSE(ParseForbidden("zero=7").ok());
  o = Options(0, 16);
  EXPECT_FALSE(Plan(m, cluster, o).ok());
}

// Nothing fits: the closest layouts and what would help are reported instead.
TEST(PlannerTest, NothingFitsGivesTheClosestAndAdvice) {
  const ModelSpec m = testing::GptModel(8, 8192, 64, 50000, 2048);  // ~6.9B parameters
  const HardwareSpec hw = SmallCluster();
  const Cluster cluster(hw);
  PlanOptions o = Options(2, 8);
  o.max_memory_fraction = 0.05;  // 4 GiB of the 80
  o.forbidden = *ParseForbidden("offload=optimizer,offload=optimizer+params");
  const PlanResult r = *Plan(m, cluster, o);
  EXPECT_TRUE(r.ranked.empty());
  ASSERT_FALSE(r.closest.empty());
  EXPECT_GT(r.closest.front().memory_bytes, r.memory_limit_bytes);
  for (size_t i = 1; i < r.closest.size(); ++i) {
    EXPECT_LE(r.closest[i - 1].memory_bytes, r.closest[i].memory_bytes);
  }
  ASSERT_FALSE(r.advice.empty());
  EXPECT_NE(r.advice.back().find("more GPUs"), std::string::npos);
}

}  // namespace
}  // namespace shardsim::planner
