// CudaKernels' bf16 kernels (kernels().bf16()) against the CPU's bf16 reference
// (CpuKernels().bf16(), runtime/cpu/cpu_bf16_kernels.h: widen, run the fp32 kernel, round each
// output once), on the same bf16-representable random inputs, and CastToBf16 against ToBf16.
// Each test skips when no GPU is visible.
//
// Tolerances (|gpu - cpu| <= tol * (1 + |cpu|), as cuda_kernels_test.cc):
//   kBf16   1e-2  bf16 outputs: the bf16 criterion. The GPU and the CPU compute the same
//                 fp32 value up to fp32 rounding (1e-4 at most, cuda_kernels_test.cc's kSum)
//                 and each round it once to bf16, whose step is 2^-8 = 3.9e-3 relative
//                 (2^-7 = 7.8e-3 of the binade's lower end); when the two fp32 values straddle
//                 a rounding boundary they land one step apart, within 1e-2 (1 + |x|). Where the
//                 GPU rounds an intermediate to bf16 for a tensor-op GEMM (attention's P in
//                 O = P V, and dS in dQ = dS K, dK = dS^T Q, as FlashAttention does), that adds
//                 at most 2^-9 sum |P||V| <= 2e-3 (|V| <= 1) to out, and a random-signed sum of
//                 2^-9 |dS||K| terms, ~1e-3 here, to dq and dk: still inside 1e-2;
//   kExact  0     a bf16 output of the same fp32 operations in the same order (one add, one
//                 product): the same float rounds to the same bf16;
//   kSum    1e-4  fp32 outputs (weight and bias gradients, norm and softmax statistics) from bf16
//                 inputs, which widen exactly: the fp32 kernels' tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "tests/cuda/cuda_kernels_test_util.h"

