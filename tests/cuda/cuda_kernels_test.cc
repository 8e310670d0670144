// CudaKernels against CpuKernels, fp32: every fp32 Kernels call (f32() and the fp32-only ones)
// on the same random inputs, on the GPU and on the CPU, compared element by element. Each test
// skips when no GPU is visible. The bf16 kernels: cuda_bf16_kernels_test.cc.
//
// Tolerances (|gpu - cpu| <= tol * (1 + |cpu|), so relative for large values and absolute near
// zero), chosen from how each GPU kernel orders its float operations (cuda_typed_kernels.h,
// cuda_kernels.h):
//   kExact  0     copies, single adds, and per-address accumulations in the CPU's row order
//                 (embedding, cross-entropy backward, Add, Scale, AddRowBias);
//   kUlp    1e-6  the CPU's float operations in its order, where only the device's expf/tanhf/
//                 logf/sqrtf may differ from glibc's by an ulp or two (GELU, SwiGLU, RoPE whose
//                 angles are rounded from double, AdamW, softmax from the log-sum-exp);
//   kSum    1e-4  sums in another order: row reductions (norms, softmax), cuBLAS GEMMs (k <= 300
//                 terms, fp32 rounding ~ k * 6e-8 = 2e-5 worst case, then a softmax or a norm),
//                 column sums; the fp32 tolerance.
// Losses and SumSquares are doubles summed in another tree: relative 1e-6 (losses, whose rows
// are floats) and 1e-12 (SumSquares, whose terms are exact in double).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
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
using cuda_test::Tokens;

constexpr float kExact = 0.0f;
constexpr float kUlp = 1e-6f;
constexpr float kSum = 1e-4f;

// Vocab-parallel shard [10, 30) of a 50-token vocabulary, rows 8.. of sequences of 8, with and
// without learned positions: 1 of 2.5 tokens is this shard's. Copies, and the backward's
// additions per address in the CPU's row order (each of the 20 tokens about 4 times in 200
// rows, each position 25 times): exact.
TEST_F(CudaKernelsTest, Embedding) {
  const int64_t n = 200, c = 33, seq = 8, row0 = 8, vocab_begin = 10, vocab = 20;
  const auto tokens = Tokens(n, 50, 1);
  const auto wte = Random(vocab * c, 2), wpe = Random(seq * c, 3), dout = Random(n * c, 4);
  for (const bool positions : {true, false}) {
    std::vector<float> out(n * c), dwte = Random(vocab * c, 5), dwpe = Random(seq * c, 6);
    const float* wpe_d = positions ? Up(wpe) : nullptr;
    float* out_d = Up(out);
    float* dwte_d = Up(dwte);
    float* dwpe_d = positions ? Up(dwpe) : nullptr;
    gpu().f32().EmbeddingForward(Up(tokens), Up(wte), vocab_begin, vocab, wpe_d, out_d, n, row0,
                                 seq, c);
    gpu().f32().EmbeddingBackward(Up(dout), Up(tokens), dwte_d, vocab_begin, vocab, dwpe_d, n, row0,
                                  seq, c);
    cpu_.f32().EmbeddingForward(tokens.data(), wte.data(), vocab_begin, vocab,
                                positions ? wpe.data() : nullptr, out.data(), n, row0, seq, c);
    cpu_.f32().EmbeddingBackward(dout.data(), tokens.data(), dwte.data(), vocab_begin, vocab,
                                 positions ? dwpe.data() : nullptr, n, row0, seq, c);
    ExpectClose(Down(out_d, n * c), out, kExact, "out");
    ExpectClose(Down(dwte_d, vocab * c), dwte, kExact, "dwte");
    if (positions) ExpectClose(Down(dwpe_d, seq * c), dwpe, kExact, "dwpe");
  }
}

