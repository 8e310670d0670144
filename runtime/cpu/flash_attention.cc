// See flash_attention.h. The forward pass is attention.cc's, keeping the row statistics instead
// of P; the backward pass rebuilds P from them, per (sequence, head).
#include "runtime/cpu/flash_attention.h"

#include <cmath>

#include "runtime/cpu/eigen_types.h"

namespace shardsim::runtime {
namespace {

// P (T, Tk) = exp(scale Q_h K_g^T - lse) for keys 0..offset+i of query row i, 0 past them.
template <typename S>
void Probabilities(const Eigen::Ref<const Matrix<S>>& qh, const Eigen::Ref<const Matrix<S>>& kg,
                   const S* lse, S scale, int64_t offset, Matrix<S>& p) {
  const int64_t t = p.rows(), tk = p.cols();
  p.noalias() = scale * qh * kg.transpose();
  for (int64_t i = 0; i < t; ++i) {
    const int64_t seen = offset + i + 1;
    p.row(i).head(seen) = (p.row(i).head(seen).array() - lse[i]).exp().matrix();
    p.row(i).tail(tk - seen).setZero();
  }
}

}  // namespace

template <typename S>
void FlashAttentionForward(const S* q, const S* k, const S* v, S* lse, S* out,
                           const AttentionShape& s) {
  CausalAttentionForward<S>(q, k, v, nullptr, lse, out, s);  // one head's P as workspace
}

template <typename S>
void FlashAttentionBackward(const S* dout, const S* q, const S* k, const S* v, const S* out,
                            const S* lse, S* dq, S* dk, S* dv, const AttentionShape& s) {
  const int64_t t = s.seq, tk = s.keys(), d = s.head_dim, group = s.heads / s.kv_heads;
  const S scale = S(1) / std::sqrt(static_cast<S>(d));
  ConstMatrixMap<S> dO(dout, s.batch * t, s.heads * d);
  ConstMatrixMap<S> O(out, s.batch * t, s.heads * d);
  ConstMatrixMap<S> Q(q, s.batch * t, s.heads * d);
  ConstMatrixMap<S> K(k, s.batch * tk, s.kv_heads * d);
  ConstMatrixMap<S> V(v, s.batch * tk, s.kv_heads * d);
  MatrixMap<S> dQ(dq, s.batch * t, s.heads * d);
  MatrixMap<S> dK(dk, s.batch * tk, s.kv_heads * d);
  MatrixMap<S> dV(dv, s.batch * tk, s.kv_heads * d);
  Matrix<S> p(t, tk), ds(t, tk);  // workspace: one head's P, and dP then dS
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t g = h / group;
      const auto q_h = Q.block(b * t, h * d, t, d);
      const auto k_g = K.block(b * tk, g * d, tk, d);
      const auto dO_h = dO.block(b * t, h * d, t, d);
      Probabilities<S>(q_h, k_g, lse + (b * s.heads + h) * t, scale, s.q_offset, p);
      ds.noalias() = dO_h * V.block(b * tk, g * d, tk, d).transpose();
      dV.block(b * tk, g * d, tk, d).noalias() += p.transpose() * dO_h;
      for (int64_t i = 0; i < t; ++i) {
        const S D = dO_h.row(i).dot(O.block(b * t, h * d, t, d).row(i));
        ds.row(i) = p.row(i).cwiseProduct((ds.row(i).array() - D).matrix());
      }
      dQ.block(b * t, h * d, t, d).noalias() += scale * ds * k_g;
      dK.block(b * tk, g * d, tk, d).noalias() += scale * ds.transpose() * q_h;
    }
  }
}

#define SHARDSIM_INSTANTIATE_FLASH(S)                                                       \
  template void FlashAttentionForward<S>(const S*, const S*, const S*, S*, S*,             \
                                         const AttentionShape&);                           \
  template void FlashAttentionBackward<S>(const S*, const S*, const S*, const S*, const S*, \
                                          const S*, S*, S*, S*, const AttentionShape&);
SHARDSIM_INSTANTIATE_FLASH(float)
SHARDSIM_INSTANTIATE_FLASH(double)
#undef SHARDSIM_INSTANTIATE_FLASH

}  // namespace shardsim::runtime
