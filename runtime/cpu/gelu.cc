// Elementwise GELU (tanh form) and its derivative.
#include "runtime/cpu/gelu.h"

#include <cmath>

namespace shardsim::runtime {
namespace {

constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2 / pi)
constexpr double kCubic = 0.044715;

}  // namespace

template <typename S>
void GeluForward(const S* x, S* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const S xi = x[i];
    const S u = S(kSqrt2OverPi) * (xi + S(kCubic) * xi * xi * xi);
    y[i] = S(0.5) * xi * (S(1) + std::tanh(u));
  }
}

template <typename S>
void GeluBackward(const S* dy, const S* x, S* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const S xi = x[i];
    const S u = S(kSqrt2OverPi) * (xi + S(kCubic) * xi * xi * xi);
    const S th = std::tanh(u);
    const S du = S(kSqrt2OverPi) * (S(1) + S(3 * kCubic) * xi * xi);
    dx[i] += dy[i] * (S(0.5) * (S(1) + th) + S(0.5) * xi * (S(1) - th * th) * du);
  }
}

template void GeluForward<float>(const float*, float*, int64_t);
template void GeluForward<double>(const double*, double*, int64_t);
template void GeluBackward<float>(const float*, const float*, float*, int64_t);
template void GeluBackward<double>(const double*, const double*, double*, int64_t);

}  // namespace shardsim::runtime
