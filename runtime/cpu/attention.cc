// Attention as per-(sequence, head) Eigen products over blocks of the (B*T, heads*d) maps.
// The full T x Tk score matrix is formed (the masked part is overwritten by zeros): simple and
// fine at the sequence lengths the CPU runtime trains. The (sequence, head) pairs run in
// parallel (parallel.h): forward, each pair writes only its own rows; backward, the heads that
// share a key-value head accumulate into its dK and dV, so the parts are (sequence, key-value
// head) with their query heads in order, as the serial loop adds them: the same bits on any
// thread count.
#include "runtime/cpu/attention.h"

#include <cmath>

#include "runtime/cpu/eigen_types.h"
#include "runtime/cpu/parallel.h"
#include "src/util/check.h"

namespace shardsim::runtime {

template <typename S>
void CausalAttentionForward(const S* q, const S* k, const S* v, S* probs, S* lse, S* out,
                            const AttentionShape& s) {
  CHECK(s.kv_heads > 0 && s.heads % s.kv_heads == 0) << s.heads << " / " << s.kv_heads;
  const int64_t t = s.seq, tk = s.keys(), o = s.q_offset;
  CHECK(o >= 0 && o + t <= tk) << "queries at " << o << ".." << o + t << " past " << tk << " keys";
  const int64_t d = s.head_dim;
  const int64_t group = s.heads / s.kv_heads;
  const S scale = S(1) / std::sqrt(static_cast<S>(d));
  ConstMatrixMap<S> Q(q, s.batch * t, s.heads * d);
  ConstMatrixMap<S> K(k, s.batch * tk, s.kv_heads * d);
  ConstMatrixMap<S> V(v, s.batch * tk, s.kv_heads * d);
  MatrixMap<S> O(out, s.batch * t, s.heads * d);
  ParallelFor(s.batch * s.heads, 1, [&](int64_t begin, int64_t end) {
    Matrix<S> workspace(probs == nullptr ? t : 0, probs == nullptr ? tk : 0);
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / s.heads, h = bh % s.heads;
      const int64_t g = h / group;
      MatrixMap<S> P(probs == nullptr ? workspace.data() : probs + (b * s.heads + h) * t * tk, t,
                     tk);
      S* l = lse == nullptr ? nullptr : lse + (b * s.heads + h) * t;
      P.noalias() = scale * Q.block(b * t, h * d, t, d) * K.block(b * tk, g * d, tk, d).transpose();
      for (int64_t i = 0; i < t; ++i) {
        const int64_t seen = o + i + 1;  // causal: keys 0..o+i
        auto row = P.row(i).head(seen);
        const S max = row.maxCoeff();
        row = (row.array() - max).exp().matrix();
        const S sum = row.sum();
        row /= sum;
        if (l != nullptr) l[i] = max + std::log(sum);
        P.row(i).tail(tk - seen).setZero();
      }
      O.block(b * t, h * d, t, d).noalias() = P * V.block(b * tk, g * d, tk, d);
    }
  });
}

template <typename S>
void AttentionForward(const S* q, const S* k, const S* v, S* probs, S* out,
                      const AttentionShape& s) {
  CausalAttentionForward<S>(q, k, v, probs, nullptr, out, s);
}

template <typename S>
void AttentionBackward(const S* dout, const S* q, const S* k, const S* v, const S* probs, S* dq,
                       S* dk, S* dv, const AttentionShape& s) {
  const int64_t t = s.seq, tk = s.keys();
  const int64_t d = s.head_dim;
  const int64_t group = s.heads / s.kv_heads;
  const S scale = S(1) / std::sqrt(static_cast<S>(d));
  ConstMatrixMap<S> dO(dout, s.batch * t, s.heads * d);
  ConstMatrixMap<S> Q(q, s.batch * t, s.heads * d);
  ConstMatrixMap<S> K(k, s.batch * tk, s.kv_heads * d);
  ConstMatrixMap<S> V(v, s.batch * tk, s.kv_heads * d);
  MatrixMap<S> dQ(dq, s.batch * t, s.heads * d);
  MatrixMap<S> dK(dk, s.batch * tk, s.kv_heads * d);
  MatrixMap<S> dV(dv, s.batch * tk, s.kv_heads * d);
  ParallelFor(s.batch * s.kv_heads, 1, [&](int64_t begin, int64_t end) {
    Matrix<S> dP(t, tk);  // (T, Tk), then overwritten by dS
    for (int64_t bg = begin; bg < end; ++bg) {
      const int64_t b = bg / s.kv_heads, g = bg % s.kv_heads;
      for (int64_t h = g * group; h < (g + 1) * group; ++h) {
        ConstMatrixMap<S> P(probs + (b * s.heads + h) * t * tk, t, tk);
        auto dO_h = dO.block(b * t, h * d, t, d);
        dP.noalias() = dO_h * V.block(b * tk, g * d, tk, d).transpose();
        dV.block(b * tk, g * d, tk, d).noalias() += P.transpose() * dO_h;
        for (int64_t i = 0; i < t; ++i) {
          const S dot = P.row(i).dot(dP.row(i));
          dP.row(i) = P.row(i).cwiseProduct((dP.row(i).array() - dot).matrix());
        }
        dQ.block(b * t, h * d, t, d).noalias() += scale * dP * K.block(b * tk, g * d, tk, d);
        dK.block(b * tk, g * d, tk, d).noalias() +=
            scale * dP.transpose() * Q.block(b * t, h * d, t, d);
      }
    }
  });
}

template void CausalAttentionForward<float>(const float*, const float*, const float*, float*,
                                            float*, float*, const AttentionShape&);
template void CausalAttentionForward<double>(const double*, const double*, const double*, double*,
                                             double*, double*, const AttentionShape&);
template void AttentionForward<float>(const float*, const float*, const float*, float*, float*,
                                      const AttentionShape&);
template void AttentionForward<double>(const double*, const double*, const double*, double*,
                                       double*, const AttentionShape&);
template void AttentionBackward<float>(const float*, const float*, const float*, const float*,
                                       const float*, float*, float*, float*, const AttentionShape&);
template void AttentionBackward<double>(const double*, const double*, const double*, const double*,
                                        const double*, double*, double*, double*,
                                        const AttentionShape&);

}  // namespace shardsim::runtime
