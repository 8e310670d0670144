// RMSNorm over rows. Backward: d rstd / dx_j = -rstd^3 x_j / C, so
//   dx_j = rstd g_j - rstd^3 x_j (1/C) sum_i g_i x_i = rstd (g_j - xhat_j mean(g * xhat)).
// Rows run in parallel (parallel.h); the gain's gradient, a sum over rows, runs over column
// ranges, each column summed in row order as the serial loop did: the same bits on any thread
// count.
#include "runtime/cpu/rms_norm.h"

#include <cmath>

#include "runtime/cpu/eigen_types.h"
#include "runtime/cpu/parallel.h"

namespace shardsim::runtime {

template <typename S>
void RmsNormForward(const S* x, const S* gain, S* y, S* rstd, int64_t n, int64_t c, S eps) {
  ConstRowVectorMap<S> g(gain, c);
  ParallelFor(n, 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      ConstRowVectorMap<S> xi(x + i * c, c);
      const S r = S(1) / std::sqrt(xi.squaredNorm() / static_cast<S>(c) + eps);
      rstd[i] = r;
      RowVectorMap<S>(y + i * c, c) = (xi.array() * r * g.array()).matrix();
    }
  });
}

template <typename S>
void RmsNormBackward(const S* dy, const S* x, const S* gain, const S* rstd, S* dx, S* dgain,
                     int64_t n, int64_t c) {
  ConstRowVectorMap<S> g(gain, c);
  ParallelFor(n, 16, [&](int64_t begin, int64_t end) {
    RowVector<S> xhat(c), gdy(c);
    for (int64_t i = begin; i < end; ++i) {
      ConstRowVectorMap<S> dyi(dy + i * c, c);
      xhat = ConstRowVectorMap<S>(x + i * c, c) * rstd[i];
      gdy = dyi.cwiseProduct(g);
      const S mean_gx = gdy.cwiseProduct(xhat).mean();
      RowVectorMap<S>(dx + i * c, c) += (rstd[i] * (gdy.array() - xhat.array() * mean_gx)).matrix();
    }
  });
  ParallelFor(c, 64, [&](int64_t begin, int64_t end) {
    const int64_t w = end - begin;
    RowVectorMap<S> dg(dgain + begin, w);
    for (int64_t i = 0; i < n; ++i) {
      dg += ConstRowVectorMap<S>(dy + i * c + begin, w)
                .cwiseProduct(ConstRowVectorMap<S>(x + i * c + begin, w) * rstd[i]);
    }
  });
}

template void RmsNormForward<float>(const float*, const float*, float*, float*, int64_t, int64_t,
                                    float);
template void RmsNormForward<double>(const double*, const double*, double*, double*, int64_t,
                                     int64_t, double);
template void RmsNormBackward<float>(const float*, const float*, const float*, const float*, float*,
                                     float*, int64_t, int64_t);
template void RmsNormBackward<double>(const double*, const double*, const double*, const double*,
                                      double*, double*, int64_t, int64_t);

}  // namespace shardsim::runtime
