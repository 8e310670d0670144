// See cpu_bf16_kernels.h. Every kernel has the same three steps: widen the Bf16 arguments
// (Scratch::Wide for inputs and accumulated outputs, Scratch::Take for overwritten outputs),
// call the fp32 kernel on the copies, Narrow each Bf16 output.
#include "runtime/cpu/cpu_bf16_kernels.h"

#include <algorithm>

#include "runtime/cpu/bf16_convert.h"
#include "runtime/cpu/dnnl_gemm.h"
#include "runtime/cpu/row_ops.h"
#include "src/util/check.h"

namespace shardsim::runtime {

// The float buffers of one call, taken in order from the kernels' pool; they stay valid until
// the Scratch is destroyed (the pool's vector may grow, but moving a std::vector keeps its
// elements where they are).
class CpuBf16Kernels::Scratch {
 public:
  explicit Scratch(std::vector<std::vector<float>>& pool) : pool_(pool) {}

  // n floats, contents unspecified: an output the fp32 kernel overwrites.
  float* Take(int64_t n) {
    CHECK(n >= 0) << n;
    if (used_ == pool_.size()) pool_.emplace_back();
    std::vector<float>& b = pool_[used_++];
    // At least one element, so an empty argument is still a non-null pointer (null means
    // "absent" to some kernels: a bias, din).
    const size_t want = static_cast<size_t>(std::max<int64_t>(n, 1));
    if (b.size() < want) b.resize(want);
    return b.data();
  }

  // src (n) widened exactly; nullptr for a null src (an absent optional argument).
  float* Wide(const Bf16* src, int64_t n) {
    if (src == nullptr) return nullptr;
    float* dst = Take(n);
    Bf16ToFloats(src, dst, n);
    return dst;
  }

 private:
  std::vector<std::vector<float>>& pool_;
  size_t used_ = 0;
};

namespace {

// dst (n) = src rounded to nearest even; nothing for a null dst (an absent output).
void Narrow(const float* src, Bf16* dst, int64_t n) {
  if (dst == nullptr) return;
  FloatsToBf16(src, dst, n);
}

// Elements of a (B, T, heads, d) query tensor, of a (B, Tk, heads, d) key one, and of the
// (B, H, T, Tk) probabilities.
int64_t Elements(const AttentionDims& d, int64_t heads) {
  return d.batch * d.seq * heads * d.head_dim;
}
int64_t KeyElements(const AttentionDims& d) { return d.batch * d.keys() * d.kv_heads * d.head_dim; }
int64_t ProbElements(const AttentionDims& d) { return d.batch * d.heads * d.seq * d.keys(); }

}  // namespace

void CpuBf16Kernels::EmbeddingForward(const int32_t* tokens, const Bf16* wte, int64_t vocab_begin,
                                      int64_t vocab, const Bf16* wpe, Bf16* out, int64_t n,
                                      int64_t row0, int64_t seq, int64_t c) {
  Scratch s(buffers_);
  float* out_f = s.Take(n * c);
  f32_.EmbeddingForward(tokens, s.Wide(wte, vocab * c), vocab_begin, vocab, s.Wide(wpe, seq * c),
                        out_f, n, row0, seq, c);
  Narrow(out_f, out, n * c);
}

void CpuBf16Kernels::EmbeddingBackward(const Bf16* dout, const int32_t* tokens, float* dwte,
                                       int64_t vocab_begin, int64_t vocab, float* dwpe, int64_t n,
                                       int64_t row0, int64_t seq, int64_t c) {
  Scratch s(buffers_);
  f32_.EmbeddingBackward(s.Wide(dout, n * c), tokens, dwte, vocab_begin, vocab, dwpe, n, row0, seq,
                         c);
}

void CpuBf16Kernels::NormForward(Norm kind, const Bf16* x, const Bf16* gain, const Bf16* bias,
                                 Bf16* out, float* mean, float* rstd, int64_t n, int64_t c) {
  Scratch s(buffers_);
  float* out_f = s.Take(n * c);
  f32_.NormForward(kind, s.Wide(x, n * c), s.Wide(gain, c), s.Wide(bias, c), out_f, mean, rstd, n,
                   c);
  Narrow(out_f, out, n * c);
}

void CpuBf16Kernels::NormBackward(Norm kind, const Bf16* dout, const Bf16* x, const Bf16* gain,
                                  const float* mean, const float* rstd, Bf16* dx, float* dgain,
                                  float* dbias, int64_t n, int64_t c) {
  Scratch s(buffers_);
  float* dx_f = s.Wide(dx, n * c);  // accumulated
  f32_.NormBackward(kind, s.Wide(dout, n * c), s.Wide(x, n * c), s.Wide(gain, c), mean, rstd, dx_f,
                    dgain, dbias, n, c);
  Narrow(dx_f, dx, n * c);
}

// The linear layers' products on bf16 operands directly where oneDNN is there (dnnl_gemm.h:
// the bf16 values multiplied exactly and summed in fp32, as the widened fp32 product does, in
// another order), else widened.
void CpuBf16Kernels::LinearForward(const Bf16* in, const Bf16* w, const Bf16* bias, Bf16* out,
                                   int64_t n, int64_t k, int64_t m) {
  Scratch s(buffers_);
  float* out_f = s.Take(n * m);
  if (HaveBf16Gemm()) {
    Bf16Gemm(false, true, n, m, k, in, w, out_f, false);  // (n x k) (m x k)^T
    if (bias != nullptr) {
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < m; ++j) out_f[i * m + j] += ToFloat(bias[j]);
      }
    }
  } else {
    f32_.LinearForward(s.Wide(in, n * k), s.Wide(w, m * k), s.Wide(bias, m), out_f, n, k, m);
  }
  Narrow(out_f, out, n * m);
}