namespace shardsim::runtime {
namespace {

using cuda_test::AttentionCase;
using cuda_test::CausalLogSumExp;
using cuda_test::CudaKernelsTest;
using cuda_test::ExpectClose;
using cuda_test::Random;
using cuda_test::RoundToBf16;
using cuda_test::Tokens;
using cuda_test::Widen;

constexpr float kExact = 0.0f;
constexpr float kSum = 1e-4f;
constexpr float kBf16 = 1e-2f;

// Random bf16 values (uniform in [lo, hi), rounded).
std::vector<Bf16> RandomBf16(int64_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  return RoundToBf16(Random(n, seed, lo, hi));
}

class CudaBf16KernelsTest : public CudaKernelsTest {
 protected:
  TypedKernels<Bf16>& gpu16() { return gpu().bf16(); }
  TypedKernels<Bf16>& cpu16() { return cpu_.bf16(); }
};

// As the fp32 Embedding test: shard [10, 30) of 50 tokens, with and without positions.
// out = wte + wpe is one fp32 add rounded once on both sides; dwte, dwpe (fp32) add the widened
// dout in the CPU's row order: exact.
TEST_F(CudaBf16KernelsTest, Embedding) {
  const int64_t n = 24, c = 33, seq = 8, row0 = 8, vocab_begin = 10, vocab = 20;
  const auto tokens = Tokens(n, 50, 1);
  const auto wte = RandomBf16(vocab * c, 2), wpe = RandomBf16(seq * c, 3);
  const auto dout = RandomBf16(n * c, 4);
  for (const bool positions : {true, false}) {
    std::vector<Bf16> out(n * c);
    std::vector<float> dwte = Random(vocab * c, 5), dwpe = Random(seq * c, 6);
    const Bf16* wpe_d = positions ? Up(wpe) : nullptr;
    Bf16* out_d = Up(out);
    float* dwte_d = Up(dwte);
    float* dwpe_d = positions ? Up(dwpe) : nullptr;
    gpu16().EmbeddingForward(Up(tokens), Up(wte), vocab_begin, vocab, wpe_d, out_d, n, row0, seq,
                             c);
    gpu16().EmbeddingBackward(Up(dout), Up(tokens), dwte_d, vocab_begin, vocab, dwpe_d, n, row0,
                              seq, c);
    cpu16().EmbeddingForward(tokens.data(), wte.data(), vocab_begin, vocab,
                             positions ? wpe.data() : nullptr, out.data(), n, row0, seq, c);
    cpu16().EmbeddingBackward(dout.data(), tokens.data(), dwte.data(), vocab_begin, vocab,
                              positions ? dwpe.data() : nullptr, n, row0, seq, c);
    ExpectClose(Down(out_d, n * c), Widen(out), kExact, "out");
    ExpectClose(Down(dwte_d, vocab * c), dwte, kExact, "dwte");
    if (positions) ExpectClose(Down(dwpe_d, seq * c), dwpe, kExact, "dwpe");
  }
}

// c = 300: a ragged tail in each row's reduction. The backward takes the CPU's statistics on
// both sides, so it is compared on its own.
TEST_F(CudaBf16KernelsTest, Norms) {
  const int64_t n = 16, c = 300;
  const auto x = RandomBf16(n * c, 10, -2.0f, 3.0f), gain = RandomBf16(c, 11);
  const auto bias = RandomBf16(c, 12), dout = RandomBf16(n * c, 13);
  for (const Norm kind : {Norm::kLayerNorm, Norm::kRmsNorm}) {
    const bool ln = kind == Norm::kLayerNorm;
    std::vector<Bf16> out(n * c), dx = RandomBf16(n * c, 14);
    std::vector<float> mean(n), rstd(n), dgain = Random(c, 15), dbias = Random(c, 16);
    Bf16 *out_d = Up(out), *dx_d = Up(dx);
    float *mean_d = Up(mean), *rstd_d = Up(rstd), *dgain_d = Up(dgain), *dbias_d = Up(dbias);
    const Bf16* x_d = Up(x);
    const Bf16* gain_d = Up(gain);
    gpu16().NormForward(kind, x_d, gain_d, ln ? Up(bias) : nullptr, out_d, mean_d, rstd_d, n, c);
    cpu16().NormForward(kind, x.data(), gain.data(), ln ? bias.data() : nullptr, out.data(),
                        mean.data(), rstd.data(), n, c);
    const std::string name = ln ? "layernorm " : "rmsnorm ";
    ExpectClose(Down(out_d, n * c), Widen(out), kBf16, name + "out");
    if (ln) ExpectClose(Down(mean_d, n), mean, kSum, name + "mean");
    ExpectClose(Down(rstd_d, n), rstd, kSum, name + "rstd");

    gpu16().NormBackward(kind, Up(dout), x_d, gain_d, Up(mean), Up(rstd), dx_d, dgain_d,
                         ln ? dbias_d : nullptr, n, c);
    cpu16().NormBackward(kind, dout.data(), x.data(), gain.data(), mean.data(), rstd.data(),
                         dx.data(), dgain.data(), ln ? dbias.data() : nullptr, n, c);
    ExpectClose(Down(dx_d, n * c), Widen(dx), kBf16, name + "dx");
    ExpectClose(Down(dgain_d, c), dgain, kSum, name + "dgain");
    if (ln) ExpectClose(Down(dbias_d, c), dbias, kSum, name + "dbias");
  }
}

// Odd sizes (no dimension a multiple of the tensor-op tiles); din (bf16) and dw, db (fp32)
// accumulate into non-zero buffers. dw is the bf16-input, fp32-output GEMM: products of bf16
// values are exact in fp32, so only the summation order differs from the CPU's (kSum).
TEST_F(CudaBf16KernelsTest, Linear) {
  const int64_t n = 37, k = 64, m = 45;
  const auto in = RandomBf16(n * k, 20), w = RandomBf16(m * k, 21), bias = RandomBf16(m, 22);
  const auto dout = RandomBf16(n * m, 23);
  for (const bool with_bias : {true, false}) {
    std::vector<Bf16> out(n * m), din = RandomBf16(n * k, 24);
    std::vector<float> dw = Random(m * k, 25), db = Random(m, 26);
    Bf16 *out_d = Up(out), *din_d = Up(din);
    float *dw_d = Up(dw), *db_d = Up(db);
    const Bf16* in_d = Up(in);
    const Bf16* w_d = Up(w);
    const Bf16* bias_d = with_bias ? Up(bias) : nullptr;
    gpu16().LinearForward(in_d, w_d, bias_d, out_d, n, k, m);
    gpu16().LinearBackward(Up(dout), in_d, w_d, din_d, dw_d, with_bias ? db_d : nullptr, n, k, m);
    cpu16().LinearForward(in.data(), w.data(), with_bias ? bias.data() : nullptr, out.data(), n, k,
                          m);
    cpu16().LinearBackward(dout.data(), in.data(), w.data(), din.data(), dw.data(),
                           with_bias ? db.data() : nullptr, n, k, m);
    const std::string name = with_bias ? "bias " : "no bias ";
    ExpectClose(Down(out_d, n * m), Widen(out), kBf16, name + "out");
    ExpectClose(Down(din_d, n * k), Widen(din), kBf16, name + "din");
    ExpectClose(Down(dw_d, m * k), dw, kSum, name + "dw");
    ExpectClose(Down(db_d, m), db, kSum, name + "db");
  }
  // No input gradient (the first layer): dw alone accumulates.
  std::vector<float> dw = Random(m * k, 27);
  float* dw_d = Up(dw);
  gpu16().LinearBackward(Up(dout), Up(in), Up(w), nullptr, dw_d, nullptr, n, k, m);
  cpu16().LinearBackward(dout.data(), in.data(), w.data(), nullptr, dw.data(), nullptr, n, k, m);
  ExpectClose(Down(dw_d, m * k), dw, kSum, "dw without din");
}

TEST_F(CudaBf16KernelsTest, Rope) {
  const int64_t b = 2, t = 7, heads = 3, d = 16, n = b * t * heads * d;
  std::vector<Bf16> x = RandomBf16(n, 30), dx = RandomBf16(n, 31);
  Bf16 *x_d = Up(x), *dx_d = Up(dx);
  // Positions 5..11 (a context-parallel chunk's), as the CPU rotates them.
  gpu16().RopeForward(x_d, b, t, heads, d, 500000.0, 5);
  gpu16().RopeBackward(dx_d, b, t, heads, d, 500000.0, 5);
  cpu16().RopeForward(x.data(), b, t, heads, d, 500000.0, 5);
  cpu16().RopeBackward(dx.data(), b, t, heads, d, 500000.0, 5);
  ExpectClose(Down(x_d, n), Widen(x), kBf16, "x");
  ExpectClose(Down(dx_d, n), Widen(dx), kBf16, "dx");
}

// GQA groups of 8, 4, 2 and 1 query heads per KV head, T = 9, as the fp32 test. The backward
// takes the CPU's probabilities on both sides, so it is compared on its own.
TEST_F(CudaBf16KernelsTest, Attention) {
  for (const int64_t kv_heads : {1, 2, 4, 8}) {
    const AttentionCase c(kv_heads);
    const AttentionDims& dims = c.dims;
    const int64_t nq = c.nq, nk = c.nk, np = dims.batch * dims.heads * dims.seq * dims.seq;
    const auto q = RoundToBf16(c.q), k = RoundToBf16(c.k), v = RoundToBf16(c.v);
    const auto dout = RoundToBf16(c.dout);
    std::vector<Bf16> probs(np), out(nq), dq = RoundToBf16(c.dq), dk = RoundToBf16(c.dk);
    std::vector<Bf16> dv = RoundToBf16(c.dv);
    Bf16 *probs_d = Up(probs), *out_d = Up(out), *dq_d = Up(dq), *dk_d = Up(dk), *dv_d = Up(dv);
    const Bf16 *q_d = Up(q), *k_d = Up(k), *v_d = Up(v);
    gpu16().AttentionForward(q_d, k_d, v_d, probs_d, out_d, dims);
    cpu16().AttentionForward(q.data(), k.data(), v.data(), probs.data(), out.data(), dims);
    const std::string name = c.Name();
    const auto gpu_probs = Down(probs_d, np);
    for (int64_t i = 0; i < np; ++i) {  // the causal mask is exactly 0
      const int64_t t = (i / dims.seq) % dims.seq, col = i % dims.seq;
      if (col > t) {
        ASSERT_EQ(gpu_probs[i], 0.0f) << name << "probs[" << i << "] is masked";
      }
    }
    ExpectClose(gpu_probs, Widen(probs), kBf16, name + "probs");
    ExpectClose(Down(out_d, nq), Widen(out), kBf16, name + "out");

    gpu16().AttentionBackward(Up(dout), q_d, k_d, v_d, Up(probs), dq_d, dk_d, dv_d, dims);
    cpu16().AttentionBackward(dout.data(), q.data(), k.data(), v.data(), probs.data(), dq.data(),
                              dk.data(), dv.data(), dims);
    ExpectClose(Down(dq_d, nq), Widen(dq), kBf16, name + "dq");
    ExpectClose(Down(dk_d, nk), Widen(dk), kBf16, name + "dk");
    ExpectClose(Down(dv_d, nk), Widen(dv), kBf16, name + "dv");
  }
}

// The flash variant, bf16, on Attention's shapes and inputs. Forward: out (kBf16, as Attention:
// the GPU rounds P to bf16 for O = P V, the CPU reference keeps it fp32) and lse (fp32, from
// exactly widened inputs: kSum) against the CPU's flash forward, lse also against
// CausalLogSumExp (double). Backward: both sides take the CPU's out and lse. Beyond Attention's
// backward, the GPU also rounds its recomputed P to bf16 (2^-9 relative) for dV = P^T dO and
// dS = P (dP - D), where the CPU keeps it fp32: on dv a random-signed sum of 2^-9 P |dO| terms
// over the group's heads and later queries (up to 8 x 9 terms here; a double-precision model of
// these shapes with kv_heads 1 gave at most 3.7e-3 (1 + |dv|) over 5 draws), and on dq, dk a
// second 2^-9 relative rounding of dS beside the one Attention's comment counts (~1e-3): inside
// kBf16, with less margin on dv than Attention has.
TEST_F(CudaBf16KernelsTest, FlashAttention) {
  for (const int64_t kv_heads : {1, 2, 4, 8}) {
    const AttentionCase c(kv_heads);
    const AttentionDims& dims = c.dims;
    const int64_t nq = c.nq, nk = c.nk, nl = dims.batch * dims.heads * dims.seq;
    const auto q = RoundToBf16(c.q), k = RoundToBf16(c.k), v = RoundToBf16(c.v);
    const auto dout = RoundToBf16(c.dout);
    std::vector<float> lse(nl);
    std::vector<Bf16> out(nq), dq = RoundToBf16(c.dq), dk = RoundToBf16(c.dk);
    std::vector<Bf16> dv = RoundToBf16(c.dv);
    float* lse_d = Up(std::vector<float>(nl));
    Bf16 *out_d = Up(out), *dq_d = Up(dq), *dk_d = Up(dk), *dv_d = Up(dv);
    const Bf16 *q_d = Up(q), *k_d = Up(k), *v_d = Up(v);
    gpu16().FlashAttentionForward(q_d, k_d, v_d, lse_d, out_d, dims);
    cpu16().FlashAttentionForward(q.data(), k.data(), v.data(), lse.data(), out.data(), dims);
    const std::string name = c.Name();
    const auto gpu_lse = Down(lse_d, nl);
    ExpectClose(gpu_lse, lse, kSum, name + "lse");
    ExpectClose(gpu_lse, CausalLogSumExp(Widen(q), Widen(k), dims), kSum, name + "lse (double)");
    ExpectClose(Down(out_d, nq), Widen(out), kBf16, name + "out");

    gpu16().FlashAttentionBackward(Up(dout), q_d, k_d, v_d, Up(out), Up(lse), dq_d, dk_d, dv_d,
                                   dims);
    cpu16().FlashAttentionBackward(dout.data(), q.data(), k.data(), v.data(), out.data(),
                                   lse.data(), dq.data(), dk.data(), dv.data(), dims);
    ExpectClose(Down(dq_d, nq), Widen(dq), kBf16, name + "dq");
    ExpectClose(Down(dk_d, nk), Widen(dk), kBf16, name + "dk");
    ExpectClose(Down(dv_d, nk), Widen(dv), kBf16, name + "dv");
  }
}

TEST_F(CudaBf16KernelsTest, GeluAndSwiglu) {
  const int64_t n = 1000;
  const auto a = RandomBf16(n, 50, -5, 5), b = RandomBf16(n, 51, -3, 3);
  const auto dout = RandomBf16(n, 52);
  std::vector<Bf16> gelu(n), dgelu = RandomBf16(n, 53), swiglu(n), dgate = RandomBf16(n, 54);
  std::vector<Bf16> dup = RandomBf16(n, 55);
  Bf16 *gelu_d = Up(gelu), *dgelu_d = Up(dgelu), *swiglu_d = Up(swiglu);
  Bf16 *dgate_d = Up(dgate), *dup_d = Up(dup);
  const Bf16 *a_d = Up(a), *b_d = Up(b), *dout_d = Up(dout);
  gpu16().GeluForward(a_d, gelu_d, n);
  gpu16().GeluBackward(dout_d, a_d, dgelu_d, n);
  gpu16().SwigluForward(a_d, b_d, swiglu_d, n);
  gpu16().SwigluBackward(dout_d, a_d, b_d, dgate_d, dup_d, n);
  cpu16().GeluForward(a.data(), gelu.data(), n);
  cpu16().GeluBackward(dout.data(), a.data(), dgelu.data(), n);
  cpu16().SwigluForward(a.data(), b.data(), swiglu.data(), n);
  cpu16().SwigluBackward(dout.data(), a.data(), b.data(), dgate.data(), dup.data(), n);
  ExpectClose(Down(gelu_d, n), Widen(gelu), kBf16, "gelu");
  ExpectClose(Down(dgelu_d, n), Widen(dgelu), kBf16, "dgelu");
  ExpectClose(Down(swiglu_d, n), Widen(swiglu), kBf16, "swiglu");
  ExpectClose(Down(dgate_d, n), Widen(dgate), kBf16, "dgate");
  ExpectClose(Down(dup_d, n), Widen(dup), kBf16, "dup");
}

// In place (probs == logits), as the executor calls it; the loss is a double sum of fp32 row
// losses computed from the same widened logits (1e-6 relative, as the fp32 test). Then the
// backward of a shard [100, 100 + v) with mean over 2n tokens: one product and one subtraction
// per element, in the CPU's order: exact.
TEST_F(CudaBf16KernelsTest, SoftmaxCrossEntropy) {
  const int64_t n = 12, v = 257;
  const auto targets = Tokens(n, static_cast<int32_t>(v), 61);
  std::vector<Bf16> probs = RandomBf16(n * v, 60, -4, 4);
  Bf16* probs_d = Up(probs);
  const double gpu_loss = gpu16().SoftmaxCrossEntropy(probs_d, Up(targets), probs_d, n, v);
  const double cpu_loss =
      cpu16().SoftmaxCrossEntropy(probs.data(), targets.data(), probs.data(), n, v);
  EXPECT_NEAR(gpu_loss, cpu_loss, 1e-6 * std::fabs(cpu_loss));
  ExpectClose(Down(probs_d, n * v), Widen(probs), kBf16, "probs");

  const auto shard_targets = Tokens(n, 400, 62);  // some in [100, 357), some not
  const auto p = RandomBf16(n * v, 63, 0, 1);
  std::vector<Bf16> dlogits(n * v);
  Bf16* dlogits_d = Up(dlogits);
  gpu16().CrossEntropyBackward(Up(p), Up(shard_targets), 0.5f, 2 * n, dlogits_d, n, v, 100);
  cpu16().CrossEntropyBackward(p.data(), shard_targets.data(), 0.5f, 2 * n, dlogits.data(), n, v,
                               100);
  ExpectClose(Down(dlogits_d, n * v), Widen(dlogits), kExact, "dlogits");
}

// Three vocabulary shards of 100: each shard's fp32 statistics from bf16 logits, and the
// probabilities from the (fp32, shared) log-sum-exp, rounded once.
TEST_F(CudaBf16KernelsTest, VocabParallelCrossEntropy) {
  const int64_t n = 10, v = 100, tp = 3;
  const auto targets = Tokens(n, static_cast<int32_t>(tp * v), 70);
  std::vector<float> all_stats(tp * n * 3);
  std::vector<std::vector<Bf16>> shards;
  for (int64_t r = 0; r < tp; ++r) {
    shards.push_back(RandomBf16(n * v, 71 + r, -4, 4));
    std::vector<float> stats(n * 3);
    float* stats_d = Up(stats);
    gpu16().VocabParallelStats(Up(shards[r]), Up(targets), r * v, stats_d, n, v);
    cpu16().VocabParallelStats(shards[r].data(), targets.data(), r * v, stats.data(), n, v);
    ExpectClose(Down(stats_d, n * 3), stats, kSum, "stats of shard " + std::to_string(r));
    std::copy(stats.begin(), stats.end(), all_stats.begin() + r * n * 3);
  }
  std::vector<float> lse(n);
  cpu_.VocabParallelLogSumExp(all_stats.data(), tp, lse.data(), n);
  std::vector<Bf16> z = shards[1];
  Bf16* z_d = Up(z);
  gpu16().SoftmaxFromLogSumExp(z_d, Up(lse), n, v);
  cpu16().SoftmaxFromLogSumExp(z.data(), lse.data(), n, v);
  ExpectClose(Down(z_d, n * v), Widen(z), kBf16, "probs");
}

// Add and AddRowBias: one fp32 add of widened values, rounded once, on both sides: exact.
// Column sums (fp32 out) from widened values, in chunks of rows: kSum.
TEST_F(CudaBf16KernelsTest, ElementwiseHelpers) {
  const int64_t n = 130, c = 300;  // three chunks of the column sums (64, 64, 2)
  const auto src = RandomBf16(n * c, 80), bias = RandomBf16(c, 81);
  std::vector<Bf16> dst = RandomBf16(n * c, 82);
  std::vector<float> sums = Random(c, 83);
  Bf16* dst_d = Up(dst);
  float* sums_d = Up(sums);
  gpu16().Add(dst_d, Up(src), n * c);
  gpu16().AddRowBias(dst_d, Up(bias), n, c);
  gpu16().AddColumnSums(dst_d, sums_d, n, c);
  cpu16().Add(dst.data(), src.data(), n * c);
  cpu16().AddRowBias(dst.data(), bias.data(), n, c);
  cpu16().AddColumnSums(dst.data(), sums.data(), n, c);
  ExpectClose(Down(dst_d, n * c), Widen(dst), kExact, "dst");
  ExpectClose(Down(sums_d, c), sums, kSum, "column sums");
}

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// The master-to-working-copy cast: bitwise ToBf16 (round to nearest, ties to even) on random
// values and on the edges: exact ties (0x3f808000 lies halfway between two bf16 values and
// rounds to the even one; 0x3f818000 rounds up to the even one), the largest values that round
// down and up at the top of the range (0x7f7f7fff stays finite, 0x7f7f8000 overflows to
// infinity), infinities, signed zeros and subnormals. NaN is only required to stay a NaN:
// the device's conversion returns the canonical NaN, ToBf16 keeps the payload's top bits.
TEST_F(CudaBf16KernelsTest, CastToBf16) {
  std::vector<float> src = Random(100000, 90, -1e4f, 1e4f);
  for (const uint32_t u : {0x3f808000u, 0x3f818000u, 0x3f80c000u, 0xbf808000u, 0x7f7f7fffu,
                           0x7f7f8000u, 0xff7f8000u, 0x7f800000u, 0xff800000u, 0x00000000u,
                           0x80000000u, 0x00000001u, 0x00008000u, 0x00018000u, 0x807fffffu}) {
    src.push_back(FromBits(u));
  }
  const int64_t n = static_cast<int64_t>(src.size());
  std::vector<Bf16> dst(src.size());
  Bf16* dst_d = Up(dst);
  gpu().CastToBf16(Up(src), dst_d, n);
  const std::vector<Bf16> got = DownOf(dst_d, n);
  int reported = 0;
  for (int64_t i = 0; i < n; ++i) {
    const Bf16 want = ToBf16(src[i]);
    if (got[i].bits != want.bits && reported++ < 5) {
      ADD_FAILURE() << "src[" << i << "] = " << src[i] << " (0x" << std::hex << Bits(src[i])
                    << "): gpu 0x" << got[i].bits << ", ToBf16 0x" << want.bits << std::dec;
    }
  }
  std::vector<float> nan = {std::numeric_limits<float>::quiet_NaN()};
  Bf16* nan_d = Up(RoundToBf16(nan));
  gpu().CastToBf16(Up(nan), nan_d, 1);
  EXPECT_TRUE(std::isnan(ToFloat(DownOf(nan_d, 1)[0])));
  gpu().CastToBf16(Up(src), dst_d, 0);  // nothing to do, nothing touched
  EXPECT_EQ(DownOf(dst_d, n)[0].bits, got[0].bits);
}

}  // namespace
}  // namespace shardsim::runtime
