// Context parallelism's pieces (runtime/exec/context_parallel.h, the attention kernels' causal
// offset): a chunk of queries against all keys is the matching rows of whole-sequence attention,
// its backward's two halves add up to the whole backward, and the load-balanced split puts the
// tokens where the header says.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "runtime/cpu/attention.h"
#include "runtime/cpu/flash_attention.h"
#include "runtime/exec/context_parallel.h"

namespace shardsim::runtime {
namespace {

std::vector<float> Random(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// Rows [from, from + count) of each of b sequences of t rows of width w.
std::vector<float> RowsOf(const std::vector<float>& x, int64_t b, int64_t t, int64_t w, int64_t from, int64_t count) {
  std::vector<float> out;
  for (int64_t s = 0; s < b; ++s) {
    out.insert(out.end(), x.begin() + (s * t + from) * w, x.begin() + (s * t + from + count) * w);
  }
  return out;
}

double MaxRelative(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double scale = std::max({1.0, std::fabs(static_cast<double>(a[i])), std::fabs(static_cast<double>(b[i]))});
    worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - b[i]) / scale);
  }
  return worst;
}

// B 2 sequences of T 8 tokens, 4 query heads on 2 KV heads of d 4. The chunk is queries 5..7
// (q_offset 5): query 5 + i sees keys 0..5 + i, as row 5 + i of the whole attention does, so
// its output rows are those rows (the same dot products and softmax; only the GEMM shapes
// differ, hence a tolerance of a few fp32 ulps, 1e-6).
constexpr int64_t kB = 2, kT = 8, kH = 4, kKv = 2, kD = 4, kFrom = 5, kRows = 3;

TEST(ContextParallelAttention, AChunkOfQueriesIsThoseRowsOfTheWholeAttention) {
  const std::vector<float> q = Random(kB * kT * kH * kD, 1), k = Random(kB * kT * kKv * kD, 2),
                           v = Random(kB * kT * kKv * kD, 3);
  const AttentionShape whole{kB, kT, kH, kKv, kD};
  std::vector<float> probs(kB * kH * kT * kT), out(kB * kT * kH * kD), lse(kB * kH * kT);
  CausalAttentionForward<float>(q.data(), k.data(), v.data(), probs.data(), lse.data(), out.data(), whole);
  const AttentionShape chunk{kB, kRows, kH, kKv, kD, kT, kFrom};
  const std::vector<float> q_chunk = RowsOf(q, kB, kT, kH * kD, kFrom, kRows);
  std::vector<float> chunk_probs(kB * kH * kRows * kT), chunk_out(kB * kRows * kH * kD), chunk_lse(kB * kH * kRows);
  CausalAttentionForward<float>(q_chunk.data(), k.data(), v.data(), chunk_probs.data(), chunk_lse.data(),
                                chunk_out.data(), chunk);
  EXPECT_LT(MaxRelative(chunk_out, RowsOf(out, kB, kT, kH * kD, kFrom, kRows)), 1e-6);
  // lse (B, H, T): per (b, h) the chunk's rows are rows 5..7 of the whole's.
  EXPECT_LT(MaxRelative(chunk_lse, RowsOf(lse, kB * kH, kT, 1, kFrom, kRows)), 1e-6);
  // The masked keys (past 5 + i) have probability exactly 0.
  for (int64_t bh = 0; bh < kB * kH; ++bh) {
    for (int64_t i = 0; i < kRows; ++i) {
      for (int64_t j = kFrom + i + 1; j < kT; ++j) EXPECT_EQ(chunk_probs[(bh * kRows + i) * kT + j], 0.0f);
    }
  }
}

