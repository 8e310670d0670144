// Tests of the runtime's Backend interface on the CPU (runtime/backend, runtime/cpu): Memory's
// accounting, every CpuKernels op against the templated operator of runtime/cpu it wraps,
// the AdamW kernel against AdamW<float> bit for bit, and LocalCollectives.
// Kernels that call the operator directly must match it exactly (EXPECT_EQ on floats): same
// code, same inputs. Kernels that restate an operator's float operations are held to the same.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/backend/emulated_collectives.h"
#include "runtime/backend/local_collectives.h"
#include "runtime/cpu/adamw.h"
#include "runtime/cpu/attention.h"
#include "runtime/calibrate/calibrate.h"
#include "runtime/cpu/cpu_backend.h"
#include "runtime/cpu/cpu_kernels.h"
#include "runtime/cpu/cross_entropy.h"
#include "runtime/cpu/embedding.h"
#include "runtime/cpu/gelu.h"
#include "runtime/cpu/host_memory.h"
#include "runtime/cpu/linear.h"
#include "runtime/cpu/norm.h"
#include "runtime/cpu/param_layout.h"
#include "runtime/cpu/rope.h"
#include "runtime/cpu/swiglu.h"
#include "tests/test_models.h"

namespace shardsim::runtime {
namespace {

std::vector<float> Random(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

std::vector<int32_t> RandomTokens(int64_t n, int32_t vocab, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int32_t> dist(0, vocab - 1);
  std::vector<int32_t> v(n);
  for (int32_t& x : v) x = dist(gen);
  return v;
}

DeviceBuffer Must(StatusOr<DeviceBuffer> b) {
  CHECK(b.ok()) << b.status().message();
  return std::move(b).value();
}

// Elements where a and b differ as floats (0 when bitwise equal up to -0 == 0).
int64_t Mismatches(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  int64_t bad = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) bad += a[i] != b[i];
  return bad;
}

// ------------------------------------------------------------------------------------------
// Memory

TEST(RuntimeBackendMemory, CountsCurrentAndPeakByKind) {
  HostMemory mem;
  StatusOr<DeviceBuffer> w = mem.Allocate(MemoryKind::kWeights, 1000, "weights");
  StatusOr<DeviceBuffer> a = mem.Allocate(MemoryKind::kActivations, 4096, "activations");
  ASSERT_TRUE(w.ok() && a.ok());
  // Held: weights 1000 + activations 4096 = 5096, also the peak so far.
  EXPECT_EQ(mem.current()[MemoryKind::kWeights], 1000);
  EXPECT_EQ(mem.current()[MemoryKind::kActivations], 4096);
  EXPECT_EQ(mem.current().total(), 5096);
  EXPECT_EQ(mem.peak_bytes(), 5096);
  // HostMemory aligns every block to 64 bytes.
  EXPECT_EQ(reinterpret_cast<uintptr_t>(w->data()) % 64, 0u);
  EXPECT_EQ(w->floats(), 250);  // 1000 bytes / 4

  StatusOr<DeviceBuffer> g = mem.AllocateFloats(MemoryKind::kGradients, 125, "grads");
  ASSERT_TRUE(g.ok());
  // 125 floats = 500 bytes: total 5596, a new peak whose breakdown is 1000 / 500 / 4096.
  EXPECT_EQ(mem.peak_bytes(), 5596);
  EXPECT_EQ(mem.at_peak()[MemoryKind::kGradients], 500);
  EXPECT_EQ(mem.at_peak()[MemoryKind::kActivations], 4096);

  DeviceBuffer acts = std::move(a).value();
  acts.Reset();
  EXPECT_TRUE(acts.empty());
  // Freeing activations: 1500 held, the peak (5596 with 4096 of activations) stays.
  EXPECT_EQ(mem.current().total(), 1500);
  EXPECT_EQ(mem.current()[MemoryKind::kActivations], 0);
  EXPECT_EQ(mem.peak_bytes(), 5596);
  EXPECT_EQ(mem.at_peak()[MemoryKind::kActivations], 4096);

  StatusOr<DeviceBuffer> o = mem.Allocate(MemoryKind::kOptimizer, 2000, "adam");
  ASSERT_TRUE(o.ok());
  // 3500 held is below the 5596 peak: the peak's breakdown has no optimizer bytes.
  EXPECT_EQ(mem.current().total(), 3500);
  EXPECT_EQ(mem.at_peak()[MemoryKind::kOptimizer], 0);

  mem.ResetPeak();
  // After ResetPeak the peak is what is held now: 1000 + 500 + 2000.
  EXPECT_EQ(mem.peak_bytes(), 3500);
  EXPECT_EQ(mem.at_peak()[MemoryKind::kOptimizer], 2000);
  EXPECT_EQ(mem.at_peak()[MemoryKind::kActivations], 0);
}

TEST(RuntimeBackendMemory, MovesKeepTheAccounting) {
  HostMemory mem;
  DeviceBuffer w = Must(mem.Allocate(MemoryKind::kWeights, 256, "w"));
  void* p = w.data();
  DeviceBuffer moved(std::move(w));
  // A move transfers the block: the source is empty, the 256 bytes are counted once.
  EXPECT_TRUE(w.empty());  // NOLINT(bugprone-use-after-move): moved-from state is the contract
  EXPECT_EQ(moved.data(), p);
  EXPECT_EQ(moved.bytes(), 256);
  EXPECT_EQ(moved.kind(), MemoryKind::kWeights);
  EXPECT_EQ(mem.current().total(), 256);

  DeviceBuffer other = Must(mem.Allocate(MemoryKind::kOther, 64, "other"));
  EXPECT_EQ(mem.current().total(), 320);  // 256 + 64
  other = std::move(moved);
  // Move-assignment frees other's 64 "other" bytes and takes the 256 weight bytes.
  EXPECT_EQ(mem.current()[MemoryKind::kOther], 0);
  EXPECT_EQ(mem.current()[MemoryKind::kWeights], 256);
  EXPECT_EQ(other.kind(), MemoryKind::kWeights);
  { DeviceBuffer scoped = std::move(other); }
  // The destructor of the last owner returns the block: nothing held, the peak was 320.
  EXPECT_EQ(mem.current().total(), 0);
  EXPECT_EQ(mem.peak_bytes(), 320);
}

TEST(RuntimeBackendMemory, ImpossibleAllocationIsAnError) {
  HostMemory mem;
  DeviceBuffer w = Must(mem.Allocate(MemoryKind::kWeights, 128, "w"));
  const int64_t huge = int64_t{1} << 62;  // 4 EiB: more than any address space
  StatusOr<DeviceBuffer> b = mem.Allocate(MemoryKind::kActivations, huge, "block 3 activations");
  ASSERT_FALSE(b.ok());
  // The message names what was asked for, its size (2^62 = 4611686018427387904) and the 128
  // bytes held.
  const std::string& msg = b.status().message();
  EXPECT_NE(msg.find("block 3 activations"), std::string::npos) << msg;
  EXPECT_NE(msg.find("4611686018427387904 bytes requested"), std::string::npos) << msg;
  EXPECT_NE(msg.find("128 bytes held"), std::string::npos) << msg;
  EXPECT_EQ(mem.current().total(), 128);  // the failure counts nothing
  EXPECT_EQ(mem.peak_bytes(), 128);
}

TEST(RuntimeBackendMemory, ZeroByteAllocationIsEmptyAndCopiesRoundTrip) {
  HostMemory mem;
  DeviceBuffer none = Must(mem.Allocate(MemoryKind::kOther, 0, "nothing"));
  EXPECT_TRUE(none.empty());  // zero bytes: no block, nothing counted
  EXPECT_EQ(mem.current().total(), 0);

  DeviceBuffer b = Must(mem.AllocateFloats(MemoryKind::kOther, 4, "b"));
  DeviceBuffer c = Must(mem.AllocateFloats(MemoryKind::kOther, 4, "c"));
  const float host[4] = {1, 2, 3, 4};
  float back[4] = {};
  mem.CopyToDevice(b.data(), host, sizeof(host));
  mem.Copy(c.data(), b.data(), sizeof(host));
  mem.Zero(b.data(), 2 * sizeof(float));
  mem.CopyToHost(back, c.data(), sizeof(back));
  // c is the copy of b before b's first two floats were zeroed.
  EXPECT_EQ(back[0], 1.0f);
  EXPECT_EQ(back[3], 4.0f);
  EXPECT_EQ(b.f()[0], 0.0f);
  EXPECT_EQ(b.f()[1], 0.0f);
  EXPECT_EQ(b.f()[2], 3.0f);
}

TEST(RuntimeBackendMemory, Names) {
  // The keys of simulate --json's memory breakdown, and the layout's group names.
  EXPECT_STREQ(MemoryKindName(MemoryKind::kWeights), "weights");
  EXPECT_STREQ(MemoryKindName(MemoryKind::kGradients), "gradients");
  EXPECT_STREQ(MemoryKindName(MemoryKind::kOptimizer), "optimizer");
  EXPECT_STREQ(MemoryKindName(MemoryKind::kActivations), "activations");
  EXPECT_STREQ(MemoryKindName(MemoryKind::kOther), "other");
  EXPECT_STREQ(GroupName(Group::kWorld), "world");
  EXPECT_STREQ(GroupName(Group::kTp), "tp");
  EXPECT_STREQ(GroupName(Group::kCp), "cp");
  EXPECT_STREQ(GroupName(Group::kDp), "dp");
  EXPECT_STREQ(GroupName(Group::kPp), "pp");
}

// ------------------------------------------------------------------------------------------
// Kernels against the operators of runtime/cpu

TEST(RuntimeBackendKernels, EmbeddingWithRowOffsetMatchesTheBatchedOperator) {
  const int64_t b = 2, t = 4, c = 3, vocab = 7;
  const std::vector<int32_t> tokens = RandomTokens(b * t, vocab, 1);
  const std::vector<float> wte = Random(vocab * c, 2), wpe = Random(t * c, 3);
  std::vector<float> ref(b * t * c);
  EmbeddingForward<float>(tokens.data(), wte.data(), wpe.data(), ref.data(), b, t, c, vocab);

  CpuKernels k;
  // Rows 3..7 of the (2, 4) batch: row0 = 3, so positions 3, 0, 1, 2, 3; they must equal
  // rows 3..7 of the full batch.
  const int64_t row0 = 3, n = b * t - row0;
  std::vector<float> out(n * c);
  k.EmbeddingForward(tokens.data() + row0, wte.data(), 0, vocab, wpe.data(), out.data(), n, row0, t,
                     c);
  EXPECT_EQ(Mismatches(out, std::vector<float>(ref.begin() + row0 * c, ref.end())), 0);
  // Without positions (RoPE models) a row is its token's embedding: row 3 = wte[tokens[3]].
  k.EmbeddingForward(tokens.data() + row0, wte.data(), 0, vocab, nullptr, out.data(), n, row0, t, c);
  EXPECT_EQ(out[1], wte[tokens[row0] * c + 1]);

  // Backward over the whole batch in two slices (rows 0..2, then 3..7) adds in the same row
  // order as the batched operator: bitwise equal tables.
  const std::vector<float> dx = Random(b * t * c, 4);
  std::vector<float> dwte_ref(vocab * c, 0), dwpe_ref(t * c, 0);
  EmbeddingBackward<float>(dx.data(), tokens.data(), dwte_ref.data(), dwpe_ref.data(), b, t, c,
                           vocab);
  std::vector<float> dwte(vocab * c, 0), dwpe(t * c, 0);
  k.EmbeddingBackward(dx.data(), tokens.data(), dwte.data(), 0, vocab, dwpe.data(), row0, 0, t, c);
  k.EmbeddingBackward(dx.data() + row0 * c, tokens.data() + row0, dwte.data(), 0, vocab, dwpe.data(),
                      n, row0, t, c);
  EXPECT_EQ(Mismatches(dwte, dwte_ref), 0);
  EXPECT_EQ(Mismatches(dwpe, dwpe_ref), 0);
}

TEST(RuntimeBackendKernels, VocabParallelEmbeddingHalvesSumToTheWholeTable) {
  const int64_t n = 6, c = 3, vocab = 8, t = 3;
  const std::vector<int32_t> tokens = RandomTokens(n, vocab, 11);
  const std::vector<float> wte = Random(vocab * c, 12), wpe = Random(t * c, 13);
  CpuKernels k;
  std::vector<float> whole(n * c), lo(n * c), hi(n * c);
  k.EmbeddingForward(tokens.data(), wte.data(), 0, vocab, wpe.data(), whole.data(), n, 0, t, c);
  // Rank 0 holds rows 0..3 and adds the positions, rank 1 rows 4..7 and no positions: each
  // token is found on exactly one rank, so the sum is the whole table's lookup, exactly
  // (x + 0 == x, and the position is added to the token's row on one rank only... up to the
  // order of one addition: wte + wpe on rank 0, or 0 + wpe then + wte after the sum).
  k.EmbeddingForward(tokens.data(), wte.data(), 0, 4, wpe.data(), lo.data(), n, 0, t, c);
  k.EmbeddingForward(tokens.data(), wte.data() + 4 * c, 4, 4, nullptr, hi.data(), n, 0, t, c);
  for (int64_t i = 0; i < n * c; ++i) EXPECT_NEAR(lo[i] + hi[i], whole[i], 1e-6f) << i;
  // Backward: each half's table gradient is the whole gradient's rows; positions on both.
  const std::vector<float> dx = Random(n * c, 14);
  std::vector<float> dwte(vocab * c, 0), dwte_half(vocab * c, 0), dwpe(t * c, 0), dwpe_lo(t * c, 0);
  k.EmbeddingBackward(dx.data(), tokens.data(), dwte.data(), 0, vocab, dwpe.data(), n, 0, t, c);
  k.EmbeddingBackward(dx.data(), tokens.data(), dwte_half.data(), 0, 4, dwpe_lo.data(), n, 0, t, c);
  k.EmbeddingBackward(dx.data(), tokens.data(), dwte_half.data() + 4 * c, 4, 4, nullptr, n, 0, t, c);
  EXPECT_EQ(Mismatches(dwte_half, dwte), 0);
  EXPECT_EQ(Mismatches(dwpe_lo, dwpe), 0);
}

TEST(RuntimeBackendKernels, VocabParallelCrossEntropyMatchesTheWholeSoftmax) {
  const int64_t n = 4, v = 10, half = 5;
  const std::vector<float> logits = Random(n * v, 21);
  const std::vector<int32_t> targets = RandomTokens(n, v, 22);
  CpuKernels k;
  std::vector<float> probs(n * v);
  const double loss = k.SoftmaxCrossEntropy(logits.data(), targets.data(), probs.data(), n, v);
  // Two ranks of 5 columns each: stats per rank, stacked (rank 0's n rows, then rank 1's).
  std::vector<float> part[2], stats(2 * n * 3), lse(n);
  for (int r = 0; r < 2; ++r) {
    for (int64_t i = 0; i < n; ++i) {
      part[r].insert(part[r].end(), logits.begin() + i * v + r * half,
                     logits.begin() + i * v + (r + 1) * half);
    }
    k.VocabParallelStats(part[r].data(), targets.data(), r * half, stats.data() + r * n * 3, n, half);
  }
  const double split_loss = k.VocabParallelLogSumExp(stats.data(), 2, lse.data(), n);
  // The same log-sum-exp by another association of the same terms: equal to ~1e-6 relative.
  EXPECT_NEAR(split_loss, loss, 1e-5 * loss);
  for (int r = 0; r < 2; ++r) {
    k.SoftmaxFromLogSumExp(part[r].data(), lse.data(), n, half);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < half; ++j) {
        EXPECT_NEAR(part[r][i * half + j], probs[i * v + r * half + j], 1e-6f);
      }
    }
    // Backward on the rank's columns: the target's column only where the rank holds it.
    std::vector<float> d = part[r];
    k.CrossEntropyBackward(d.data(), targets.data(), 1.0f, n, d.data(), n, half, r * half);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < half; ++j) {
        const float onehot = targets[i] == r * half + j ? 1.0f : 0.0f;
        EXPECT_NEAR(d[i * half + j], (probs[i * v + r * half + j] - onehot) / n, 1e-6f);
      }
    }
  }
}