// The vocabulary-parallel boundaries and repeated tokens: ids 9 and 30 sit just outside the
// shard [10, 30) (zero rows, no gradient), 10 and 29 just inside; 12 appears five times, so its
// dwte row receives five additions, which must all land (a racy scatter would lose some) and, in
// the CPU's row order, agree exactly.
TEST_F(CudaKernelsTest, EmbeddingRepeatedTokensAndShardEdges) {
  const int64_t c = 300, seq = 4, row0 = 2, vocab_begin = 10, vocab = 20;
  const std::vector<int32_t> tokens = {12, 9, 12, 30, 10, 12, 29, 12, 0, 12, 49, 29};
  const int64_t n = static_cast<int64_t>(tokens.size());
  const auto wte = Random(vocab * c, 7), wpe = Random(seq * c, 8), dout = Random(n * c, 9);
  std::vector<float> out(n * c), dwte = Random(vocab * c, 10), dwpe = Random(seq * c, 11);
  float *out_d = Up(out), *dwte_d = Up(dwte), *dwpe_d = Up(dwpe);
  const int32_t* tokens_d = Up(tokens);
  gpu().f32().EmbeddingForward(tokens_d, Up(wte), vocab_begin, vocab, Up(wpe), out_d, n, row0, seq,
                               c);
  gpu().f32().EmbeddingBackward(Up(dout), tokens_d, dwte_d, vocab_begin, vocab, dwpe_d, n, row0,
                                seq, c);
  cpu_.f32().EmbeddingForward(tokens.data(), wte.data(), vocab_begin, vocab, wpe.data(), out.data(),
                              n, row0, seq, c);
  cpu_.f32().EmbeddingBackward(dout.data(), tokens.data(), dwte.data(), vocab_begin, vocab,
                               dwpe.data(), n, row0, seq, c);
  ExpectClose(Down(out_d, n * c), out, kExact, "out");
  ExpectClose(Down(dwte_d, vocab * c), dwte, kExact, "dwte");
  ExpectClose(Down(dwpe_d, seq * c), dwpe, kExact, "dwpe");
}

// c = 300 is not a multiple of the 256-thread block, so each row's reduction has a ragged tail;
// n = 150 rows make three chunks of the gain and bias gradients' column sums (64, 64, 22).
TEST_F(CudaKernelsTest, Norms) {
  const int64_t n = 150, c = 300;
  const auto x = Random(n * c, 10, -2.0f, 3.0f), gain = Random(c, 11), bias = Random(c, 12);
  const auto dout = Random(n * c, 13);
  for (const Norm kind : {Norm::kLayerNorm, Norm::kRmsNorm}) {
    const bool ln = kind == Norm::kLayerNorm;
    std::vector<float> out(n * c), mean(n), rstd(n), dx = Random(n * c, 14);
    std::vector<float> dgain = Random(c, 15), dbias = Random(c, 16);
    float *out_d = Up(out), *mean_d = Up(mean), *rstd_d = Up(rstd), *dx_d = Up(dx);
    float *dgain_d = Up(dgain), *dbias_d = Up(dbias);
    const float* x_d = Up(x);
    const float* gain_d = Up(gain);
    gpu().f32().NormForward(kind, x_d, gain_d, ln ? Up(bias) : nullptr, out_d, mean_d, rstd_d, n,
                            c);
    gpu().f32().NormBackward(kind, Up(dout), x_d, gain_d, mean_d, rstd_d, dx_d, dgain_d,
                             ln ? dbias_d : nullptr, n, c);
    cpu_.f32().NormForward(kind, x.data(), gain.data(), ln ? bias.data() : nullptr, out.data(),
                           mean.data(), rstd.data(), n, c);
    cpu_.f32().NormBackward(kind, dout.data(), x.data(), gain.data(), mean.data(), rstd.data(),
                            dx.data(), dgain.data(), ln ? dbias.data() : nullptr, n, c);
    const std::string name = ln ? "layernorm " : "rmsnorm ";
    ExpectClose(Down(out_d, n * c), out, kSum, name + "out");
    if (ln) ExpectClose(Down(mean_d, n), mean, kSum, name + "mean");
    ExpectClose(Down(rstd_d, n), rstd, kSum, name + "rstd");
    ExpectClose(Down(dx_d, n * c), dx, kSum, name + "dx");
    ExpectClose(Down(dgain_d, c), dgain, kSum, name + "dgain");
    if (ln) ExpectClose(Down(dbias_d, c), dbias, kSum, name + "dbias");
  }
}

