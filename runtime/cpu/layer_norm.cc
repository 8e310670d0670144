// LayerNorm over rows. The backward formula follows from d rstd / dx_j = -rstd^3 (x_j - mean)/C
// and d mean / dx_j = 1/C; llm.c's layernorm_backward computes the same expression.
#include "runtime/cpu/layer_norm.h"

#include <cmath>

#include "runtime/cpu/eigen_types.h"

namespace shardsim::runtime {

template <typename S>
void LayerNormForward(const S* x, const S* gain, const S* bias, S* y, S* mean, S* rstd, int64_t n,
                      int64_t c, S eps) {
  ConstRowVectorMap<S> g(gain, c);
  ConstRowVectorMap<S> b(bias, c);
  for (int64_t i = 0; i < n; ++i) {
    ConstRowVectorMap<S> xi(x + i * c, c);
    const S mu = xi.mean();
    const S var = (xi.array() - mu).square().mean();
    const S r = S(1) / std::sqrt(var + eps);
    mean[i] = mu;
    rstd[i] = r;
    RowVectorMap<S>(y + i * c, c) = ((xi.array() - mu) * r * g.array() + b.array()).matrix();
  }
}

template <typename S>
void LayerNormBackward(const S* dy, const S* x, const S* gain, const S* mean, const S* rstd, S* dx,
                       S* dgain, S* dbias, int64_t n, int64_t c) {
  ConstRowVectorMap<S> g(gain, c);
  RowVectorMap<S> dg(dgain, c);
  RowVectorMap<S> db(dbias, c);
  RowVector<S> xhat(c), gdy(c);
  for (int64_t i = 0; i < n; ++i) {
    ConstRowVectorMap<S> dyi(dy + i * c, c);
    xhat = (ConstRowVectorMap<S>(x + i * c, c).array() - mean[i]) * rstd[i];
    gdy = dyi.cwiseProduct(g);
    dg += dyi.cwiseProduct(xhat);
    db += dyi;
    const S mean_g = gdy.mean();
    const S mean_gx = gdy.cwiseProduct(xhat).mean();
    RowVectorMap<S>(dx + i * c, c) +=
        (rstd[i] * (gdy.array() - mean_g - xhat.array() * mean_gx)).matrix();
  }
}

template void LayerNormForward<float>(const float*, const float*, const float*, float*, float*,
                                      float*, int64_t, int64_t, float);
template void LayerNormForward<double>(const double*, const double*, const double*, double*,
                                       double*, double*, int64_t, int64_t, double);
template void LayerNormBackward<float>(const float*, const float*, const float*, const float*,
                                       const float*, float*, float*, float*, int64_t, int64_t);
template void LayerNormBackward<double>(const double*, const double*, const double*, const double*,
                                        const double*, double*, double*, double*, int64_t, int64_t);

}  // namespace shardsim::runtime