TEST(RuntimeBackendKernels, ColumnSumsAddUp) {
  // x = [[1, 2], [3, 4], [5, 6]]: column sums (9, 12), added to (1, 1).
  const std::vector<float> x = {1, 2, 3, 4, 5, 6};
  std::vector<float> out = {1, 1};
  CpuKernels().AddColumnSums(x.data(), out.data(), 3, 2);
  EXPECT_EQ(out[0], 10.0f);
  EXPECT_EQ(out[1], 13.0f);
}

TEST(RuntimeBackendKernels, NormsMatchTheOperators) {
  const int64_t n = 5, c = 8;
  const std::vector<float> x = Random(n * c, 5), gain = Random(c, 6), bias = Random(c, 7);
  const std::vector<float> dy = Random(n * c, 8);
  CpuKernels k;
  for (Norm kind : {Norm::kLayerNorm, Norm::kRmsNorm}) {
    std::vector<float> y(n * c), mean(n), rstd(n), y_ref(n * c), mean_ref(n), rstd_ref(n);
    NormForward<float>(kind, x.data(), gain.data(), bias.data(), y_ref.data(), mean_ref.data(),
                       rstd_ref.data(), n, c);
    k.NormForward(kind, x.data(), gain.data(), bias.data(), y.data(), mean.data(), rstd.data(), n,
                  c);
    // Same operator, same inputs: identical outputs and saved statistics.
    EXPECT_EQ(Mismatches(y, y_ref), 0);
    EXPECT_EQ(Mismatches(rstd, rstd_ref), 0);

    std::vector<float> dx(n * c, 0.5f), dg(c, 0.25f), db(c, 0);
    std::vector<float> dx_ref = dx, dg_ref = dg, db_ref = db;
    NormBackward<float>(kind, dy.data(), x.data(), gain.data(), mean_ref.data(), rstd_ref.data(),
                        dx_ref.data(), dg_ref.data(), db_ref.data(), n, c);
    k.NormBackward(kind, dy.data(), x.data(), gain.data(), mean.data(), rstd.data(), dx.data(),
                   dg.data(), db.data(), n, c);
    // Both add into the same non-zero starting gradients.
    EXPECT_EQ(Mismatches(dx, dx_ref), 0);
    EXPECT_EQ(Mismatches(dg, dg_ref), 0);
    EXPECT_EQ(Mismatches(db, db_ref), 0);
  }
}

