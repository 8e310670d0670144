// Elementwise SwiGLU and its derivative; silu'(z) = s + z s (1 - s) = s (1 + z (1 - s)).
#include "runtime/cpu/swiglu.h"

#include <cmath>

namespace shardsim::runtime {
namespace {

template <typename S>
S Sigmoid(S z) {
  return S(1) / (S(1) + std::exp(-z));
}

}  // namespace

template <typename S>
void SwigluForward(const S* gate, const S* up, S* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = gate[i] * Sigmoid(gate[i]) * up[i];
}

template <typename S>
void SwigluBackward(const S* dy, const S* gate, const S* up, S* dgate, S* dup, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const S z = gate[i];
    const S s = Sigmoid(z);
    dgate[i] += dy[i] * up[i] * s * (S(1) + z * (S(1) - s));
    dup[i] += dy[i] * z * s;
  }
}

template void SwigluForward<float>(const float*, const float*, float*, int64_t);
template void SwigluForward<double>(const double*, const double*, double*, int64_t);
template void SwigluBackward<float>(const float*, const float*, const float*, float*, float*,
                                    int64_t);
template void SwigluBackward<double>(const double*, const double*, const double*, double*, double*,
                                     int64_t);

}  // namespace shardsim::runtime
