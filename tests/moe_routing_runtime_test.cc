// The runtime's top-k routing (runtime/cpu/moe_routing.h) on cases worked out by hand: the
// softmax over the chosen logits, the aux loss, the "probs" drop policy and the dispatch order.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "runtime/cpu/moe_routing.h"

namespace shardsim::runtime {
namespace {

// One token, 3 experts, top 2, logits (0, ln 2, ln 4): it picks experts 2 then 1, weights
// 4/6 and 2/6. Softmax over all experts: (1, 2, 4) / 7. Aux loss with coeff 1, T = 1, k = 2:
//   1 x E / (k T^2) x sum_e n_e s_e = 3/2 x (0 x 1/7 + 1 x 2/7 + 1 x 4/7) = 9/7.
TEST(MoeRoutingRuntime, TopKSoftmaxAndAuxLoss) {
  const std::vector<double> logits = {0.0, std::log(2.0), std::log(4.0)};
  const MoeRouting r = Route<double>(logits.data(), 1, 3, 2, /*capacity=*/0, /*aux=*/1.0);
  EXPECT_EQ(r.expert, (std::vector<int32_t>{2, 1}));
  EXPECT_NEAR(r.weight[0], 4.0 / 6.0, 1e-15);
  EXPECT_NEAR(r.weight[1], 2.0 / 6.0, 1e-15);
  EXPECT_EQ(r.selected, (std::vector<int64_t>{0, 1, 1}));
  EXPECT_NEAR(r.aux_loss, 9.0 / 7.0, 1e-15);
  // Dispatch order: expert 1's slot (1) before expert 2's (0).
  EXPECT_EQ(r.order, (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(r.per_expert, (std::vector<int64_t>{0, 1, 1}));
}

// Two tokens, 2 experts, top 2: every token picks both. t0 logits (1, 0): weights e0
// e/(1+e) = 0.731, e1 0.269; t1 (0, 2): e1 0.881 (first), e0 0.119. Capacity factor 0.5:
// ceil(2 x 2 / 2 x 0.5) = 1 slot an expert, each keeping its largest weight: expert 0 t0's
// (slot 0, 0.731 > 0.119), expert 1 t1's (slot 2, 0.881 > 0.269); slots 1 and 3 dropped.
TEST(MoeRoutingRuntime, CapacityKeepsTheLargestWeights) {
  const std::vector<float> logits = {1.0f, 0.0f, 0.0f, 2.0f};
  const MoeRouting r = Route<float>(logits.data(), 2, 2, 2, /*capacity=*/0.5, /*aux=*/0);
  EXPECT_EQ(r.expert, (std::vector<int32_t>{0, 1, 1, 0}));
  EXPECT_EQ(r.kept, (std::vector<uint8_t>{1, 0, 1, 0}));
  EXPECT_EQ(r.order, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(r.per_expert, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(r.aux_loss, 0.0);
}

// The backward of the k-way softmax: with dweight = (1, 0) on the token of the first test, the
// chosen logits move by w_j (dw_j - sum_i w_i dw_i): expert 2 by 2/3 (1 - 2/3) = 2/9, expert 1
// by 1/3 (0 - 2/3) = -2/9, expert 0 (not chosen) by 0. Without aux loss (aux_scale 0).
TEST(MoeRoutingRuntime, BackwardThroughTheChosenSoftmax) {
  const std::vector<double> logits = {0.0, std::log(2.0), std::log(4.0)};
  const MoeRouting r = Route<double>(logits.data(), 1, 3, 2, 0, 0);
  const std::vector<double> dweight = {1.0, 0.0};
  std::vector<double> dlogits(3);
  RouteBackward<double>(r, dweight.data(), 0, dlogits.data());
  EXPECT_NEAR(dlogits[0], 0.0, 1e-15);
  EXPECT_NEAR(dlogits[1], -2.0 / 9.0, 1e-15);
  EXPECT_NEAR(dlogits[2], 2.0 / 9.0, 1e-15);
}

}  // namespace
}  // namespace shardsim::runtime