void CpuBf16Kernels::LinearBackward(const Bf16* dout, const Bf16* in, const Bf16* w, Bf16* din,
                                    float* dw, float* db, int64_t n, int64_t k, int64_t m) {
  Scratch s(buffers_);
  float* din_f = s.Wide(din, n * k);  // accumulated; null when not needed
  if (HaveBf16Gemm()) {
    if (din_f != nullptr) Bf16Gemm(false, false, n, k, m, dout, w, din_f, true);  // += (n x m) (m x k)
    if (dw != nullptr) Bf16Gemm(true, false, m, k, n, dout, in, dw, true);        // += (n x m)^T (n x k)
    if (db != nullptr) {
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < m; ++j) db[j] += ToFloat(dout[i * m + j]);
      }
    }
  } else {
    // Only what is used is widened: w for din, in for dw.
    f32_.LinearBackward(s.Wide(dout, n * m), s.Wide(dw != nullptr ? in : nullptr, n * k),
                        s.Wide(din != nullptr ? w : nullptr, m * k), din_f, dw, db, n, k, m);
  }
  Narrow(din_f, din, n * k);
}

void CpuBf16Kernels::RopeForward(Bf16* x, int64_t b, int64_t t, int64_t heads, int64_t d, double base, int64_t pos0) {
  Scratch s(buffers_);
  float* x_f = s.Wide(x, b * t * heads * d);  // rotated in place
  f32_.RopeForward(x_f, b, t, heads, d, base, pos0);
  Narrow(x_f, x, b * t * heads * d);
}

void CpuBf16Kernels::RopeBackward(Bf16* dx, int64_t b, int64_t t, int64_t heads, int64_t d, double base, int64_t pos0) {
  Scratch s(buffers_);
  float* dx_f = s.Wide(dx, b * t * heads * d);
  f32_.RopeBackward(dx_f, b, t, heads, d, base, pos0);
  Narrow(dx_f, dx, b * t * heads * d);
}

void CpuBf16Kernels::AttentionForward(const Bf16* q, const Bf16* k, const Bf16* v, Bf16* probs,
                                      Bf16* out, const AttentionDims& dims) {
  Scratch s(buffers_);
  const int64_t nq = Elements(dims, dims.heads), nkv = KeyElements(dims);
  const int64_t np = ProbElements(dims);
  float* probs_f = s.Take(np);
  float* out_f = s.Take(nq);
  f32_.AttentionForward(s.Wide(q, nq), s.Wide(k, nkv), s.Wide(v, nkv), probs_f, out_f, dims);
  Narrow(probs_f, probs, np);
  Narrow(out_f, out, nq);
}