// The whole backward is the sum of two chunks' (queries 0..4 at offset 0 and 5..7 at offset 5,
// each against all 8 keys): dQ rows are the chunks' own, dK and dV the sums of both chunks'
// contributions. Both for the unfused kernel (saved probabilities) and the flash one (lse).
TEST(ContextParallelAttention, TwoChunksBackwardsAddUpToTheWholeBackward) {
  const std::vector<float> q = Random(kB * kT * kH * kD, 4), k = Random(kB * kT * kKv * kD, 5),
                           v = Random(kB * kT * kKv * kD, 6), dout = Random(kB * kT * kH * kD, 7);
  const AttentionShape whole{kB, kT, kH, kKv, kD};
  std::vector<float> probs(kB * kH * kT * kT), out(kB * kT * kH * kD), lse(kB * kH * kT);
  CausalAttentionForward<float>(q.data(), k.data(), v.data(), probs.data(), lse.data(), out.data(), whole);
  std::vector<float> dq(q.size()), dk(k.size()), dv(v.size());
  AttentionBackward<float>(dout.data(), q.data(), k.data(), v.data(), probs.data(), dq.data(), dk.data(), dv.data(),
                           whole);
  for (const bool flash : {false, true}) {
    SCOPED_TRACE(flash ? "flash" : "unfused");
    std::vector<float> dk_sum(k.size()), dv_sum(v.size());
    for (const auto& [from, rows] : {std::pair<int64_t, int64_t>{0, kFrom}, {kFrom, kRows}}) {
      const AttentionShape chunk{kB, rows, kH, kKv, kD, kT, from};
      const std::vector<float> qc = RowsOf(q, kB, kT, kH * kD, from, rows);
      const std::vector<float> dc = RowsOf(dout, kB, kT, kH * kD, from, rows);
      std::vector<float> pc(kB * kH * rows * kT), oc(qc.size()), lc(kB * kH * rows), dqc(qc.size());
      CausalAttentionForward<float>(qc.data(), k.data(), v.data(), pc.data(), lc.data(), oc.data(), chunk);
      if (flash) {
        FlashAttentionBackward<float>(dc.data(), qc.data(), k.data(), v.data(), oc.data(), lc.data(), dqc.data(),
                                      dk_sum.data(), dv_sum.data(), chunk);
      } else {
        AttentionBackward<float>(dc.data(), qc.data(), k.data(), v.data(), pc.data(), dqc.data(), dk_sum.data(),
                                 dv_sum.data(), chunk);
      }
      EXPECT_LT(MaxRelative(dqc, RowsOf(dq, kB, kT, kH * kD, from, rows)), 1e-5);
    }
    // Sums of 8 query rows split 5 + 3: a few ulps of reordering, 1e-5.
    EXPECT_LT(MaxRelative(dk_sum, dk), 1e-5);
    EXPECT_LT(MaxRelative(dv_sum, dv), 1e-5);
  }
}

// cp 2, T 8: chunks of L = 2; rank 0 holds chunks 0 and 3 (tokens 0-1 and 6-7), rank 1 chunks 1
// and 2 (2-3 and 4-5), each in half-major order over the 2 sequences.
TEST(ContextParallelSplit, RanksHoldTheBalancedChunksHalfMajor) {
  std::vector<int32_t> whole(2 * 8);
  for (int32_t i = 0; i < 16; ++i) whole[i] = i;  // sequence s token j = 8 s + j
  const CpSplit r0{.cp = 2, .rank = 0, .seq = 8}, r1{.cp = 2, .rank = 1, .seq = 8};
  EXPECT_EQ(LocalRows(whole, 2, r0), (std::vector<int32_t>{0, 1, 8, 9, 6, 7, 14, 15}));
  EXPECT_EQ(LocalRows(whole, 2, r1), (std::vector<int32_t>{2, 3, 10, 11, 4, 5, 12, 13}));
  EXPECT_EQ(r0.Start(0), 0);
  EXPECT_EQ(r0.Start(1), 6);
  EXPECT_EQ(r1.Start(0), 2);
  EXPECT_EQ(r1.Start(1), 4);
  // Runs of rank 1: (local row, position) = (0, 2), (2, 2), (4, 4), (6, 4).
  std::vector<std::pair<int64_t, int64_t>> runs;
  ForEachChunk(r1, 2, [&](int64_t local, int64_t position) { runs.emplace_back(local, position); });
  EXPECT_EQ(runs, (std::vector<std::pair<int64_t, int64_t>>{{0, 2}, {2, 2}, {4, 4}, {6, 4}}));
}

}  // namespace
}  // namespace shardsim::runtime