TEST(RuntimeBackendKernels, LinearMatchesTheOperator) {
  const int64_t n = 4, kin = 6, m = 5;
  const std::vector<float> x = Random(n * kin, 9), w = Random(m * kin, 10), b = Random(m, 11);
  const std::vector<float> dy = Random(n * m, 12);
  CpuKernels k;
  std::vector<float> y(n * m), y_ref(n * m);
  LinearForward<float>(x.data(), w.data(), b.data(), y_ref.data(), n, kin, m);
  k.LinearForward(x.data(), w.data(), b.data(), y.data(), n, kin, m);
  EXPECT_EQ(Mismatches(y, y_ref), 0);  // same operator
  std::vector<float> dx(n * kin, 0), dw(m * kin, 0), db(m, 0);
  std::vector<float> dx_ref = dx, dw_ref = dw, db_ref = db;
  LinearBackward<float>(dy.data(), x.data(), w.data(), dx_ref.data(), dw_ref.data(), db_ref.data(),
                        n, kin, m);
  k.LinearBackward(dy.data(), x.data(), w.data(), dx.data(), dw.data(), db.data(), n, kin, m);
  EXPECT_EQ(Mismatches(dx, dx_ref), 0);
  EXPECT_EQ(Mismatches(dw, dw_ref), 0);
  EXPECT_EQ(Mismatches(db, db_ref), 0);
  // din and db may be null: only dw is accumulated, again, so dw = 2 * dw_ref exactly.
  k.LinearBackward(dy.data(), x.data(), w.data(), nullptr, dw.data(), nullptr, n, kin, m);
  EXPECT_EQ(dw[7], 2.0f * dw_ref[7]);
  // dw and db null (overlap_tp's split backward): only din is accumulated, again, so
  // dx = 2 dx_ref exactly (doubling is exact); dw is untouched, and `in` is never read (null
  // here). Then db alone (din and dw null): db = 2 db_ref.
  const std::vector<float> dw_before = dw;
  k.LinearBackward(dy.data(), nullptr, w.data(), dx.data(), nullptr, nullptr, n, kin, m);
  for (int64_t i = 0; i < n * kin; ++i) EXPECT_EQ(dx[i], 2.0f * dx_ref[i]) << i;
  EXPECT_EQ(Mismatches(dw, dw_before), 0);
  k.LinearBackward(dy.data(), nullptr, w.data(), nullptr, nullptr, db.data(), n, kin, m);
  for (int64_t i = 0; i < m; ++i) EXPECT_EQ(db[i], 2.0f * db_ref[i]) << i;
  EXPECT_EQ(Mismatches(dw, dw_before), 0);
}