void CpuBf16Kernels::AttentionBackward(const Bf16* dout, const Bf16* q, const Bf16* k,
                                       const Bf16* v, const Bf16* probs, Bf16* dq, Bf16* dk,
                                       Bf16* dv, const AttentionDims& dims) {
  Scratch s(buffers_);
  const int64_t nq = Elements(dims, dims.heads), nkv = KeyElements(dims);
  float* dq_f = s.Wide(dq, nq);  // the three gradients are accumulated
  float* dk_f = s.Wide(dk, nkv);
  float* dv_f = s.Wide(dv, nkv);
  f32_.AttentionBackward(s.Wide(dout, nq), s.Wide(q, nq), s.Wide(k, nkv), s.Wide(v, nkv),
                         s.Wide(probs, ProbElements(dims)), dq_f, dk_f, dv_f, dims);
  Narrow(dq_f, dq, nq);
  Narrow(dk_f, dk, nkv);
  Narrow(dv_f, dv, nkv);
}

void CpuBf16Kernels::FlashAttentionForward(const Bf16* q, const Bf16* k, const Bf16* v,
                                           float* lse, Bf16* out, const AttentionDims& dims) {
  Scratch s(buffers_);
  const int64_t nq = Elements(dims, dims.heads), nkv = KeyElements(dims);
  float* out_f = s.Take(nq);
  f32_.FlashAttentionForward(s.Wide(q, nq), s.Wide(k, nkv), s.Wide(v, nkv), lse, out_f, dims);
  Narrow(out_f, out, nq);
}

void CpuBf16Kernels::FlashAttentionBackward(const Bf16* dout, const Bf16* q, const Bf16* k,
                                            const Bf16* v, const Bf16* out, const float* lse,
                                            Bf16* dq, Bf16* dk, Bf16* dv,
                                            const AttentionDims& dims) {
  Scratch s(buffers_);
  const int64_t nq = Elements(dims, dims.heads), nkv = KeyElements(dims);
  float* dq_f = s.Wide(dq, nq);  // the three gradients are accumulated
  float* dk_f = s.Wide(dk, nkv);
  float* dv_f = s.Wide(dv, nkv);
  f32_.FlashAttentionBackward(s.Wide(dout, nq), s.Wide(q, nq), s.Wide(k, nkv), s.Wide(v, nkv),
                              s.Wide(out, nq), lse, dq_f, dk_f, dv_f, dims);
  Narrow(dq_f, dq, nq);
  Narrow(dk_f, dk, nkv);
  Narrow(dv_f, dv, nkv);
}

void CpuBf16Kernels::GeluForward(const Bf16* in, Bf16* out, int64_t n) {
  Scratch s(buffers_);
  float* out_f = s.Take(n);
  f32_.GeluForward(s.Wide(in, n), out_f, n);
  Narrow(out_f, out, n);
}

void CpuBf16Kernels::GeluBackward(const Bf16* dout, const Bf16* in, Bf16* din, int64_t n) {
  Scratch s(buffers_);
  float* din_f = s.Wide(din, n);  // accumulated (gelu.h)
  f32_.GeluBackward(s.Wide(dout, n), s.Wide(in, n), din_f, n);
  Narrow(din_f, din, n);
}

void CpuBf16Kernels::SwigluForward(const Bf16* gate, const Bf16* up, Bf16* out, int64_t n) {
  Scratch s(buffers_);
  float* out_f = s.Take(n);
  f32_.SwigluForward(s.Wide(gate, n), s.Wide(up, n), out_f, n);
  Narrow(out_f, out, n);
}

void CpuBf16Kernels::SwigluBackward(const Bf16* dout, const Bf16* gate, const Bf16* up, Bf16* dgate,
                                    Bf16* dup, int64_t n) {
  Scratch s(buffers_);
  float* dgate_f = s.Wide(dgate, n);  // both accumulated (swiglu.h)
  float* dup_f = s.Wide(dup, n);
  f32_.SwigluBackward(s.Wide(dout, n), s.Wide(gate, n), s.Wide(up, n), dgate_f, dup_f, n);
  Narrow(dgate_f, dgate, n);
  Narrow(dup_f, dup, n);
}

