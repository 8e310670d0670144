// The CPU backend's speed paths (issue 17 item 4) keep its numbers: ParallelFor covers every
// index once whatever the thread count; the kernels it parallelises give the same bits on any
// thread count; the vectorised bf16 conversions give bf16.h's scalar bits; oneDNN's bf16 product
// (where the build has it) computes the exact product of bf16 operands summed in fp32; freed
// host blocks are reused without new page faults.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <vector>

#include "runtime/cpu/bf16_convert.h"
#include "runtime/cpu/cpu_kernels.h"
#include "runtime/cpu/cpu_threads.h"
#include "runtime/cpu/dnnl_gemm.h"
#include "runtime/cpu/host_memory.h"
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
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(hits[static_cast<size_t>(i)], 1) << n << " " << i << " " << threads;
    }
  }
}

// Uniform values in [-1, 1) from splitmix64.
std::vector<float> Random(int64_t n, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t r = SplitMix64((seed << 32) + static_cast<uint64_t>(i));
    v[static_cast<size_t>(i)] = static_cast<float>(static_cast<double>(r >> 11) * 0x1p-52 - 1.0);
  }
  return v;
}

// Runs fn with 1 thread and with `threads`, each on fresh copies of the same inputs, and returns
// both results (fn fills its output vector).
std::pair<std::vector<float>, std::vector<float>> OnOneAndOn(
    int threads, const std::function<std::vector<float>()>& fn) {
  SetCpuThreads(1);
  std::vector<float> one = fn();
  SetCpuThreads(threads);
  std::vector<float> many = fn();
  SetCpuThreads(1);
  return {one, many};
}

void ExpectSameBits(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << what;
}

// Attention (forward and backward, GQA), the cross-entropy pair, RMSNorm forward and backward and
// the gradient norm's sum of squares, each on 1 thread and on 2 and 3 (parts of unequal size).
TEST(CpuParallel, KernelsGiveTheSameBitsOnAnyThreadCount) {
  CpuKernels k;
  const AttentionDims dims{.batch = 2, .seq = 24, .heads = 4, .kv_heads = 2, .head_dim = 8};
  const int64_t nq = 2 * 24 * 4 * 8, nkv = 2 * 24 * 2 * 8, np = 2 * 4 * 24 * 24;
  const std::vector<float> q = Random(nq, 1), kk = Random(nkv, 2), v = Random(nkv, 3),
                           dout = Random(nq, 4);
  const int64_t rows = 37, vocab = 50, c = 96;
  const std::vector<float> logits = Random(rows * vocab, 5), x = Random(rows * c, 6),
                           gain = Random(c, 7);
  std::vector<int32_t> targets(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i)
    targets[static_cast<size_t>(i)] = static_cast<int32_t>((7 * i) % vocab);
  for (int threads : {2, 3}) {
    auto [a1, a2] = OnOneAndOn(threads, [&] {
      std::vector<float> out(nq + np + 2 * nkv + nq, 0.5f);  // out, probs, then dq dk dv added to
      float* o = out.data();
      float* probs = o + nq;
      float* dq = probs + np;
      float* dk = dq + nq;
      float* dv = dk + nkv;
      k.AttentionForward(q.data(), kk.data(), v.data(), probs, o, dims);
      k.AttentionBackward(dout.data(), q.data(), kk.data(), v.data(), probs, dq, dk, dv, dims);
      return out;
    });
    ExpectSameBits(a1, a2, "attention");
    auto [c1, c2] = OnOneAndOn(threads, [&] {
      std::vector<float> out(2 * rows * vocab + 1);
      const double loss =
          k.SoftmaxCrossEntropy(logits.data(), targets.data(), out.data(), rows, vocab);
      k.CrossEntropyBackward(out.data(), targets.data(), 1.0f, rows, out.data() + rows * vocab,
                             rows, vocab, 0);
      out.back() = static_cast<float>(loss);
      return out;
    });
    ExpectSameBits(c1, c2, "cross-entropy");
    auto [n1, n2] = OnOneAndOn(threads, [&] {
      std::vector<float> out(2 * rows * c + rows + c, 0.25f);  // y, rstd, dx, dgain (added to)
      float* y = out.data();
      float* rstd = y + rows * c;
      float* dx = rstd + rows;
      float* dgain = dx + rows * c;
      k.NormForward(Norm::kRmsNorm, x.data(), gain.data(), nullptr, y, nullptr, rstd, rows, c);
      k.NormBackward(Norm::kRmsNorm, y, x.data(), gain.data(), nullptr, rstd, dx, dgain, nullptr,
                     rows, c);
      return out;
    });
    ExpectSameBits(n1, n2, "rms norm");
    const std::vector<float> big = Random(100003, 8);
    auto [s1, s2] = OnOneAndOn(threads, [&] {
      return std::vector<float>{static_cast<float>(k.SumSquares(big.data(), 100003))};
    });
    ExpectSameBits(s1, s2, "sum of squares");
  }
  // Every element counted once: 100,003 ones sum to 100,003, exact in double.
  const std::vector<float> ones(100003, 1.0f);
  SetCpuThreads(3);
  EXPECT_EQ(k.SumSquares(ones.data(), 100003), 100003.0);
  SetCpuThreads(1);
}

// After KeepFreedHostMemory, an 8 MiB block freed and taken again is the same memory: touching
// it again faults in no new pages. Without it glibc unmaps the block on free (mmap threshold
// 128 KiB) and the second touch faults in all 2,048 of its 4 KiB pages; allow 64 for the odd
// fault elsewhere in the process.
TEST(CpuParallel, FreedHostBlocksAreReusedWithoutPageFaults) {
  ASSERT_TRUE(KeepFreedHostMemory());
  HostMemory memory;
  constexpr int64_t kBytes = 8 << 20;
  const auto touch = [&] {
    StatusOr<DeviceBuffer> b = memory.Allocate(MemoryKind::kActivations, kBytes, "test");
    ASSERT_TRUE(b.ok()) << b.status().message();
    memory.Zero(b->data(), kBytes);
  };
  touch();
  rusage before{}, after{};
  getrusage(RUSAGE_SELF, &before);
  touch();
  getrusage(RUSAGE_SELF, &after);
  EXPECT_LT(after.ru_minflt - before.ru_minflt, 64);
}

TEST(CpuParallel, Bf16ConversionsAreTheScalarOnes) {
  // Round to nearest even at bf16's 7 stored bits (ulp 2^-7 at 1): 1 + 2^-8 is a tie and goes
  // down to 1 (0x3F80); 1 + 3 x 2^-8 is a tie between 1 + 2^-7 and 1 + 2^-6 and goes to the even
  // 1 + 2^-6 (0x3F82); infinities stay, a NaN stays a quiet NaN.
  const float in[] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity(),
                      std::numeric_limits<float>::quiet_NaN()};
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