TEST(RuntimeBackendKernels, RopeMatchesTheOperatorWhateverTheCachedLength) {
  const int64_t b = 2, heads = 2, d = 4;
  CpuKernels k;
  // Short, then longer (the cached table grows), then short again (served by the long table):
  // each equals the operator with a table of exactly that length, since a position's angles
  // do not depend on the table's length.
  for (int64_t t : {3, 5, 3}) {
    const RopeTable<float> table = MakeRopeTable<float>(t, d);
    std::vector<float> x = Random(b * t * heads * d, 13 + static_cast<uint32_t>(t)), x_ref = x;
    RopeForward<float>(x_ref.data(), table, b, t, heads);
    k.RopeForward(x.data(), b, t, heads, d, kRopeBase, 0);
    EXPECT_EQ(Mismatches(x, x_ref), 0) << "t = " << t;
    RopeBackward<float>(x_ref.data(), table, b, t, heads);
    k.RopeBackward(x.data(), b, t, heads, d, kRopeBase, 0);
    EXPECT_EQ(Mismatches(x, x_ref), 0) << "t = " << t;
  }
}

// pos0 (a context-parallel chunk of each sequence): rotating rows at positions 4..6 equals
// rotating a 7-token sequence and keeping its last 3 rows, since a row's angle depends only on
// its position.
TEST(RuntimeBackendKernels, RopeFromAPositionEqualsTheTailOfTheWholeSequence) {
  const int64_t b = 2, heads = 2, d = 4, t = 7, pos0 = 4, tail = t - pos0;
  const int64_t row = heads * d;
  std::vector<float> whole = Random(b * t * row, 41);
  std::vector<float> chunk;
  for (int64_t s = 0; s < b; ++s) {
    chunk.insert(chunk.end(), whole.begin() + (s * t + pos0) * row, whole.begin() + (s + 1) * t * row);
  }
  CpuKernels k;
  k.RopeForward(whole.data(), b, t, heads, d, kRopeBase, 0);
  k.RopeForward(chunk.data(), b, tail, heads, d, kRopeBase, pos0);
  std::vector<float> expected;
  for (int64_t s = 0; s < b; ++s) {
    expected.insert(expected.end(), whole.begin() + (s * t + pos0) * row, whole.begin() + (s + 1) * t * row);
  }
  EXPECT_EQ(Mismatches(chunk, expected), 0);
  k.RopeBackward(chunk.data(), b, tail, heads, d, kRopeBase, pos0);
  k.RopeBackward(whole.data(), b, t, heads, d, kRopeBase, 0);
  expected.clear();
  for (int64_t s = 0; s < b; ++s) {
    expected.insert(expected.end(), whole.begin() + (s * t + pos0) * row, whole.begin() + (s + 1) * t * row);
  }
  EXPECT_EQ(Mismatches(chunk, expected), 0);
}