double CpuBf16Kernels::SoftmaxCrossEntropy(const Bf16* logits, const int32_t* targets, Bf16* probs,
                                           int64_t n, int64_t v) {
  Scratch s(buffers_);
  float* probs_f = s.Take(n * v);
  const double loss = f32_.SoftmaxCrossEntropy(s.Wide(logits, n * v), targets, probs_f, n, v);
  Narrow(probs_f, probs, n * v);
  return loss;
}

void CpuBf16Kernels::CrossEntropyBackward(const Bf16* probs, const int32_t* targets, float scale,
                                          int64_t mean_over, Bf16* dlogits, int64_t n, int64_t v,
                                          int64_t vocab_begin) {
  Scratch s(buffers_);
  float* dlogits_f = s.Take(n * v);
  f32_.CrossEntropyBackward(s.Wide(probs, n * v), targets, scale, mean_over, dlogits_f, n, v,
                            vocab_begin);
  Narrow(dlogits_f, dlogits, n * v);
}

void CpuBf16Kernels::VocabParallelStats(const Bf16* logits, const int32_t* targets,
                                        int64_t vocab_begin, float* stats, int64_t n, int64_t v) {
  Scratch s(buffers_);
  f32_.VocabParallelStats(s.Wide(logits, n * v), targets, vocab_begin, stats, n, v);
}

void CpuBf16Kernels::SoftmaxFromLogSumExp(Bf16* logits, const float* lse, int64_t n, int64_t v) {
  Scratch s(buffers_);
  float* z = s.Wide(logits, n * v);  // exponentiated in place
  f32_.SoftmaxFromLogSumExp(z, lse, n, v);
  Narrow(z, logits, n * v);
}

void CpuBf16Kernels::Add(Bf16* dst, const Bf16* src, int64_t n) {
  Scratch s(buffers_);
  float* dst_f = s.Wide(dst, n);
  f32_.Add(dst_f, s.Wide(src, n), n);
  Narrow(dst_f, dst, n);
}

void CpuBf16Kernels::GatherRows(const Bf16* src, const int32_t* idx, Bf16* dst, int64_t rows, int64_t c) {
  runtime::GatherRows(src, idx, dst, rows, c);  // bf16 moved as it is
}

void CpuBf16Kernels::ScatterAddRows(const Bf16* src, const int32_t* idx, Bf16* dst, int64_t rows, int64_t c) {
  for (int64_t i = 0; i < rows; ++i) {  // widened, added in fp32, rounded once per source row
    Bf16* to = dst + static_cast<int64_t>(idx[i]) * c;
    for (int64_t j = 0; j < c; ++j) to[j] = ToBf16(ToFloat(to[j]) + ToFloat(src[i * c + j]));
  }
}

void CpuBf16Kernels::ScaleRows(Bf16* x, const float* scale, int64_t rows, int64_t c) {
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < c; ++j) x[i * c + j] = ToBf16(ToFloat(x[i * c + j]) * scale[i]);
  }
}

void CpuBf16Kernels::RowDots(const Bf16* a, const Bf16* b, double* out, int64_t rows, int64_t c) {
  for (int64_t i = 0; i < rows; ++i) {
    double sum = 0;
    for (int64_t j = 0; j < c; ++j) sum += static_cast<double>(ToFloat(a[i * c + j])) * ToFloat(b[i * c + j]);
    out[i] = sum;
  }
}

void CpuBf16Kernels::AddRowBias(Bf16* out, const Bf16* bias, int64_t n, int64_t c) {
  Scratch s(buffers_);
  float* out_f = s.Wide(out, n * c);
  f32_.AddRowBias(out_f, s.Wide(bias, c), n, c);
  Narrow(out_f, out, n * c);
}

void CpuBf16Kernels::AddColumnSums(const Bf16* x, float* out, int64_t n, int64_t c) {
  Scratch s(buffers_);
  f32_.AddColumnSums(s.Wide(x, n * c), out, n, c);
}

}  // namespace shardsim::runtime
