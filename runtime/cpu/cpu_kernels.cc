// See cpu_kernels.h. Each kernel forwards to the operator of runtime/cpu that defines its
// math; the exceptions (row-offset embedding, in-place cross-entropy, AdamW on one range)
// restate that operator's float operations in the same order and say so.
#include "runtime/cpu/cpu_kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "runtime/cpu/attention.h"
#include "runtime/cpu/bf16_convert.h"
#include "runtime/cpu/cross_entropy.h"
#include "runtime/cpu/eigen_types.h"
#include "runtime/cpu/embedding.h"
#include "runtime/cpu/flash_attention.h"
#include "runtime/cpu/gelu.h"
#include "runtime/cpu/linear.h"
#include "runtime/cpu/norm.h"
#include "runtime/cpu/parallel.h"
#include "runtime/cpu/row_ops.h"
#include "runtime/cpu/swiglu.h"
#include "src/util/check.h"

namespace shardsim::runtime {
namespace {

AttentionShape ShapeOf(const AttentionDims& d) {
  return {.batch = d.batch,
          .seq = d.seq,
          .heads = d.heads,
          .kv_heads = d.kv_heads,
          .head_dim = d.head_dim,
          .kv_seq = d.kv_seq,
          .q_offset = d.q_offset};
}

}  // namespace

// Row i is one (b = 1, t = 1) lookup with wpe advanced to position (row0 + i) % seq: the
// same Eigen row operations as the batched operator.
void CpuKernels::EmbeddingForward(const int32_t* tokens, const float* wte, int64_t vocab_begin,
                                  int64_t vocab, const float* wpe, float* out, int64_t n,
                                  int64_t row0, int64_t seq, int64_t c) {
  CHECK(seq > 0 && row0 >= 0) << "seq " << seq << ", row0 " << row0;
  for (int64_t i = 0; i < n; ++i) {
    const float* pos = wpe == nullptr ? nullptr : wpe + ((row0 + i) % seq) * c;
    const int32_t local = tokens[i] - static_cast<int32_t>(vocab_begin);
    if (local >= 0 && local < vocab) {
      runtime::EmbeddingForward<float>(&local, wte, pos, out + i * c, 1, 1, c, vocab);
    } else {  // another rank's token: only the position (if any) here
      RowVectorMap<float> row(out + i * c, c);
      if (pos == nullptr) {
        row.setZero();
      } else {
        row = ConstRowVectorMap<float>(pos, c);
      }
    }
  }
}

void CpuKernels::EmbeddingBackward(const float* dout, const int32_t* tokens, float* dwte,
                                   int64_t vocab_begin, int64_t vocab, float* dwpe, int64_t n,
                                   int64_t row0, int64_t seq, int64_t c) {
  CHECK(seq > 0 && row0 >= 0) << "seq " << seq << ", row0 " << row0;
  for (int64_t i = 0; i < n; ++i) {
    float* pos = dwpe == nullptr ? nullptr : dwpe + ((row0 + i) % seq) * c;
    const int32_t local = tokens[i] - static_cast<int32_t>(vocab_begin);
    if (local >= 0 && local < vocab) {
      runtime::EmbeddingBackward<float>(dout + i * c, &local, dwte, pos, 1, 1, c, vocab);
    } else if (pos != nullptr) {
      RowVectorMap<float>(pos, c) += ConstRowVectorMap<float>(dout + i * c, c);
    }
  }
}

void CpuKernels::NormForward(Norm kind, const float* x, const float* gain, const float* bias,
                             float* out, float* mean, float* rstd, int64_t n, int64_t c) {
  runtime::NormForward<float>(kind, x, gain, bias, out, mean, rstd, n, c);
}

void CpuKernels::NormBackward(Norm kind, const float* dout, const float* x, const float* gain,
                              const float* mean, const float* rstd, float* dx, float* dgain,
                              float* dbias, int64_t n, int64_t c) {
  runtime::NormBackward<float>(kind, dout, x, gain, mean, rstd, dx, dgain, dbias, n, c);
}

void CpuKernels::LinearForward(const float* in, const float* w, const float* bias, float* out,
                               int64_t n, int64_t k, int64_t m) {
  runtime::LinearForward<float>(in, w, bias, out, n, k, m);
}

void CpuKernels::LinearBackward(const float* dout, const float* in, const float* w, float* din,
                                float* dw, float* db, int64_t n, int64_t k, int64_t m) {
  runtime::LinearBackward<float>(dout, in, w, din, dw, db, n, k, m);
}

const RopeTable<float>& CpuKernels::Rope(int64_t t, int64_t d, double base) {
  RopeTable<float>& table = rope_[{d, base}];
  if (table.max_t < t) table = MakeRopeTable<float>(t, d, base);
  return table;
}

void CpuKernels::RopeForward(float* x, int64_t b, int64_t t, int64_t heads, int64_t d, double base,
                             int64_t pos0) {
  runtime::RopeForward<float>(x, Rope(pos0 + t, d, base), b, t, heads, pos0);
}

void CpuKernels::RopeBackward(float* dx, int64_t b, int64_t t, int64_t heads, int64_t d,
                              double base, int64_t pos0) {
  runtime::RopeBackward<float>(dx, Rope(pos0 + t, d, base), b, t, heads, pos0);
}

void CpuKernels::AttentionForward(const float* q, const float* k, const float* v, float* probs,
                                  float* out, const AttentionDims& dims) {
  runtime::AttentionForward<float>(q, k, v, probs, out, ShapeOf(dims));
}

void CpuKernels::AttentionBackward(const float* dout, const float* q, const float* k,
                                   const float* v, const float* probs, float* dq, float* dk,
                                   float* dv, const AttentionDims& dims) {
  runtime::AttentionBackward<float>(dout, q, k, v, probs, dq, dk, dv, ShapeOf(dims));
}

void CpuKernels::FlashAttentionForward(const float* q, const float* k, const float* v, float* lse,
                                       float* out, const AttentionDims& dims) {
  runtime::FlashAttentionForward<float>(q, k, v, lse, out, ShapeOf(dims));
}

void CpuKernels::FlashAttentionBackward(const float* dout, const float* q, const float* k,
                                        const float* v, const float* out, const float* lse,
                                        float* dq, float* dk, float* dv,
                                        const AttentionDims& dims) {
  runtime::FlashAttentionBackward<float>(dout, q, k, v, out, lse, dq, dk, dv, ShapeOf(dims));
}

void CpuKernels::GeluForward(const float* in, float* out, int64_t n) {
  runtime::GeluForward<float>(in, out, n);
}

void CpuKernels::GeluBackward(const float* dout, const float* in, float* din, int64_t n) {
  runtime::GeluBackward<float>(dout, in, din, n);
}

void CpuKernels::SwigluForward(const float* gate, const float* up, float* out, int64_t n) {
  runtime::SwigluForward<float>(gate, up, out, n);
}

void CpuKernels::SwigluBackward(const float* dout, const float* gate, const float* up, float* dgate,
                                float* dup, int64_t n) {
  runtime::SwigluBackward<float>(dout, gate, up, dgate, dup, n);
}

// CrossEntropyForward's row formula, with z[target] read before the row is overwritten so
// probs may alias logits: p = exp(z - max) / sum, -log p[target] = log(sum) - (z[target] - max).
double CpuKernels::SoftmaxCrossEntropy(const float* logits, const int32_t* targets, float* probs,
                                       int64_t n, int64_t v) {
  for (int64_t i = 0; i < n; ++i) {
    CHECK(targets[i] >= 0 && targets[i] < v) << "target " << targets[i] << " outside vocab " << v;
  }
  // Rows in parallel (parallel.h), each row's loss kept; then summed in row order, as before.
  std::vector<double> row_loss(static_cast<size_t>(n));
  ParallelFor(n, 8, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      ConstRowVectorMap<float> z(logits + i * v, v);
      RowVectorMap<float> p(probs + i * v, v);
      const float max = z.maxCoeff();
      const float shifted_target = z[targets[i]] - max;
      p = (z.array() - max).exp().matrix();  // elementwise: safe when p and z are one buffer
      const float sum = p.sum();
      p /= sum;
      row_loss[static_cast<size_t>(i)] = static_cast<double>(std::log(sum) - shifted_target);
    }
  });
  double total = 0;
  for (const double loss : row_loss) total += loss;
  return total;
}

