// Max-min fair sharing of links among coflows.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <utility>
#include <vector>

#include "src/sim/flow_network.h"

namespace shardsim {
namespace {

constexpr double kGB = 1e9;

// One flow of 1 GB alone on a 10 GB/s link takes 0.1 s.
TEST(FlowNetworkTest, OneFlowAlone) {
  FlowNetwork net({10 * kGB});
  const int32_t a = net.Add({{0, 1.0}}, 1 * kGB, 0);
  EXPECT_DOUBLE_EQ(net.Rate(a), 10 * kGB);
  EXPECT_EQ(net.FinishTime(a), ToSimTime(0.1));
}

// Two equal flows started together on one link each get half: each takes twice as long
// as alone (0.2 s).
TEST(FlowNetworkTest, TwoEqualFlowsShareALink) {
  FlowNetwork net({10 * kGB});
  const int32_t a = net.Add({{0, 1.0}}, 1 * kGB, 0);
  const int32_t b = net.Add({{0, 1.0}}, 1 * kGB, 0);
  EXPECT_DOUBLE_EQ(net.Rate(a), 5 * kGB);
  EXPECT_DOUBLE_EQ(net.Rate(b), 5 * kGB);
  EXPECT_EQ(net.FinishTime(a), ToSimTime(0.2));
  EXPECT_EQ(net.FinishTime(b), ToSimTime(0.2));
}

// A flow crossing a 10 GB/s and a 4 GB/s link is limited by the slower: 1 GB in 0.25 s.
TEST(FlowNetworkTest, PathLimitedByTheSlowerLink) {
  FlowNetwork net({10 * kGB, 4 * kGB});
  const int32_t a = net.Add({{0, 1.0}, {1, 1.0}}, 1 * kGB, 0);
  EXPECT_DOUBLE_EQ(net.Rate(a), 4 * kGB);
  EXPECT_EQ(net.FinishTime(a), ToSimTime(0.25));
}

// Max-min fairness: A crosses links 0 (10 GB/s) and 1 (4 GB/s); B only link 0. Both rates
// rise together until link 1 saturates at A = 4 GB/s (link 0 then carries 8 of 10); A
// freezes; B takes link 0's remaining 2: B = 6 GB/s.
TEST(FlowNetworkTest, MaxMinGivesLeftoverToTheUnconstrained) {
  FlowNetwork net({10 * kGB, 4 * kGB});
  const int32_t a = net.Add({{0, 1.0}, {1, 1.0}}, 1 * kGB, 0);
  const int32_t b = net.Add({{0, 1.0}}, 1 * kGB, 0);
  EXPECT_NEAR(net.Rate(a), 4 * kGB, 1);
  EXPECT_NEAR(net.Rate(b), 6 * kGB, 1);
}

// When one of two sharing flows ends, the other speeds up: both 1 GB on 10 GB/s, B starts at
// 0.05 s when A has 0.5 GB left. Then each gets 5 GB/s: A ends at 0.05 + 0.5/5 = 0.15 s,
// while B moved 0.5 GB; B's last 0.5 GB goes alone at 10 GB/s: B ends at 0.2 s.
TEST(FlowNetworkTest, RatesRecomputedWhenAFlowEnds) {
  FlowNetwork net({10 * kGB});
  const int32_t a = net.Add({{0, 1.0}}, 1 * kGB, 0);
  const int32_t b = net.Add({{0, 1.0}}, 1 * kGB, ToSimTime(0.05));
  EXPECT_NEAR(ToSeconds(net.FinishTime(a)), 0.15, 1e-12);
  net.TakeChanged();
  net.Remove(a, net.FinishTime(a));
  const std::vector<int32_t> changed = net.TakeChanged();
  ASSERT_EQ(changed, std::vector<int32_t>{b});
  EXPECT_NEAR(ToSeconds(net.FinishTime(b)), 0.2, 1e-12);
}

// A coflow with weight 7 on a link (a ring putting 7 of its flows there) progresses at
// capacity / 7 alone.
TEST(FlowNetworkTest, WeightsCountFlowsOfOneCoflow) {
  FlowNetwork net({14 * kGB, 100 * kGB});
  const int32_t a = net.Add({{0, 7.0}, {1, 1.0}}, 1 * kGB, 0);
  EXPECT_DOUBLE_EQ(net.Rate(a), 2 * kGB);
}

// Disjoint coflows do not affect each other (and are not recomputed together).
TEST(FlowNetworkTest, DisjointFlowsAreIndependent) {
  FlowNetwork net({10 * kGB, 10 * kGB});
  const int32_t a = net.Add({{0, 1.0}}, 1 * kGB, 0);
  net.TakeChanged();
  const int32_t b = net.Add({{1, 1.0}}, 1 * kGB, 0);
  EXPECT_EQ(net.TakeChanged(), std::vector<int32_t>{b});
  EXPECT_DOUBLE_EQ(net.Rate(a), 10 * kGB);
}

// The local checks (a start that fits in what its links leave, an end whose capacity nobody
// can take) give the rates the whole-component progressive filling gives: random coflows of
// 1-6 links over 40 or 160 links of 3 capacities, started and ended in random order, compared with a
// twin network that always recomputes, after every step.
TEST(FlowNetworkTest, LocalUpdatesEqualFullRecomputation) {
  std::mt19937 rng(7);
  int local_steps = 0;
  int64_t local = 0;
  for (int round = 0; round < 20; ++round) {
    std::vector<double> caps;
    const int links = round % 2 ? 40 : 160;  // dense and sparser sharing
    for (int i = 0; i < links; ++i) caps.push_back(std::vector<double>{10e9, 25e9, 50e9}[rng() % 3]);
    FlowNetwork fast(caps), full(caps);
    full.set_local_updates(false);
    std::vector<std::pair<int32_t, int32_t>> live;  // (fast id, full id)
    SimTime now = 0;
    for (int step = 0; step < 300; ++step) {
      now += static_cast<SimTime>(rng() % 1000);
      if (live.empty() || rng() % 3 != 0) {
        std::vector<FlowNetwork::Usage> usage;
        const int n = 1 + static_cast<int>(rng() % 6);
        for (int k = 0; k < n; ++k) {
          usage.push_back({static_cast<int32_t>(rng() % caps.size()), 0.5 + static_cast<double>(rng() % 4) / 2});
        }
        live.emplace_back(fast.Add(usage, 1e6, now), full.Add(usage, 1e6, now));
      } else {
        const size_t i = rng() % live.size();
        fast.Remove(live[i].first, now);
        full.Remove(live[i].second, now);
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
      }
      fast.TakeChanged();
      full.TakeChanged();
      for (const auto& [a, b] : live) {
        ASSERT_NEAR(fast.Rate(a), full.Rate(b), 1e-7 * full.Rate(b)) << "round " << round << " step " << step;
      }
      ++local_steps;
    }
    local += fast.local_update_count();
    EXPECT_EQ(full.local_update_count(), 0);
  }
  EXPECT_EQ(local_steps, 20 * 300);
  std::printf("settled locally: %lld of %d steps\n", static_cast<long long>(local), local_steps);
  EXPECT_GT(local, local_steps / 10);  // the checks do settle a good share of the steps
}

}  // namespace
}  // namespace shardsim