// A model's rotary_base reaches the kernel: Llama 3's 500000 rotates position 1's second pair
// (i = 1 of d/2 = 2) by 500000^(-2/4) = 1/707.107 rad, not 10000's 1/100.
TEST(RuntimeBackendKernels, RopeTakesTheModelsBase) {
  const int64_t b = 1, t = 2, heads = 1, d = 4;
  CpuKernels k;
  // x at position 1 = (x0, x1, x2, x3) = (0, 1, 0, 0): the pair (x1, x3) = (1, 0) turns to
  // (cos a, sin a) with a = 1 / sqrt(500000) = 0.00141421.
  std::vector<float> x = {0, 0, 0, 0, 0, 1, 0, 0};
  k.RopeForward(x.data(), b, t, heads, d, 500000.0, 0);
  EXPECT_NEAR(x[5], std::cos(0.00141421356), 1e-6);
  EXPECT_NEAR(x[7], std::sin(0.00141421356), 1e-6);
  EXPECT_EQ(RopeBaseOf(0), 10000.0);  // unstated: RoFormer's
  EXPECT_EQ(RopeBaseOf(500000.0), 500000.0);
}

TEST(RuntimeBackendKernels, AttentionMatchesTheOperator) {
  const AttentionDims dims{.batch = 2, .seq = 4, .heads = 4, .kv_heads = 2, .head_dim = 3};
  const AttentionShape shape{.batch = 2, .seq = 4, .heads = 4, .kv_heads = 2, .head_dim = 3};
  const int64_t nq = 2 * 4 * 4 * 3, nkv = 2 * 4 * 2 * 3, np = 2 * 4 * 4 * 4;
  const std::vector<float> q = Random(nq, 20), kk = Random(nkv, 21), v = Random(nkv, 22);
  const std::vector<float> dout = Random(nq, 23);
  CpuKernels k;
  std::vector<float> probs(np), out(nq), probs_ref(np), out_ref(nq);
  AttentionForward<float>(q.data(), kk.data(), v.data(), probs_ref.data(), out_ref.data(), shape);
  k.AttentionForward(q.data(), kk.data(), v.data(), probs.data(), out.data(), dims);
  EXPECT_EQ(Mismatches(probs, probs_ref), 0);  // same operator, dims mapped field by field
  EXPECT_EQ(Mismatches(out, out_ref), 0);
  std::vector<float> dq(nq, 0), dk(nkv, 0), dv(nkv, 0), dq_ref = dq, dk_ref = dk, dv_ref = dv;
  AttentionBackward<float>(dout.data(), q.data(), kk.data(), v.data(), probs_ref.data(),
                           dq_ref.data(), dk_ref.data(), dv_ref.data(), shape);
  k.AttentionBackward(dout.data(), q.data(), kk.data(), v.data(), probs.data(), dq.data(),
                      dk.data(), dv.data(), dims);
  EXPECT_EQ(Mismatches(dq, dq_ref), 0);
  EXPECT_EQ(Mismatches(dk, dk_ref), 0);
  EXPECT_EQ(Mismatches(dv, dv_ref), 0);
}