// CrossEntropyBackward adds per_token * p into a zeroed row (0 + x == x exactly), then
// subtracts per_token at the target: the same float operations, overwriting.
void CpuKernels::CrossEntropyBackward(const float* probs, const int32_t* targets, float scale,
                                      int64_t mean_over, float* dlogits, int64_t n, int64_t v,
                                      int64_t vocab_begin) {
  CHECK(mean_over > 0) << mean_over;
  const float per_token = scale / static_cast<float>(mean_over);
  ParallelFor(n, 8, [&](int64_t begin, int64_t end) {  // independent rows
    for (int64_t i = begin; i < end; ++i) {
      RowVectorMap<float> d(dlogits + i * v, v);
      d = per_token * ConstRowVectorMap<float>(probs + i * v, v);
      const int64_t local = targets[i] - vocab_begin;
      if (local >= 0 && local < v) d[local] -= per_token;
    }
  });
}

void CpuKernels::VocabParallelStats(const float* logits, const int32_t* targets,
                                    int64_t vocab_begin, float* stats, int64_t n, int64_t v) {
  for (int64_t i = 0; i < n; ++i) {
    ConstRowVectorMap<float> z(logits + i * v, v);
    const float max = z.maxCoeff();
    const int64_t local = targets[i] - vocab_begin;
    stats[3 * i] = max;
    stats[3 * i + 1] = (z.array() - max).exp().sum();
    stats[3 * i + 2] = local >= 0 && local < v ? z[local] : 0.0f;
  }
}

