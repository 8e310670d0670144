// GELU activation, tanh approximation (Hendrycks & Gimpel 2016, sec. 2), as in GPT-2.
#pragma once

#include <cstdint>

namespace shardsim::runtime {

// x, y (N):  y = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3).
template <typename S>
void GeluForward(const S* x, S* y, int64_t n);

// dx += dy * (0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) sqrt(2/pi) (1 + 3 * 0.044715 x^2)).
template <typename S>
void GeluBackward(const S* dy, const S* x, S* dx, int64_t n);

}  // namespace shardsim::runtime