// Odd sizes, so no dimension is a multiple of cuBLAS's tiles; gradients accumulate into
// non-zero buffers (backend.h's += contract).
TEST_F(CudaKernelsTest, Linear) {
  const int64_t n = 37, k = 64, m = 45;
  const auto in = Random(n * k, 20), w = Random(m * k, 21), bias = Random(m, 22);
  const auto dout = Random(n * m, 23);
  std::vector<float> out(n * m), din = Random(n * k, 24), dw = Random(m * k, 25);
  std::vector<float> db = Random(m, 26);
  float *out_d = Up(out), *din_d = Up(din), *dw_d = Up(dw), *db_d = Up(db);
  const float* in_d = Up(in);
  const float* w_d = Up(w);
  gpu().f32().LinearForward(in_d, w_d, Up(bias), out_d, n, k, m);
  gpu().f32().LinearBackward(Up(dout), in_d, w_d, din_d, dw_d, db_d, n, k, m);
  cpu_.f32().LinearForward(in.data(), w.data(), bias.data(), out.data(), n, k, m);
  cpu_.f32().LinearBackward(dout.data(), in.data(), w.data(), din.data(), dw.data(), db.data(), n,
                            k, m);
  ExpectClose(Down(out_d, n * m), out, kSum, "out");
  ExpectClose(Down(din_d, n * k), din, kSum, "din");
  ExpectClose(Down(dw_d, m * k), dw, kSum, "dw");
  ExpectClose(Down(db_d, m), db, kSum, "db");
}

// The first layer's backward has no input gradient and a bias-free layer no db (both null):
// dw alone accumulates.
TEST_F(CudaKernelsTest, LinearBackwardWithoutDinOrBias) {
  const int64_t n = 19, k = 33, m = 70;
  const auto in = Random(n * k, 27), w = Random(m * k, 28), dout = Random(n * m, 29);
  std::vector<float> out(n * m), dw = Random(m * k, 30);
  float *out_d = Up(out), *dw_d = Up(dw);
  const float* in_d = Up(in);
  const float* w_d = Up(w);
  gpu().f32().LinearForward(in_d, w_d, nullptr, out_d, n, k, m);
  gpu().f32().LinearBackward(Up(dout), in_d, w_d, nullptr, dw_d, nullptr, n, k, m);
  cpu_.f32().LinearForward(in.data(), w.data(), nullptr, out.data(), n, k, m);
  cpu_.f32().LinearBackward(dout.data(), in.data(), w.data(), nullptr, dw.data(), nullptr, n, k, m);
  ExpectClose(Down(out_d, n * m), out, kSum, "out");
  ExpectClose(Down(dw_d, m * k), dw, kSum, "dw");
}

// Forward then backward on one buffer each; the angles reach 6 rad at t = 6, i = 0, and 17 rad
// from position 11 (pos0 = 5: a context-parallel chunk).
TEST_F(CudaKernelsTest, Rope) {
  const int64_t b = 2, t = 7, heads = 3, d = 16, n = b * t * heads * d;
  for (const int64_t pos0 : {0, 5}) {
    std::vector<float> x = Random(n, 30), dx = Random(n, 31);
    float *x_d = Up(x), *dx_d = Up(dx);
    gpu().f32().RopeForward(x_d, b, t, heads, d, 500000.0, pos0);
    gpu().f32().RopeBackward(dx_d, b, t, heads, d, 500000.0, pos0);
    cpu_.f32().RopeForward(x.data(), b, t, heads, d, 500000.0, pos0);
    cpu_.f32().RopeBackward(dx.data(), b, t, heads, d, 500000.0, pos0);
    ExpectClose(Down(x_d, n), x, kUlp, "x");
    ExpectClose(Down(dx_d, n), dx, kUlp, "dx");
  }
}