TEST(RuntimeBackendKernels, ActivationsMatchTheOperators) {
  const int64_t n = 17;
  const std::vector<float> x = Random(n, 30), u = Random(n, 31), dy = Random(n, 32);
  CpuKernels k;
  std::vector<float> y(n), y_ref(n);
  GeluForward<float>(x.data(), y_ref.data(), n);
  k.GeluForward(x.data(), y.data(), n);
  EXPECT_EQ(Mismatches(y, y_ref), 0);  // same operator
  std::vector<float> dx(n, 1.0f), dx_ref(n, 1.0f);
  GeluBackward<float>(dy.data(), x.data(), dx_ref.data(), n);
  k.GeluBackward(dy.data(), x.data(), dx.data(), n);
  EXPECT_EQ(Mismatches(dx, dx_ref), 0);

  SwigluForward<float>(x.data(), u.data(), y_ref.data(), n);
  k.SwigluForward(x.data(), u.data(), y.data(), n);
  EXPECT_EQ(Mismatches(y, y_ref), 0);
  std::vector<float> dg(n, 0), du(n, 0), dg_ref(n, 0), du_ref(n, 0);
  SwigluBackward<float>(dy.data(), x.data(), u.data(), dg_ref.data(), du_ref.data(), n);
  k.SwigluBackward(dy.data(), x.data(), u.data(), dg.data(), du.data(), n);
  EXPECT_EQ(Mismatches(dg, dg_ref), 0);
  EXPECT_EQ(Mismatches(du, du_ref), 0);
}

TEST(RuntimeBackendKernels, SoftmaxCrossEntropyInPlaceSumsWhatTheOperatorAverages) {
  const int64_t n = 6, v = 11;
  const std::vector<float> logits = Random(n * v, 40, 3.0f);
  const std::vector<int32_t> targets = RandomTokens(n, static_cast<int32_t>(v), 41);
  std::vector<float> probs_ref(n * v);
  const float mean_ref =
      CrossEntropyForward<float>(logits.data(), targets.data(), probs_ref.data(), n, v);

  CpuKernels k;
  std::vector<float> buffer = logits;  // logits in, probs out
  const double sum = k.SoftmaxCrossEntropy(buffer.data(), targets.data(), buffer.data(), n, v);
  // The operator's row formula, summed in double: the same probabilities, and sum / n rounded
  // to float is the operator's mean.
  EXPECT_EQ(Mismatches(buffer, probs_ref), 0);
  EXPECT_EQ(static_cast<float>(sum / static_cast<double>(n)), mean_ref);
  // Random logits of scale 3 over 11 classes: the loss is near ln 11 = 2.4 per token, surely
  // above zero and far below 100 nats.
  EXPECT_GT(sum, 0.0);
  EXPECT_LT(sum, 100.0 * n);
}

TEST(RuntimeBackendKernels, CrossEntropyBackwardInPlaceMatchesTheOperator) {
  const int64_t n = 6, v = 11;
  const std::vector<float> logits = Random(n * v, 42, 2.0f);
  const std::vector<int32_t> targets = RandomTokens(n, static_cast<int32_t>(v), 43);
  std::vector<float> probs(n * v);
  (void)CrossEntropyForward<float>(logits.data(), targets.data(), probs.data(), n, v);
  const float scale = 0.75f;
  std::vector<float> d_ref(n * v, 0.0f);
  CrossEntropyBackward<float>(probs.data(), targets.data(), scale, d_ref.data(), n, v);

  CpuKernels k;
  std::vector<float> d = probs;  // overwritten in place
  k.CrossEntropyBackward(d.data(), targets.data(), scale, n, d.data(), n, v, 0);
  // The operator adds into zeros with the same per-token factor scale / n: bitwise equal.
  EXPECT_EQ(Mismatches(d, d_ref), 0);

  // mean_over differs from n (a micro-batch's share): probs (0.25, 0.75), target 1, scale 1,
  // mean_over 4 -> per_token 0.25, d = 0.25 * (0.25, 0.75 - 1) = (0.0625, -0.0625), exact.
  std::vector<float> p = {0.25f, 0.75f};
  const int32_t target = 1;
  k.CrossEntropyBackward(p.data(), &target, 1.0f, 4, p.data(), 1, 2, 0);
  EXPECT_EQ(p[0], 0.0625f);
  EXPECT_EQ(p[1], -0.0625f);
}

TEST(RuntimeBackendKernels, VectorOps) {
  CpuKernels k;
  std::vector<float> a = {1, 2, 3, 4, 5, 6};
  const std::vector<float> b = {0.5f, 0.5f, 0.5f, 1, 1, 1};
  k.Add(a.data(), b.data(), 6);
  // a + b = (1.5, 2.5, 3.5, 5, 6, 7).
  EXPECT_EQ(a[0], 1.5f);
  EXPECT_EQ(a[5], 7.0f);
  const float bias[3] = {10, 20, 30};
  k.AddRowBias(a.data(), bias, 2, 3);
  // Rows (1.5, 2.5, 3.5) and (5, 6, 7) plus (10, 20, 30): (11.5, 22.5, 33.5), (15, 26, 37).
  EXPECT_EQ(a[2], 33.5f);
  EXPECT_EQ(a[3], 15.0f);
  k.Scale(a.data(), 2.0f, 6);
  EXPECT_EQ(a[4], 52.0f);  // 26 * 2
  const float x[3] = {1, 2, 3};
  EXPECT_EQ(k.SumSquares(x, 3), 14.0);  // 1 + 4 + 9
  // Accumulated in double: 3e4^2 * 3 = 2.7e9 is exact in double, not in float (> 2^24).
  const float big[3] = {30000, 30000, 30001};
  EXPECT_EQ(k.SumSquares(big, 3), 2.0 * 9e8 + 30001.0 * 30001.0);
}

