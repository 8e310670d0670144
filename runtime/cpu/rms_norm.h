// RMSNorm (Zhang & Sennrich 2019, eq. 4), forward and backward: the Llama style norm.
#pragma once

#include <cstdint>

namespace shardsim::runtime {

// As Llama 2/3 (rms_norm_eps = 1e-5).
inline constexpr double kRmsNormEps = 1e-5;

// x, y (N, C); gain (C); saves rstd (N):
//   rstd = 1 / sqrt((1/C) sum_j x_j^2 + eps),  y = x * rstd * gain.
template <typename S>
void RmsNormForward(const S* x, const S* gain, S* y, S* rstd, int64_t n, int64_t c,
                    S eps = S(kRmsNormEps));

// With xhat = x * rstd and g = dy * gain (per row):
//   dx += rstd * (g - xhat * mean_j(g * xhat)),  dgain += sum over rows of dy * xhat.
template <typename S>
void RmsNormBackward(const S* dy, const S* x, const S* gain, const S* rstd, S* dx, S* dgain,
                     int64_t n, int64_t c);

}  // namespace shardsim::runtime