double CpuKernels::VocabParallelLogSumExp(const float* all_stats, int64_t tp, float* lse,
                                          int64_t n) {
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    float max = all_stats[3 * i];
    for (int64_t r = 1; r < tp; ++r) max = std::max(max, all_stats[(r * n + i) * 3]);
    float sum = 0, target = 0;
    for (int64_t r = 0; r < tp; ++r) {
      const float* s = all_stats + (r * n + i) * 3;
      sum += s[1] * std::exp(s[0] - max);
      target += s[2];  // one rank holds the target; the others add 0
    }
    lse[i] = max + std::log(sum);
    // -log p[target] = log(sum) - (z[target] - max), as CrossEntropyForward.
    total += static_cast<double>(std::log(sum) - (target - max));
  }
  return total;
}

void CpuKernels::SoftmaxFromLogSumExp(float* logits, const float* lse, int64_t n, int64_t v) {
  for (int64_t i = 0; i < n; ++i) {
    RowVectorMap<float> z(logits + i * v, v);
    z = (z.array() - lse[i]).exp().matrix();
  }
}

void CpuKernels::Add(float* dst, const float* src, int64_t n) {
  RowVectorMap<float>(dst, n) += ConstRowVectorMap<float>(src, n);
}

void CpuKernels::AddRowBias(float* out, const float* bias, int64_t n, int64_t c) {
  MatrixMap<float>(out, n, c).rowwise() += ConstRowVectorMap<float>(bias, c);
}

void CpuKernels::AddColumnSums(const float* x, float* out, int64_t n, int64_t c) {
  RowVectorMap<float>(out, c) += ConstMatrixMap<float>(x, n, c).colwise().sum();
}

void CpuKernels::GatherRows(const float* src, const int32_t* idx, float* dst, int64_t rows,
                            int64_t c) {
  runtime::GatherRows(src, idx, dst, rows, c);
}

void CpuKernels::ScatterAddRows(const float* src, const int32_t* idx, float* dst, int64_t rows,
                                int64_t c) {
  runtime::ScatterAddRows(src, idx, dst, rows, c);
}

void CpuKernels::ScaleRows(float* x, const float* scale, int64_t rows, int64_t c) {
  runtime::ScaleRows(x, scale, rows, c);
}

void CpuKernels::RowDots(const float* a, const float* b, double* out, int64_t rows, int64_t c) {
  runtime::RowDots(a, b, out, rows, c);
}

void CpuKernels::Scale(float* x, float s, int64_t n) { RowVectorMap<float>(x, n) *= s; }

// Blocks of a fixed size summed in parallel, each in index order, then the block sums in block
// order: one summation order whatever the thread count.
double CpuKernels::SumSquares(const float* x, int64_t n) {
  constexpr int64_t kBlock = 1 << 14;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> block_sum(static_cast<size_t>(blocks));
  ParallelFor(blocks, 4, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      double sum = 0;
      for (int64_t i = b * kBlock; i < std::min(n, (b + 1) * kBlock); ++i) {
        sum += static_cast<double>(x[i]) * static_cast<double>(x[i]);
      }
      block_sum[static_cast<size_t>(b)] = sum;
    }
  });
  double sum = 0;
  for (const double s : block_sum) sum += s;
  return sum;
}

// AdamW<float>::StepRange's loop body: the clip multiplies the gradient first (there, in
// place in grads; here, in a local), then the moments and the update in the same order.
void CpuKernels::AdamW(float* p, const float* g, float* m, float* v, int64_t n, float grad_scale,
                       const AdamWArgs& a) {
  const float b1 = a.beta1, b2 = a.beta2, c1 = a.bias_correction1, c2 = a.bias_correction2;
  const float lr = a.lr, eps = a.eps, decay = a.weight_decay;
  const bool scaled = grad_scale != 1.0f;
  ParallelFor(n, 1 << 16, [&](int64_t begin, int64_t end) {  // independent elements (parallel.h)
    for (int64_t i = begin; i < end; ++i) {
      float gi = g[i];
      if (scaled) gi *= grad_scale;
      m[i] = b1 * m[i] + (1.0f - b1) * gi;
      v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
      const float m_hat = m[i] * c1;
      const float v_hat = v[i] * c2;
      p[i] -= lr * (m_hat / (std::sqrt(v_hat) + eps) + decay * p[i]);
    }
  });
}

void CpuKernels::CastToBf16(const float* src, Bf16* dst, int64_t n) { FloatsToBf16(src, dst, n); }

}  // namespace shardsim::runtime
