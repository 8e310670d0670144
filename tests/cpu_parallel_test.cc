// The CPU backend's speed paths (issue 17 item 4) keep its numbers: ParallelFor covers every
// index once whatever the thread count; the vectorised bf16 conversions give bf16.h's scalar
// bits; oneDNN's bf16 product (where the build has it) computes the exact product of bf16
// operands summed in fp32.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "runtime/cpu/bf16_convert.h"
#include "runtime/cpu/cpu_threads.h"
#include "runtime/cpu/dnnl_gemm.h"
#include "runtime/cpu/parallel.h"
#include "runtime/cpu/splitmix64.h"

namespace shardsim::runtime {
namespace {

// Restores one thread after a test that sets more.
struct Threads {
  explicit Threads(int n) { SetParallelThreads(n); }
  ~Threads() { SetParallelThreads(1); }
};

TEST(CpuParallel, EveryIndexOnceOnAnyThreadCount) {
  for (int threads : {1, 2, 3, 8}) {
    Threads t(threads);
    for (int64_t n : {0, 1, 5, 1000, 100001}) {
      std::vector<int> hits(static_cast<size_t>(n), 0);
      ParallelFor(n, 7, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) ++hits[static_cast<size_t>(i)];
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)], 1) << n << " " << i << " " << threads;
    }
  }
}

TEST(CpuParallel, Bf16ConversionsAreTheScalarOnes) {
  // Round to nearest even at bf16's 7 stored bits (ulp 2^-7 at 1): 1 + 2^-8 is a tie and goes
  // down to 1 (0x3F80); 1 + 3 x 2^-8 is a tie between 1 + 2^-7 and 1 + 2^-6 and goes to the even
  // 1 + 2^-6 (0x3F82); infinities stay, a NaN stays a quiet NaN.
  const float in[] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()};
  Bf16 out[5];
  FloatsToBf16(in, out, 5);
  EXPECT_EQ(out[0].bits, 0x3F80);
  EXPECT_EQ(out[1].bits, 0x3F82);
  EXPECT_EQ(out[2].bits, 0x7F80);
  EXPECT_EQ(out[3].bits, 0xFF80);
  EXPECT_TRUE(std::isnan(ToFloat(out[4])));
  // A large array (several parts on 2 threads), against bf16.h's scalar ToBf16 / ToFloat.
  const int64_t n = 300001;
  std::vector<float> x(static_cast<size_t>(n)), back(static_cast<size_t>(n));
  SplitMix64Stream rng(11);
  for (float& v : x) v = static_cast<float>(BoxMuller(rng.Next(), rng.Next()) * 1e3);
  for (int threads : {1, 2}) {
    Threads t(threads);
    std::vector<Bf16> b(static_cast<size_t>(n));
    FloatsToBf16(x.data(), b.data(), n);
    Bf16ToFloats(b.data(), back.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(b[static_cast<size_t>(i)].bits, ToBf16(x[static_cast<size_t>(i)]).bits) << i;
      ASSERT_EQ(back[static_cast<size_t>(i)], ToFloat(b[static_cast<size_t>(i)])) << i;
    }
  }
}

TEST(CpuParallel, Bf16GemmIsTheExactProductWhereSumsAreExact) {
  if (!HaveBf16Gemm()) GTEST_SKIP() << "this build has no oneDNN (SHARDSIM_DNNL)";
  // Small integers are exact in bf16 and their products and sums exact in fp32, so any summation
  // order gives the exact result. a (3 x 4), b (4 x 2); c = a b by hand:
  //   a = [1 2 3 4; 0 -1 2 1; 5 0 0 -2], b = [1 0; 2 1; 0 3; -1 1]
  //   row 0: [1 + 4 + 0 - 4, 0 + 2 + 9 + 4] = [1, 15]
  //   row 1: [0 - 2 + 0 - 1, 0 - 1 + 6 + 1] = [-3, 6]
  //   row 2: [5 + 0 + 0 + 2, 0 + 0 + 0 - 2] = [7, -2]
  const float af[] = {1, 2, 3, 4, 0, -1, 2, 1, 5, 0, 0, -2};
  const float bf[] = {1, 0, 2, 1, 0, 3, -1, 1};
  Bf16 a[12], b[8], at[12], bt[8];
  FloatsToBf16(af, a, 12);
  FloatsToBf16(bf, b, 8);
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 4; ++j) at[j * 3 + i] = a[i * 4 + j];  // a^T stored (4 x 3)
  }
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 2; ++j) bt[j * 4 + i] = b[i * 2 + j];  // b^T stored (2 x 4)
  }
  const float want[] = {1, 15, -3, 6, 7, -2};
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      float c[6];
      Bf16Gemm(ta, tb, 3, 2, 4, ta ? at : a, tb ? bt : b, c, false);
      for (int i = 0; i < 6; ++i) EXPECT_EQ(c[i], want[i]) << ta << tb << i;
      Bf16Gemm(ta, tb, 3, 2, 4, ta ? at : a, tb ? bt : b, c, true);  // accumulated: twice
      for (int i = 0; i < 6; ++i) EXPECT_EQ(c[i], 2 * want[i]) << ta << tb << i;
    }
  }
  // Empty sizes: nothing written (m = 0), zeros (k = 0).
  float c[6] = {9, 9, 9, 9, 9, 9};
  Bf16Gemm(false, false, 0, 2, 4, a, b, c, false);
  EXPECT_EQ(c[0], 9);
  Bf16Gemm(false, false, 3, 2, 0, a, b, c, false);
  for (float v : c) EXPECT_EQ(v, 0);
}

}  // namespace
}  // namespace shardsim::runtime