// GQA with groups of 4 and 2 query heads per KV head, multi-query (one KV head for all 8) and
// plain multi-head attention, T = 9. The query heads of a group are batched in one cuBLAS call
// whose A and C operands step d floats apart inside rows of H*d, and dk/dv take one addition per
// query head of the group: every case checks both.
TEST_F(CudaKernelsTest, Attention) {
  for (const int64_t kv_heads : {1, 2, 4, 8}) {
    AttentionCase c(kv_heads);
    const AttentionDims& dims = c.dims;
    const int64_t np = dims.batch * dims.heads * dims.seq * dims.seq;
    std::vector<float> probs(np), out(c.nq);
    float *probs_d = Up(probs), *out_d = Up(out);
    float *dq_d = Up(c.dq), *dk_d = Up(c.dk), *dv_d = Up(c.dv);
    const float *q_d = Up(c.q), *k_d = Up(c.k), *v_d = Up(c.v);
    gpu().f32().AttentionForward(q_d, k_d, v_d, probs_d, out_d, dims);
    gpu().f32().AttentionBackward(Up(c.dout), q_d, k_d, v_d, probs_d, dq_d, dk_d, dv_d, dims);
    cpu_.f32().AttentionForward(c.q.data(), c.k.data(), c.v.data(), probs.data(), out.data(), dims);
    cpu_.f32().AttentionBackward(c.dout.data(), c.q.data(), c.k.data(), c.v.data(), probs.data(),
                                 c.dq.data(), c.dk.data(), c.dv.data(), dims);
    const std::string name = c.Name();
    const auto gpu_probs = Down(probs_d, np);
    // Causal mask: entry (t, s) of each (T, T) matrix with s > t is exactly 0.
    for (int64_t i = 0; i < np; ++i) {
      const int64_t t = (i / dims.seq) % dims.seq, col = i % dims.seq;
      if (col > t) {
        ASSERT_EQ(gpu_probs[i], 0.0f) << name << "probs[" << i << "] is masked";
      }
    }
    ExpectClose(gpu_probs, probs, kSum, name + "probs");
    ExpectClose(Down(out_d, c.nq), out, kSum, name + "out");
    ExpectClose(Down(dq_d, c.nq), c.dq, kSum, name + "dq");
    ExpectClose(Down(dk_d, c.nk), c.dk, kSum, name + "dk");
    ExpectClose(Down(dv_d, c.nk), c.dv, kSum, name + "dv");
  }
}

// The flash variant (backend.h) on Attention's shapes and inputs: out and the gradients against
// the CPU's flash kernels, lse against theirs and against CausalLogSumExp (double). The GPU
// forms S, P = exp(S - lse) and D = dO . O as the CPU does, summing in another order (cuBLAS,
// block reductions): kSum, as Attention; lse = max + log(sum) likewise. The masked half of the
// recomputed P (exactly 0) is not observable, but a nonzero entry would add terms to dv and dk
// from later keys, far outside kSum.
TEST_F(CudaKernelsTest, FlashAttention) {
  for (const int64_t kv_heads : {1, 2, 4, 8}) {
    AttentionCase c(kv_heads);
    const AttentionDims& dims = c.dims;
    const int64_t nl = dims.batch * dims.heads * dims.seq;
    std::vector<float> lse(nl), out(c.nq);
    float *lse_d = Up(lse), *out_d = Up(out);
    float *dq_d = Up(c.dq), *dk_d = Up(c.dk), *dv_d = Up(c.dv);
    const float *q_d = Up(c.q), *k_d = Up(c.k), *v_d = Up(c.v);
    gpu().f32().FlashAttentionForward(q_d, k_d, v_d, lse_d, out_d, dims);
    gpu().f32().FlashAttentionBackward(Up(c.dout), q_d, k_d, v_d, out_d, lse_d, dq_d, dk_d, dv_d,
                                       dims);
    cpu_.f32().FlashAttentionForward(c.q.data(), c.k.data(), c.v.data(), lse.data(), out.data(),
                                     dims);
    cpu_.f32().FlashAttentionBackward(c.dout.data(), c.q.data(), c.k.data(), c.v.data(), out.data(),
                                      lse.data(), c.dq.data(), c.dk.data(), c.dv.data(), dims);
    const std::string name = c.Name();
    const auto gpu_lse = Down(lse_d, nl);
    ExpectClose(gpu_lse, lse, kSum, name + "lse");
    ExpectClose(gpu_lse, CausalLogSumExp(c.q, c.k, dims), kSum, name + "lse (double)");
    ExpectClose(Down(out_d, c.nq), out, kSum, name + "out");
    ExpectClose(Down(dq_d, c.nq), c.dq, kSum, name + "dq");
    ExpectClose(Down(dk_d, c.nk), c.dk, kSum, name + "dk");
    ExpectClose(Down(dv_d, c.nk), c.dv, kSum, name + "dv");
  }
}

