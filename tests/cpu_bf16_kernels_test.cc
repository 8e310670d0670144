// Tests of bf16 storage on the CPU: the rounding of bf16.h, and CpuBf16Kernels' contract
// (cpu_bf16_kernels.h) that each op's bf16 output is the fp32 kernel's output on the widened
// inputs, rounded once to nearest even. Inputs are drawn already bf16-representable, so the
// fp32 reference sees exactly the values the bf16 kernel widens; the fp32 kernels are
// deterministic (same code, same inputs), so the rounded results must match bit for bit, and
// fp32 outputs (weight gradients, statistics, losses) must match exactly.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/backend/bf16.h"
#include "runtime/cpu/cpu_kernels.h"

namespace shardsim::runtime {
namespace {

using Floats = std::vector<float>;
using Bf16s = std::vector<Bf16>;

// n normal(0, scale) values rounded to bf16.
Bf16s RandomBf16(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  Bf16s v(n);
  for (Bf16& x : v) x = ToBf16(dist(gen));
  return v;
}

Floats RandomFloats(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  Floats v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

Floats Widen(const Bf16s& v) {
  Floats out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = ToFloat(v[i]);
  return out;
}

// Elements where the bf16 result differs in bits from the fp32 reference rounded once.
int64_t NotRoundedOnce(const Bf16s& got, const Floats& reference) {
  EXPECT_EQ(got.size(), reference.size());
  int64_t bad = 0;
  for (size_t i = 0; i < got.size() && i < reference.size(); ++i) {
    bad += got[i].bits != ToBf16(reference[i]).bits;
  }
  return bad;
}

// Elements where two fp32 results differ.
int64_t Mismatches(const Floats& a, const Floats& b) {
  EXPECT_EQ(a.size(), b.size());
  int64_t bad = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) bad += a[i] != b[i];
  return bad;
}

uint16_t Bits(float f) { return ToBf16(f).bits; }

// ------------------------------------------------------------------------------------------
// Rounding (bf16.h)

TEST(Bf16Rounding, ExactValuesKeepTheirUpperHalf) {
  // 1.0f = 0x3f800000 and -2.5f = 0xc0200000: their low 16 bits are zero, so the bf16 is the
  // upper half and widening gives the value back.
  EXPECT_EQ(Bits(1.0f), 0x3f80);
  EXPECT_EQ(Bits(-2.5f), 0xc020);
  EXPECT_EQ(ToFloat(ToBf16(-2.5f)), -2.5f);
  EXPECT_EQ(Bits(0.0f), 0x0000);
  EXPECT_EQ(Bits(-0.0f), 0x8000);
  EXPECT_EQ(Bits(std::numeric_limits<float>::infinity()), 0x7f80);
}

TEST(Bf16Rounding, TiesGoToEvenBothWays) {
  // Near 1 a bf16 step is 2^-7 (7 mantissa bits). 1 + 2^-8 lies halfway between 1 (mantissa
  // 0, even) and 1 + 2^-7 (mantissa 1, odd): it rounds down to 1 = 0x3f80.
  EXPECT_EQ(Bits(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  // 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (mantissa 2, even): it
  // rounds up to 1 + 2^-6 = 0x3f82.
  EXPECT_EQ(Bits(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  // Just above the first tie (by 2^-20) is nearer 1 + 2^-7 = 0x3f81; just below the second
  // is nearer 1 + 2^-7 too.
  EXPECT_EQ(Bits(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3f81);
  EXPECT_EQ(Bits(1.0f + 3 * std::ldexp(1.0f, -8) - std::ldexp(1.0f, -20)), 0x3f81);
  // The same ties on negative values round the magnitude alike: -(1 + 3 * 2^-8) -> 0xbf82.
  EXPECT_EQ(Bits(-(1.0f + 3 * std::ldexp(1.0f, -8))), 0xbf82);
}

TEST(Bf16Rounding, NanStaysNanAndOverflowGoesToInfinity) {
  EXPECT_TRUE(std::isnan(ToFloat(ToBf16(std::numeric_limits<float>::quiet_NaN()))));
  // A NaN whose payload lies only in the low 16 bits (0x7f800001): truncating would give
  // 0x7f80, infinity; rounding must keep it a NaN (the quiet bit set: 0x7fc0).
  EXPECT_EQ(Bits(std::bit_cast<float>(0x7f800001u)), 0x7fc0);
  EXPECT_TRUE(std::isnan(ToFloat(ToBf16(std::bit_cast<float>(0x7f800001u)))));
  // The largest bf16 is (2 - 2^-7) 2^127 = 0x7f7f; halfway from it to 2^128 is
  // (2 - 2^-8) 2^127. FLT_MAX = (2 - 2^-23) 2^127 lies above that, so it rounds to infinity.
  EXPECT_EQ(Bits(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(Bits(-std::numeric_limits<float>::max()), 0xff80);
  EXPECT_EQ(ToFloat(Bf16{0x7f7f}), std::ldexp(2.0f - std::ldexp(1.0f, -7), 127));
  // Below the halfway point it stays finite: bf16's step in [2^127, 2^128) is 2^120, so
  // (2 - 2^-7) 2^127 + 2^118 (a quarter step above the largest bf16) rounds down to 0x7f7f.
  EXPECT_EQ(Bits(std::ldexp(2.0f - std::ldexp(1.0f, -7), 127) + std::ldexp(1.0f, 118)), 0x7f7f);
}

TEST(Bf16Rounding, CastToBf16RoundsEachElement) {
  CpuKernels k;
  const Floats src = RandomFloats(64, 1);
  Bf16s dst(src.size());
  k.CastToBf16(src.data(), dst.data(), static_cast<int64_t>(src.size()));
  EXPECT_EQ(NotRoundedOnce(dst, src), 0);
}

// ------------------------------------------------------------------------------------------
// CpuBf16Kernels against the fp32 kernels

class CpuBf16KernelsTest : public testing::Test {
 protected:
  CpuKernels k_;
  TypedKernels<float>& f_ = k_.f32();
  TypedKernels<Bf16>& h_ = k_.bf16();
};

TEST_F(CpuBf16KernelsTest, LinearRoundsEachOutputOnce) {
  const int64_t n = 5, kin = 7, m = 6;
  const Bf16s x = RandomBf16(n * kin, 1), w = RandomBf16(m * kin, 2), b = RandomBf16(m, 3);
  Bf16s y(n * m);
  Floats y_ref(n * m);
  h_.LinearForward(x.data(), w.data(), b.data(), y.data(), n, kin, m);
  f_.LinearForward(Widen(x).data(), Widen(w).data(), Widen(b).data(), y_ref.data(), n, kin, m);
  EXPECT_EQ(NotRoundedOnce(y, y_ref), 0);
  // Not vacuous: sums of 7 products of 8-bit mantissas need more than 8 bits, so some fp32
  // outputs are not bf16 values and the rounding changed them.
  EXPECT_GT(Mismatches(Widen(y), y_ref), 0);

  // Backward, accumulating: din starts at bf16 values, the fp32 kernel adds into the widened
  // copy, and the sum is rounded once. dw and db are fp32, passed through.
  const Bf16s dy = RandomBf16(n * m, 4);
  Bf16s din = RandomBf16(n * kin, 5);
  Floats din_ref = Widen(din), dw = RandomFloats(m * kin, 6), db = RandomFloats(m, 7);
  Floats dw_ref = dw, db_ref = db;
  h_.LinearBackward(dy.data(), x.data(), w.data(), din.data(), dw.data(), db.data(), n, kin, m);
  f_.LinearBackward(Widen(dy).data(), Widen(x).data(), Widen(w).data(), din_ref.data(),
                    dw_ref.data(), db_ref.data(), n, kin, m);
  EXPECT_EQ(NotRoundedOnce(din, din_ref), 0);
  EXPECT_EQ(Mismatches(dw, dw_ref), 0);
  EXPECT_EQ(Mismatches(db, db_ref), 0);
  // Without din and db (nullptr): only dw, again the fp32 kernel's.
  h_.LinearBackward(dy.data(), x.data(), w.data(), nullptr, dw.data(), nullptr, n, kin, m);
  f_.LinearBackward(Widen(dy).data(), Widen(x).data(), Widen(w).data(), nullptr, dw_ref.data(),
                    nullptr, n, kin, m);
  EXPECT_EQ(Mismatches(dw, dw_ref), 0);
  // Without dw and db (nullptr, overlap_tp's split backward): only din, rounded once again;
  // `in` is never read (null here) and dw is untouched.
  const Floats dw_before = dw;
  din_ref = Widen(din);  // from the rounded values, as the kernel widens them
  h_.LinearBackward(dy.data(), nullptr, w.data(), din.data(), nullptr, nullptr, n, kin, m);
  f_.LinearBackward(Widen(dy).data(), nullptr, Widen(w).data(), din_ref.data(), nullptr,
                    nullptr, n, kin, m);
  EXPECT_EQ(NotRoundedOnce(din, din_ref), 0);
  EXPECT_EQ(Mismatches(dw, dw_before), 0);
}

TEST_F(CpuBf16KernelsTest, EmbeddingRoundsOutputsAndPassesGradientsThrough) {
  // This rank holds rows [4, 12) of a 16-token vocabulary; tokens outside get only positions.
  const int64_t n = 6, c = 5, seq = 3, vocab = 8, begin = 4, row0 = 1;
  const std::vector<int32_t> tokens = {4, 0, 11, 15, 7, 4};
  const Bf16s wte = RandomBf16(vocab * c, 10), wpe = RandomBf16(seq * c, 11);
  Bf16s out(n * c);
  Floats out_ref(n * c);
  h_.EmbeddingForward(tokens.data(), wte.data(), begin, vocab, wpe.data(), out.data(), n, row0, seq,
                      c);
  f_.EmbeddingForward(tokens.data(), Widen(wte).data(), begin, vocab, Widen(wpe).data(),
                      out_ref.data(), n, row0, seq, c);
  EXPECT_EQ(NotRoundedOnce(out, out_ref), 0);

  const Bf16s dout = RandomBf16(n * c, 12);
  Floats dwte = RandomFloats(vocab * c, 13), dwpe = RandomFloats(seq * c, 14);
  Floats dwte_ref = dwte, dwpe_ref = dwpe;
  h_.EmbeddingBackward(dout.data(), tokens.data(), dwte.data(), begin, vocab, dwpe.data(), n, row0,
                       seq, c);
  f_.EmbeddingBackward(Widen(dout).data(), tokens.data(), dwte_ref.data(), begin, vocab,
                       dwpe_ref.data(), n, row0, seq, c);
  EXPECT_EQ(Mismatches(dwte, dwte_ref), 0);
  EXPECT_EQ(Mismatches(dwpe, dwpe_ref), 0);
}

TEST_F(CpuBf16KernelsTest, NormsRoundOutputsAndAccumulateDx) {
  const int64_t n = 4, c = 9;
  const Bf16s x = RandomBf16(n * c, 20, 2.0f), gain = RandomBf16(c, 21), bias = RandomBf16(c, 22);
  const Bf16s dy = RandomBf16(n * c, 23);
  for (Norm kind : {Norm::kLayerNorm, Norm::kRmsNorm}) {
    const Bf16* b = kind == Norm::kLayerNorm ? bias.data() : nullptr;
    const Floats bias_f = Widen(bias);
    const float* b_f = kind == Norm::kLayerNorm ? bias_f.data() : nullptr;
    Bf16s y(n * c);
    Floats y_ref(n * c), mean(n), rstd(n), mean_ref(n), rstd_ref(n);
    h_.NormForward(kind, x.data(), gain.data(), b, y.data(), mean.data(), rstd.data(), n, c);
    f_.NormForward(kind, Widen(x).data(), Widen(gain).data(), b_f, y_ref.data(), mean_ref.data(),
                   rstd_ref.data(), n, c);
    EXPECT_EQ(NotRoundedOnce(y, y_ref), 0);
    EXPECT_EQ(Mismatches(rstd, rstd_ref), 0);  // fp32 statistics, unrounded
    if (kind == Norm::kLayerNorm) {
      EXPECT_EQ(Mismatches(mean, mean_ref), 0);
    }

    Bf16s dx = RandomBf16(n * c, 24);  // accumulated into
    Floats dx_ref = Widen(dx), dg(c, 0.5f), dbias(c, -0.25f), dg_ref = dg, db_ref = dbias;
    h_.NormBackward(kind, dy.data(), x.data(), gain.data(), mean.data(), rstd.data(), dx.data(),
                    dg.data(), dbias.data(), n, c);
    f_.NormBackward(kind, Widen(dy).data(), Widen(x).data(), Widen(gain).data(), mean.data(),
                    rstd.data(), dx_ref.data(), dg_ref.data(), db_ref.data(), n, c);
    EXPECT_EQ(NotRoundedOnce(dx, dx_ref), 0);
    EXPECT_EQ(Mismatches(dg, dg_ref), 0);
    EXPECT_EQ(Mismatches(dbias, db_ref), 0);
  }
}

TEST_F(CpuBf16KernelsTest, RopeRotatesInPlaceAndRoundsOnce) {
  const int64_t b = 2, t = 5, heads = 3, d = 4, size = b * t * heads * d;
  Bf16s x = RandomBf16(size, 30);
  Floats x_ref = Widen(x);
  h_.RopeForward(x.data(), b, t, heads, d, 500000.0, 3);
  f_.RopeForward(x_ref.data(), b, t, heads, d, 500000.0, 3);
  EXPECT_EQ(NotRoundedOnce(x, x_ref), 0);
  // Backward from the rounded forward result: the reference starts from the same bf16 values.
  x_ref = Widen(x);
  h_.RopeBackward(x.data(), b, t, heads, d, 500000.0, 3);
  f_.RopeBackward(x_ref.data(), b, t, heads, d, 500000.0, 3);
  EXPECT_EQ(NotRoundedOnce(x, x_ref), 0);
}

TEST_F(CpuBf16KernelsTest, AttentionRoundsOutputsAndAccumulatesGradients) {
  const AttentionDims dims{.batch = 2, .seq = 4, .heads = 4, .kv_heads = 2, .head_dim = 3};
  const int64_t nq = 2 * 4 * 4 * 3, nkv = 2 * 4 * 2 * 3, np = 2 * 4 * 4 * 4;
  const Bf16s q = RandomBf16(nq, 40), k = RandomBf16(nkv, 41), v = RandomBf16(nkv, 42);
  Bf16s probs(np), out(nq);
  Floats probs_ref(np), out_ref(nq);
  h_.AttentionForward(q.data(), k.data(), v.data(), probs.data(), out.data(), dims);
  f_.AttentionForward(Widen(q).data(), Widen(k).data(), Widen(v).data(), probs_ref.data(),
                      out_ref.data(), dims);
  EXPECT_EQ(NotRoundedOnce(probs, probs_ref), 0);
  EXPECT_EQ(NotRoundedOnce(out, out_ref), 0);

  // The backward reads the saved bf16 probabilities; the reference reads them widened.
  const Bf16s dout = RandomBf16(nq, 43);
  Bf16s dq = RandomBf16(nq, 44), dk = RandomBf16(nkv, 45), dv = RandomBf16(nkv, 46);
  Floats dq_ref = Widen(dq), dk_ref = Widen(dk), dv_ref = Widen(dv);
  h_.AttentionBackward(dout.data(), q.data(), k.data(), v.data(), probs.data(), dq.data(),
                       dk.data(), dv.data(), dims);
  f_.AttentionBackward(Widen(dout).data(), Widen(q).data(), Widen(k).data(), Widen(v).data(),
                       Widen(probs).data(), dq_ref.data(), dk_ref.data(), dv_ref.data(), dims);
  EXPECT_EQ(NotRoundedOnce(dq, dq_ref), 0);
  EXPECT_EQ(NotRoundedOnce(dk, dk_ref), 0);
  EXPECT_EQ(NotRoundedOnce(dv, dv_ref), 0);
}

TEST_F(CpuBf16KernelsTest, ActivationsRoundOnceAndAccumulateGradients) {
  const int64_t n = 33;
  const Bf16s x = RandomBf16(n, 50, 2.0f), u = RandomBf16(n, 51), dy = RandomBf16(n, 52);
  Bf16s y(n);
  Floats y_ref(n);
  h_.GeluForward(x.data(), y.data(), n);
  f_.GeluForward(Widen(x).data(), y_ref.data(), n);
  EXPECT_EQ(NotRoundedOnce(y, y_ref), 0);
  Bf16s dx = RandomBf16(n, 53);
  Floats dx_ref = Widen(dx);
  h_.GeluBackward(dy.data(), x.data(), dx.data(), n);
  f_.GeluBackward(Widen(dy).data(), Widen(x).data(), dx_ref.data(), n);
  EXPECT_EQ(NotRoundedOnce(dx, dx_ref), 0);

  h_.SwigluForward(x.data(), u.data(), y.data(), n);
  f_.SwigluForward(Widen(x).data(), Widen(u).data(), y_ref.data(), n);
  EXPECT_EQ(NotRoundedOnce(y, y_ref), 0);
  Bf16s dg = RandomBf16(n, 54), du = RandomBf16(n, 55);
  Floats dg_ref = Widen(dg), du_ref = Widen(du);
  h_.SwigluBackward(dy.data(), x.data(), u.data(), dg.data(), du.data(), n);
  f_.SwigluBackward(Widen(dy).data(), Widen(x).data(), Widen(u).data(), dg_ref.data(),
                    du_ref.data(), n);
  EXPECT_EQ(NotRoundedOnce(dg, dg_ref), 0);
  EXPECT_EQ(NotRoundedOnce(du, du_ref), 0);
}

TEST_F(CpuBf16KernelsTest, CrossEntropyInPlaceMatchesTheFp32KernelRoundedOnce) {
  const int64_t n = 6, v = 11;
  const Bf16s logits = RandomBf16(n * v, 60, 3.0f);
  const std::vector<int32_t> targets = {0, 10, 3, 3, 7, 5};
  // probs == logits for the bf16 kernel; a separate fp32 output for the reference. The loss
  // is the fp32 kernel's (from the widened logits), not rounded.
  Bf16s buffer = logits;
  Floats probs_ref(n * v);
  const double loss = h_.SoftmaxCrossEntropy(buffer.data(), targets.data(), buffer.data(), n, v);
  const double loss_ref =
      f_.SoftmaxCrossEntropy(Widen(logits).data(), targets.data(), probs_ref.data(), n, v);
  EXPECT_EQ(loss, loss_ref);
  EXPECT_EQ(NotRoundedOnce(buffer, probs_ref), 0);

  // dlogits == probs: (scale / mean_over) (p - onehot), from the rounded probabilities.
  Floats d_ref = Widen(buffer);
  h_.CrossEntropyBackward(buffer.data(), targets.data(), 0.5f, 12, buffer.data(), n, v, 0);
  f_.CrossEntropyBackward(d_ref.data(), targets.data(), 0.5f, 12, d_ref.data(), n, v, 0);
  EXPECT_EQ(NotRoundedOnce(buffer, d_ref), 0);
}

TEST_F(CpuBf16KernelsTest, VocabParallelSoftmaxInPlace) {
  // One rank's half (v = 6 of 12 columns, vocab_begin 6): stats are fp32 and exact; the
  // in-place exponentiation rounds once.
  const int64_t n = 4, v = 6, begin = 6;
  const Bf16s logits = RandomBf16(n * v, 70, 2.0f);
  const std::vector<int32_t> targets = {7, 1, 11, 6};
  Floats stats(n * 3), stats_ref(n * 3);
  h_.VocabParallelStats(logits.data(), targets.data(), begin, stats.data(), n, v);
  f_.VocabParallelStats(Widen(logits).data(), targets.data(), begin, stats_ref.data(), n, v);
  EXPECT_EQ(Mismatches(stats, stats_ref), 0);
  Floats lse(n);
  (void)k_.VocabParallelLogSumExp(stats.data(), 1, lse.data(), n);
  Bf16s z = logits;
  Floats z_ref = Widen(logits);
  h_.SoftmaxFromLogSumExp(z.data(), lse.data(), n, v);
  f_.SoftmaxFromLogSumExp(z_ref.data(), lse.data(), n, v);
  EXPECT_EQ(NotRoundedOnce(z, z_ref), 0);
}

TEST_F(CpuBf16KernelsTest, VectorOpsAccumulateInFp32AndRoundOnce) {
  const int64_t n = 3, c = 8;
  Bf16s a = RandomBf16(n * c, 80);
  const Bf16s b = RandomBf16(n * c, 81), bias = RandomBf16(c, 82);
  Floats a_ref = Widen(a);
  h_.Add(a.data(), b.data(), n * c);
  f_.Add(a_ref.data(), Widen(b).data(), n * c);
  EXPECT_EQ(NotRoundedOnce(a, a_ref), 0);
  // dst == src: each element doubled, exactly (a doubling of a bf16 is a bf16).
  const Bf16s before = a;
  h_.Add(a.data(), a.data(), n * c);
  for (int64_t i = 0; i < n * c; ++i) EXPECT_EQ(ToFloat(a[i]), 2 * ToFloat(before[i])) << i;

  a_ref = Widen(a);
  h_.AddRowBias(a.data(), bias.data(), n, c);
  f_.AddRowBias(a_ref.data(), Widen(bias).data(), n, c);
  EXPECT_EQ(NotRoundedOnce(a, a_ref), 0);

  Floats sums(c, 1.0f), sums_ref(c, 1.0f);
  h_.AddColumnSums(a.data(), sums.data(), n, c);
  f_.AddColumnSums(Widen(a).data(), sums_ref.data(), n, c);
  EXPECT_EQ(Mismatches(sums, sums_ref), 0);
}

// The widened copies are scratch reused between calls: a large call then a small one (and the
// reverse) must not mix their contents.
TEST_F(CpuBf16KernelsTest, ScratchReuseAcrossCallsOfDifferentSizes) {
  for (int64_t n : {64, 3, 17}) {
    const Bf16s x = RandomBf16(n, 90 + static_cast<uint32_t>(n));
    Bf16s y(n);
    Floats y_ref(n);
    h_.GeluForward(x.data(), y.data(), n);
    f_.GeluForward(Widen(x).data(), y_ref.data(), n);
    EXPECT_EQ(NotRoundedOnce(y, y_ref), 0) << n;
  }
}

}  // namespace
}  // namespace shardsim::runtime
