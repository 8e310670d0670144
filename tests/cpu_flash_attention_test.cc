// The CPU's memory-efficient attention (runtime/cpu/flash_attention.h, attention=flash) against
// the unfused operator (attention.h) it replaces: the same output and gradients from O(T)
// saved state. Both compute in double here, so the only differences are summation order and
// the two routes to the softmax (normalising by the row sum vs subtracting the log-sum-exp):
// a few ulps of 2^-52, far inside 1e-12; a wrong mask, scale, GQA head or D term is O(1).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "runtime/cpu/attention.h"
#include "runtime/cpu/flash_attention.h"

namespace shardsim::runtime {
namespace {

std::vector<double> Random(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> dist(0.0, 1.0);
  std::vector<double> v(n);
  for (double& x : v) x = dist(gen);
  return v;
}

double MaxDiff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

// Two sequences of 5 tokens, 4 query heads sharing 2 KV heads (GQA), head_dim 3.
constexpr AttentionShape kShape{.batch = 2, .seq = 5, .heads = 4, .kv_heads = 2, .head_dim = 3};
constexpr int64_t kQ = 2 * 5 * 4 * 3, kKv = 2 * 5 * 2 * 3;

TEST(FlashAttention, MatchesTheUnfusedOperator) {
  const std::vector<double> q = Random(kQ, 1), k = Random(kKv, 2), v = Random(kKv, 3);
  const std::vector<double> dout = Random(kQ, 4);
  std::vector<double> probs(2 * 4 * 5 * 5), out_ref(kQ), lse(2 * 4 * 5), out(kQ);
  AttentionForward<double>(q.data(), k.data(), v.data(), probs.data(), out_ref.data(), kShape);
  FlashAttentionForward<double>(q.data(), k.data(), v.data(), lse.data(), out.data(), kShape);
  EXPECT_LT(MaxDiff(out, out_ref), 1e-12);
  // Backward adds: start both from the same non-zero gradients.
  std::vector<double> dq_ref = Random(kQ, 5), dk_ref = Random(kKv, 6), dv_ref = Random(kKv, 7);
  std::vector<double> dq = dq_ref, dk = dk_ref, dv = dv_ref;
  AttentionBackward<double>(dout.data(), q.data(), k.data(), v.data(), probs.data(), dq_ref.data(),
                            dk_ref.data(), dv_ref.data(), kShape);
  FlashAttentionBackward<double>(dout.data(), q.data(), k.data(), v.data(), out.data(), lse.data(),
                                 dq.data(), dk.data(), dv.data(), kShape);
  EXPECT_LT(MaxDiff(dq, dq_ref), 1e-12);
  EXPECT_LT(MaxDiff(dk, dk_ref), 1e-12);
  EXPECT_LT(MaxDiff(dv, dv_ref), 1e-12);
}

// lse is log sum_j<=i exp(q_i . k_j / sqrt(d)). Row 0 of a sequence sees only key 0, so its
// lse is exactly that one scaled score; with q = k = all ones and d = 3, every score is
// 3 / sqrt(3) = sqrt(3), and row i's lse is sqrt(3) + log(i + 1).
TEST(FlashAttention, LogSumExpOfEqualScores) {
  const std::vector<double> ones_q(kQ, 1.0), ones_kv(kKv, 1.0), v = Random(kKv, 8);
  std::vector<double> lse(2 * 4 * 5), out(kQ);
  FlashAttentionForward<double>(ones_q.data(), ones_kv.data(), v.data(), lse.data(), out.data(),
                                kShape);
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t h = 0; h < 4; ++h) {
      for (int64_t i = 0; i < 5; ++i) {
        EXPECT_NEAR(lse[(b * 4 + h) * 5 + i], std::sqrt(3.0) + std::log(i + 1.0), 1e-12);
      }
    }
  }
}

}  // namespace
}  // namespace shardsim::runtime