// Context parallelism's attention (AttentionDims::kv_seq, q_offset; runtime/exec/context_parallel.h):
// a chunk of T = 5 queries at positions q_offset.. (0, 4 and 7 of Tk = 12 keys: the first chunk,
// a middle one, the last) against all the keys, unfused and flash, against the CPU's kernels:
// kSum, as Attention. The probabilities (B, H, T, Tk) hold exactly 0 past each query's causal
// limit q_offset + i.
TEST_F(CudaKernelsTest, AttentionOfAQueryChunkAtAnOffset) {
  for (const int64_t q_offset : {0, 4, 7}) {
    AttentionDims dims{.batch = 2, .seq = 5, .heads = 8, .kv_heads = 2, .head_dim = 8};
    dims.kv_seq = 12;
    dims.q_offset = q_offset;
    const int64_t nq = dims.batch * dims.seq * dims.heads * dims.head_dim;
    const int64_t nk = dims.batch * dims.kv_seq * dims.kv_heads * dims.head_dim;
    const std::vector<float> q = Random(nq, 50, -2, 2), k = Random(nk, 51, -2, 2), v = Random(nk, 52),
                             dout = Random(nq, 53);
    const std::string name = "q_offset " + std::to_string(q_offset) + " ";
    for (const bool flash : {false, true}) {
      std::vector<float> dq = Random(nq, 54), dk = Random(nk, 55), dv = Random(nk, 56);
      const int64_t np = dims.batch * dims.heads * dims.seq * dims.kv_seq, nl = dims.batch * dims.heads * dims.seq;
      std::vector<float> probs(flash ? nl : np), out(nq);
      float *probs_d = Up(probs), *out_d = Up(out), *dq_d = Up(dq), *dk_d = Up(dk), *dv_d = Up(dv);
      const float *q_d = Up(q), *k_d = Up(k), *v_d = Up(v), *dout_d = Up(dout);
      if (flash) {
        gpu().f32().FlashAttentionForward(q_d, k_d, v_d, probs_d, out_d, dims);
        gpu().f32().FlashAttentionBackward(dout_d, q_d, k_d, v_d, out_d, probs_d, dq_d, dk_d, dv_d, dims);
        cpu_.f32().FlashAttentionForward(q.data(), k.data(), v.data(), probs.data(), out.data(), dims);
        cpu_.f32().FlashAttentionBackward(dout.data(), q.data(), k.data(), v.data(), out.data(), probs.data(),
                                          dq.data(), dk.data(), dv.data(), dims);
      } else {
        gpu().f32().AttentionForward(q_d, k_d, v_d, probs_d, out_d, dims);
        gpu().f32().AttentionBackward(dout_d, q_d, k_d, v_d, probs_d, dq_d, dk_d, dv_d, dims);
        cpu_.f32().AttentionForward(q.data(), k.data(), v.data(), probs.data(), out.data(), dims);
        cpu_.f32().AttentionBackward(dout.data(), q.data(), k.data(), v.data(), probs.data(), dq.data(), dk.data(),
                                     dv.data(), dims);
        const auto gpu_probs = Down(probs_d, np);
        for (int64_t i = 0; i < np; ++i) {
          const int64_t row = (i / dims.kv_seq) % dims.seq, col = i % dims.kv_seq;
          if (col > q_offset + row) {
            ASSERT_EQ(gpu_probs[i], 0.0f) << name << "probs[" << i << "] is masked";
          }
        }
        ExpectClose(gpu_probs, probs, kSum, name + "probs");
      }
      const std::string kind = name + (flash ? "flash " : "unfused ");
      if (flash) ExpectClose(Down(probs_d, nl), probs, kSum, kind + "lse");
      ExpectClose(Down(out_d, nq), out, kSum, kind + "out");
      ExpectClose(Down(dq_d, nq), dq, kSum, kind + "dq");
      ExpectClose(Down(dk_d, nk), dk, kSum, kind + "dk");
      ExpectClose(Down(dv_d, nk), dv, kSum, kind + "dv");
    }
  }
}