// AdamW<float>::Step on every tensor of a small model, twice, against the kernel called per
// tensor with the factors the caller computes as AdamW<float> does (in double, rounded once).
void ExpectAdamWKernelMatches(double max_grad_norm, bool expect_clipped) {
  ModelSpec spec = testing::GptModel(1, 8, 2, 16, 4);
  spec.dropout = false;
  const ParamLayout layout = *ParamLayout::ForModel(spec);
  const int64_t total = layout.total_size();
  const AdamWConfig config{.lr = 1e-2,
                           .beta1 = 0.9,
                           .beta2 = 0.95,
                           .eps = 1e-8,
                           .weight_decay = 0.1,
                           .max_grad_norm = max_grad_norm};
  AdamW<float> opt(layout, config);
  std::vector<float> params_ref = Random(total, 50, 0.02f);
  std::vector<float> params = params_ref, m(total, 0), v(total, 0);

  CpuKernels k;
  for (int step = 1; step <= 2; ++step) {
    std::vector<float> grads = Random(total, 60 + step), grads_ref = grads;
    const double norm_ref = opt.Step(params_ref, grads_ref);

    const double norm = std::sqrt(k.SumSquares(grads.data(), total));
    EXPECT_EQ(norm, norm_ref);  // both sum squares in double in index order
    const bool clip = max_grad_norm > 0 && norm > max_grad_norm;
    EXPECT_EQ(clip, expect_clipped);
    const float grad_scale = clip ? static_cast<float>(max_grad_norm / norm) : 1.0f;
    AdamWArgs args{.lr = static_cast<float>(config.lr),
                   .beta1 = static_cast<float>(config.beta1),
                   .beta2 = static_cast<float>(config.beta2),
                   .eps = static_cast<float>(config.eps),
                   .bias_correction1 = static_cast<float>(1.0 / (1.0 - std::pow(0.9, step))),
                   .bias_correction2 = static_cast<float>(1.0 / (1.0 - std::pow(0.95, step)))};
    for (const ParamTensor& t : layout.tensors()) {
      args.weight_decay = t.weight_decay ? static_cast<float>(config.weight_decay) : 0.0f;
      const int64_t o = t.offset;
      k.AdamW(params.data() + o, grads.data() + o, m.data() + o, v.data() + o, t.size(), grad_scale,
              args);
    }
    // The same float operations in the same order: every parameter bitwise equal.
    EXPECT_EQ(Mismatches(params, params_ref), 0) << "step " << step;
  }
  // And the step did something: Adam's first step moves each weight by about lr = 0.01.
  const std::vector<float> init = Random(total, 50, 0.02f);
  EXPECT_GT(std::abs(params[0] - init[0]), 1e-3f);
}

TEST(RuntimeBackendKernels, AdamWIsBitwiseAdamWFloatWithoutClipping) {
  // max_grad_norm 0 disables clipping (grad_scale 1).
  ExpectAdamWKernelMatches(0.0, false);
}

TEST(RuntimeBackendKernels, AdamWIsBitwiseAdamWFloatWithClipping) {
  // Unit-normal gradients over ~1.5k elements have norm ~39, far above 1: clipped both steps.
  ExpectAdamWKernelMatches(1.0, true);
}

// ------------------------------------------------------------------------------------------
// LocalCollectives and the backend

TEST(RuntimeBackendLocalCollectives, OneRankGroups) {
  LocalCollectives c;
  for (Group g : {Group::kWorld, Group::kTp, Group::kCp, Group::kDp, Group::kPp}) {
    EXPECT_EQ(c.rank(g), 0);
    EXPECT_EQ(c.size(g), 1);
  }
  // A sum over one rank is the value itself.
  float x[2] = {1.5f, -2.0f};
  ASSERT_TRUE(c.AllReduceSum(Group::kDp, x, 2).ok());
  EXPECT_EQ(x[0], 1.5f);
  double h[1] = {3.25};
  ASSERT_TRUE(c.AllReduceSumHost(Group::kWorld, h, 1).ok());
  ASSERT_TRUE(c.AllReduceMaxHost(Group::kWorld, h, 1).ok());
  EXPECT_EQ(h[0], 3.25);
  // One block in, one block out: reduce-scatter and all-gather are copies.
  float out[2] = {0, 0};
  ASSERT_TRUE(c.ReduceScatterSum(Group::kDp, x, out, 2).ok());
  EXPECT_EQ(out[1], -2.0f);
  out[1] = 0;
  ASSERT_TRUE(c.AllGather(Group::kTp, x, out, 2).ok());
  EXPECT_EQ(out[1], -2.0f);
  double hout[1] = {0};
  ASSERT_TRUE(c.AllGatherHost(Group::kWorld, h, hout, 1).ok());
  EXPECT_EQ(hout[0], 3.25);
  // No peer to send to or receive from.
  StatusOr<int64_t> send = c.Isend(Group::kPp, x, 2, 1, 0);
  ASSERT_FALSE(send.ok());
  EXPECT_NE(send.status().message().find("no peer in a one-rank group"), std::string::npos);
  EXPECT_NE(send.status().message().find("pp group"), std::string::npos);
  const Status recv = c.Recv(Group::kPp, x, 2, 1, 0);
  EXPECT_FALSE(recv.ok());
  EXPECT_NE(recv.message().find("no peer in a one-rank group"), std::string::npos);
  EXPECT_TRUE(c.Barrier(Group::kWorld).ok());
}

