// LayerNorm (Ba, Kiros & Hinton 2016, eq. 4), forward and backward: the GPT-2 style norm.
#pragma once

#include <cstdint>

namespace shardsim::runtime {

// As GPT-2 and PyTorch's default.
inline constexpr double kLayerNormEps = 1e-5;

// x, y (N, C); gain, bias (C); saves mean, rstd (N):
//   mean = (1/C) sum_j x_j,  var = (1/C) sum_j (x_j - mean)^2,  rstd = 1 / sqrt(var + eps),
//   y = (x - mean) * rstd * gain + bias.
template <typename S>
void LayerNormForward(const S* x, const S* gain, const S* bias, S* y, S* mean, S* rstd, int64_t n,
                      int64_t c, S eps = S(kLayerNormEps));

// With xhat = (x - mean) * rstd and g = dy * gain (per row):
//   dx += rstd * (g - mean_j(g) - xhat * mean_j(g * xhat)),
//   dgain += sum over rows of dy * xhat,  dbias += sum over rows of dy.
template <typename S>
void LayerNormBackward(const S* dy, const S* x, const S* gain, const S* mean, const S* rstd, S* dx,
                       S* dgain, S* dbias, int64_t n, int64_t c);

}  // namespace shardsim::runtime