// GELU's backward gets its own tolerance: its term 0.5 x du (1 - th^2), th = tanh(u), turns an
// absolute error e of tanhf (near |th| = 1, 1 ulp = 6e-8; CUDA documents tanhf to 2 ulp, glibc's
// is within 1) into 2 |th| e 0.5 |x| du = |x| du e, up to 5 x 3.47 x 1.2e-7 = 2.1e-6 |dout| at
// |x| = 5: above kUlp's 1e-6 (1 + |dgelu|) where the accumulated dgelu is near 0, for a correct
// kernel. kGeluGrad = 4e-6 covers it with margin and stays far below a wrong formula's error.
constexpr float kGeluGrad = 4e-6f;

TEST_F(CudaKernelsTest, GeluAndSwiglu) {
  const int64_t n = 1000;
  const auto a = Random(n, 50, -5, 5), b = Random(n, 51, -3, 3), dout = Random(n, 52);
  std::vector<float> gelu(n), dgelu = Random(n, 53), swiglu(n), dgate = Random(n, 54);
  std::vector<float> dup = Random(n, 55);
  float *gelu_d = Up(gelu), *dgelu_d = Up(dgelu), *swiglu_d = Up(swiglu);
  float *dgate_d = Up(dgate), *dup_d = Up(dup);
  const float *a_d = Up(a), *b_d = Up(b), *dout_d = Up(dout);
  gpu().f32().GeluForward(a_d, gelu_d, n);
  gpu().f32().GeluBackward(dout_d, a_d, dgelu_d, n);
  gpu().f32().SwigluForward(a_d, b_d, swiglu_d, n);
  gpu().f32().SwigluBackward(dout_d, a_d, b_d, dgate_d, dup_d, n);
  cpu_.f32().GeluForward(a.data(), gelu.data(), n);
  cpu_.f32().GeluBackward(dout.data(), a.data(), dgelu.data(), n);
  cpu_.f32().SwigluForward(a.data(), b.data(), swiglu.data(), n);
  cpu_.f32().SwigluBackward(dout.data(), a.data(), b.data(), dgate.data(), dup.data(), n);
  ExpectClose(Down(gelu_d, n), gelu, kUlp, "gelu");
  ExpectClose(Down(dgelu_d, n), dgelu, kGeluGrad, "dgelu");
  ExpectClose(Down(swiglu_d, n), swiglu, kUlp, "swiglu");
  ExpectClose(Down(dgate_d, n), dgate, kUlp, "dgate");
  ExpectClose(Down(dup_d, n), dup, kUlp, "dup");
}

// Whole-vocabulary loss, in place (probs == logits, as the executor calls it), then the
// backward pass of a shard [100, 100 + v) of a larger vocabulary with mean over 2n tokens.
TEST_F(CudaKernelsTest, SoftmaxCrossEntropy) {
  const int64_t n = 12, v = 257;
  const auto logits = Random(n * v, 60, -4, 4);
  const auto targets = Tokens(n, static_cast<int32_t>(v), 61);
  std::vector<float> probs = logits;
  float* probs_d = Up(probs);
  const double gpu_loss = gpu().f32().SoftmaxCrossEntropy(probs_d, Up(targets), probs_d, n, v);
  const double cpu_loss =
      cpu_.f32().SoftmaxCrossEntropy(probs.data(), targets.data(), probs.data(), n, v);
  EXPECT_NEAR(gpu_loss, cpu_loss, 1e-6 * std::fabs(cpu_loss));
  ExpectClose(Down(probs_d, n * v), probs, kSum, "probs");

  const auto shard_targets = Tokens(n, 400, 62);  // some in [100, 357), some not
  const auto p = Random(n * v, 63, 0, 1);
  std::vector<float> dlogits(n * v);
  float* dlogits_d = Up(dlogits);
  gpu().f32().CrossEntropyBackward(Up(p), Up(shard_targets), 0.5f, 2 * n, dlogits_d, n, v, 100);
  cpu_.f32().CrossEntropyBackward(p.data(), shard_targets.data(), 0.5f, 2 * n, dlogits.data(), n, v,
                                  100);
  ExpectClose(Down(dlogits_d, n * v), dlogits, kExact, "dlogits");
}