TEST(RuntimeBackendLocalCollectives, Bf16BlocksAreTwoBytesAnElement) {
  LocalCollectives c;
  // 1.5 = 0x3fc0 and -2 = 0xc000 as bf16. A copy of n = 2 elements moves 4 bytes: the third
  // element of out (a sentinel, 7 = 0x40e0) must stay as it was.
  const Bf16 in[2] = {ToBf16(1.5f), ToBf16(-2.0f)};
  Bf16 out[3] = {Bf16{}, Bf16{}, ToBf16(7.0f)};
  ASSERT_TRUE(c.ReduceScatterSum(Group::kDp, in, out, 2).ok());
  EXPECT_EQ(out[0].bits, 0x3fc0);
  EXPECT_EQ(out[1].bits, 0xc000);
  EXPECT_EQ(out[2].bits, 0x40e0);
  out[0] = out[1] = Bf16{};
  ASSERT_TRUE(c.AllGather(Group::kTp, in, out, 2).ok());
  EXPECT_EQ(out[1].bits, 0xc000);
  EXPECT_EQ(out[2].bits, 0x40e0);
  Bf16 x[1] = {ToBf16(3.0f)};
  ASSERT_TRUE(c.AllReduceSum(Group::kDp, x, 1).ok());  // one rank: the value itself
  EXPECT_EQ(ToFloat(x[0]), 3.0f);
  EXPECT_FALSE(c.Isend(Group::kPp, in, 2, 1, 0).ok());
  EXPECT_FALSE(c.Recv(Group::kPp, out, 2, 1, 0).ok());
}

TEST(RuntimeBackendEmulatedCollectives, CopiesElementBytesOfEachType) {
  // Rank 1 of tp=2 emulated alone: the all-gather puts this rank's block at position 1 and
  // the (zero) scratch at position 0; n = 2 bf16 elements are 4 bytes a block, so 8 bytes in
  // all and a third block's worth (the sentinel 7 = 0x40e0 at index 4) is untouched.
  HostMemory mem;
  const Layout l = *ResolveLayout(*ParseLayout("tp=2"), 2);
  EmulatedCollectives c(l, 1, &mem);
  ASSERT_EQ(c.rank(Group::kTp), 1);
  const Bf16 in[2] = {ToBf16(1.5f), ToBf16(-2.0f)};
  Bf16 out[5];
  for (Bf16& b : out) b = ToBf16(7.0f);
  ASSERT_TRUE(c.AllGather(Group::kTp, in, out, 2).ok());
  EXPECT_EQ(out[0].bits, 0x0000);
  EXPECT_EQ(out[1].bits, 0x0000);
  EXPECT_EQ(out[2].bits, 0x3fc0);
  EXPECT_EQ(out[3].bits, 0xc000);
  EXPECT_EQ(out[4].bits, 0x40e0);
  // An fp32 all-reduce of 2 floats: 8 bytes of the (zero) scratch arrive, the third float
  // stays 5.
  float sum[3] = {5.0f, 5.0f, 5.0f};
  ASSERT_TRUE(c.AllReduceSum(Group::kTp, sum, 2).ok());
  EXPECT_EQ(sum[0], 0.0f);
  EXPECT_EQ(sum[1], 0.0f);
  EXPECT_EQ(sum[2], 5.0f);
  // A bf16 send leaves its 4 bytes in the scratch; a bf16 receive of 2 elements brings those
  // 4 bytes back, and only those.
  ASSERT_TRUE(c.Isend(Group::kPp, in, 2, 0, 0).ok());
  Bf16 got[3] = {Bf16{}, Bf16{}, ToBf16(7.0f)};
  ASSERT_TRUE(c.Recv(Group::kPp, got, 2, 0, 0).ok());
  EXPECT_EQ(got[0].bits, 0x3fc0);
  EXPECT_EQ(got[1].bits, 0xc000);
  EXPECT_EQ(got[2].bits, 0x40e0);
}

TEST(RuntimeBackendCpu, OwnsItsParts) {
  CpuBackend backend(std::make_unique<LocalCollectives>());
  EXPECT_EQ(backend.name(), "cpu");
  EXPECT_EQ(backend.comm().size(Group::kWorld), 1);  // LocalCollectives: one rank
  {
    DeviceBuffer b = Must(backend.memory().AllocateFloats(MemoryKind::kWeights, 8, "w"));
    backend.memory().Zero(b.data(), b.bytes());
    float ones[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    backend.kernels().f32().Add(b.f(), ones, 8);
    EXPECT_EQ(backend.kernels().SumSquares(b.f(), 8), 8.0);  // 0 + 1, squared, 8 times
    EXPECT_EQ(backend.memory().current().total(), 32);       // 8 floats
  }
  EXPECT_EQ(backend.memory().current().total(), 0);
  // A monotonic clock: never goes backwards.
  const double t0 = backend.Now();
  EXPECT_GE(backend.Now(), t0);
}

// ------------------------------------------------------------------------------------------
// Calibration's fit (runtime/calibrate/calibrate.h)

// Times made exactly by t = 2e-6 + flops / 5e10 + bytes / 2e10: the weighted least squares
// recovers the three parameters (to rounding) and a perfect R^2.
TEST(RuntimeCalibration, RelativeLeastSquaresRecoversAnExactModel) {
  std::vector<std::vector<double>> x;
  std::vector<double> t;
  for (double flops : {1e5, 1e6, 1e7, 1e8}) {
    x.push_back({1.0, flops, 0.0});  // GEMMs
    t.push_back(2e-6 + flops / 5e10);
  }
  for (double bytes : {1e4, 1e5, 1e6, 1e7}) {
    x.push_back({1.0, 0.0, bytes});
    t.push_back(2e-6 + bytes / 2e10);
  }
  double r2 = 0;
  const std::vector<double> theta = RelativeLeastSquares(x, t, &r2);
  ASSERT_EQ(theta.size(), 3u);
  EXPECT_NEAR(theta[0], 2e-6, 1e-12);
  EXPECT_NEAR(1.0 / theta[1], 5e10, 5e10 * 1e-6);
  EXPECT_NEAR(1.0 / theta[2], 2e10, 2e10 * 1e-6);
  EXPECT_NEAR(r2, 1.0, 1e-9);
}

}  // namespace
}  // namespace shardsim::runtime