// Three vocabulary shards of 100: each shard's stats, the combined log-sum-exp and loss, and
// the probabilities from it, against the CPU on the same shards.
TEST_F(CudaKernelsTest, VocabParallelCrossEntropy) {
  const int64_t n = 10, v = 100, tp = 3;
  const auto targets = Tokens(n, static_cast<int32_t>(tp * v), 70);
  std::vector<float> all_stats_cpu(tp * n * 3);
  std::vector<float> all_stats_gpu(tp * n * 3);
  std::vector<std::vector<float>> shards;
  for (int64_t r = 0; r < tp; ++r) {
    shards.push_back(Random(n * v, 71 + r, -4, 4));
    std::vector<float> stats(n * 3);
    float* stats_d = Up(stats);
    gpu().f32().VocabParallelStats(Up(shards[r]), Up(targets), r * v, stats_d, n, v);
    cpu_.f32().VocabParallelStats(shards[r].data(), targets.data(), r * v, stats.data(), n, v);
    const auto got = Down(stats_d, n * 3);
    ExpectClose(got, stats, kSum, "stats of shard " + std::to_string(r));
    std::copy(stats.begin(), stats.end(), all_stats_cpu.begin() + r * n * 3);
    std::copy(got.begin(), got.end(), all_stats_gpu.begin() + r * n * 3);
  }
  // The same (CPU) statistics into both, so the log-sum-exp step is compared on its own.
  std::vector<float> lse(n);
  float* lse_d = Up(lse);
  const double gpu_loss = gpu().VocabParallelLogSumExp(Up(all_stats_cpu), tp, lse_d, n);
  const double cpu_loss = cpu_.VocabParallelLogSumExp(all_stats_cpu.data(), tp, lse.data(), n);
  EXPECT_NEAR(gpu_loss, cpu_loss, 1e-6 * std::fabs(cpu_loss));
  ExpectClose(Down(lse_d, n), lse, kUlp, "lse");
  std::vector<float> z = shards[1];
  float* z_d = Up(z);
  gpu().f32().SoftmaxFromLogSumExp(z_d, Up(lse), n, v);
  cpu_.f32().SoftmaxFromLogSumExp(z.data(), lse.data(), n, v);
  ExpectClose(Down(z_d, n * v), z, kUlp, "probs");
}

TEST_F(CudaKernelsTest, ElementwiseHelpers) {
  const int64_t n = 13, c = 300;
  const auto src = Random(n * c, 80), bias = Random(c, 81);
  std::vector<float> dst = Random(n * c, 82), sums = Random(c, 83);
  float *dst_d = Up(dst), *sums_d = Up(sums);
  gpu().f32().Add(dst_d, Up(src), n * c);
  gpu().f32().AddRowBias(dst_d, Up(bias), n, c);
  gpu().Scale(dst_d, 0.75f, n * c);
  gpu().f32().AddColumnSums(dst_d, sums_d, n, c);
  cpu_.f32().Add(dst.data(), src.data(), n * c);
  cpu_.f32().AddRowBias(dst.data(), bias.data(), n, c);
  cpu_.Scale(dst.data(), 0.75f, n * c);
  cpu_.f32().AddColumnSums(dst.data(), sums.data(), n, c);
  ExpectClose(Down(dst_d, n * c), dst, kExact, "dst");
  ExpectClose(Down(sums_d, c), sums, kSum, "column sums");
}

// 10^6 + 3 elements: many blocks and a ragged tail; terms are exact in double, so only the
// order of ~10^6 double additions differs (relative error ~ 1e-16 * log2(10^6)).
TEST_F(CudaKernelsTest, SumSquares) {
  const int64_t n = 1000003;
  const auto x = Random(n, 90, -3, 3);
  EXPECT_NEAR(gpu().SumSquares(Up(x), n), cpu_.SumSquares(x.data(), n),
              1e-12 * cpu_.SumSquares(x.data(), n));
  EXPECT_EQ(gpu().SumSquares(Up(x), 0), 0.0);
  // Fewer elements than one block, and just past a whole number of blocks and of the grid.
  for (const int64_t m : {int64_t{1}, int64_t{31}, int64_t{257}, int64_t{256 * 256 + 1}}) {
    EXPECT_NEAR(gpu().SumSquares(Up(x), m), cpu_.SumSquares(x.data(), m),
                1e-12 * cpu_.SumSquares(x.data(), m))
        << m << " elements";
  }
}

// Step 3 of a clipped AdamW with weight decay: only multiplications, additions, one sqrt and
// one division per element, in adamw.cc's order, so the results should agree to the ulp.
TEST_F(CudaKernelsTest, AdamW) {
  const int64_t n = 1000;
  const AdamWArgs args{.lr = 1e-3f,
                       .beta1 = 0.9f,
                       .beta2 = 0.95f,
                       .eps = 1e-8f,
                       .weight_decay = 0.1f,
                       .bias_correction1 = 1.0f / (1.0f - 0.9f * 0.9f * 0.9f),
                       .bias_correction2 = 1.0f / (1.0f - 0.95f * 0.95f * 0.95f)};
  std::vector<float> p = Random(n, 100), m = Random(n, 101, -0.1f, 0.1f);
  std::vector<float> v = Random(n, 102, 0, 0.01f);
  const auto g = Random(n, 103);
  float *p_d = Up(p), *m_d = Up(m), *v_d = Up(v);
  gpu().AdamW(p_d, Up(g), m_d, v_d, n, 0.5f, args);
  cpu_.AdamW(p.data(), g.data(), m.data(), v.data(), n, 0.5f, args);
  ExpectClose(Down(p_d, n), p, kUlp, "p");
  ExpectClose(Down(m_d, n), m, kUlp, "m");
  ExpectClose(Down(v_d, n), v, kUlp, "v");
}

// An impossible allocation is an error naming what was asked for, not an abort; the counters
// are unchanged, and memory still works afterwards.
TEST_F(CudaKernelsTest, MemoryOutOfMemoryIsAnError) {
  Memory& mem = backend_->memory();
  const int64_t before = mem.current().total();
  auto huge = mem.Allocate(MemoryKind::kActivations, int64_t{1} << 52, "a 4 PiB tensor");
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("a 4 PiB tensor"), std::string::npos);
  EXPECT_EQ(mem.current().total(), before);
  std::vector<float> x = Random(100, 110);
  float* x_d = Up(x);
  mem.Zero(x_d, 40 * sizeof(float));
  const auto back = Down(x_d, 100);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(back[i], i < 40 ? 0.0f : x[i]) << i;
}

// Buffers are freed and reallocated in stream order (cudaFreeAsync / cudaMallocAsync): a kernel
// enqueued on a buffer that is then freed, and the memory handed out again and overwritten,
// still produces its result first. Also: Copy is ordered after the kernels before it, the
// accounting returns to where it was, the clock advances and the device reports memory in use.
TEST_F(CudaKernelsTest, MemoryStreamOrderedReuse) {
  Memory& mem = backend_->memory();
  const int64_t before = mem.current().total();
  const int64_t n = 1 << 20;
  const auto x = Random(n, 120);
  std::vector<float> result(n);
  float* result_d = Up(result);
  {
    auto a_or = mem.AllocateFloats(MemoryKind::kActivations, n, "a");
    ASSERT_TRUE(a_or.ok());
    DeviceBuffer a = std::move(a_or).value();
    mem.CopyToDevice(a.data(), x.data(), n * static_cast<int64_t>(sizeof(float)));
    gpu().Scale(a.f(), 2.0f, n);
    mem.Copy(result_d, a.data(), n * static_cast<int64_t>(sizeof(float)));
    a.Reset();
    auto b_or = mem.AllocateFloats(MemoryKind::kActivations, n, "b");  // likely a's memory
    ASSERT_TRUE(b_or.ok());
    DeviceBuffer b = std::move(b_or).value();
    mem.Zero(b.data(), n * static_cast<int64_t>(sizeof(float)));
  }
  const auto got = Down(result_d, n);
  for (int64_t i = 0; i < n; i += 4099) EXPECT_EQ(got[i], 2.0f * x[i]) << i;
  EXPECT_EQ(mem.current().total(), before + n * static_cast<int64_t>(sizeof(float)));
  const double t0 = backend_->Now();
  EXPECT_GE(backend_->Now(), t0);
  EXPECT_GT(backend_->DeviceBytesInUse(), 0);
}

}  // namespace
}  // namespace shardsim::runtime
