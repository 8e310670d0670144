// Elementwise SwiGLU and its derivative; silu'(z) = s + z s (1 - s) = s (1 + z (1 - s)).
#include "runtime/cpu/swiglu.h"

#include <cmath>

#include "runtime/cpu/parallel.h"

namespace shardsim::runtime {
namespace {

template <typename S>
S Sigmoid(S z) {
  return S(1) / (S(1) + std::exp(-z));
}


constexpr int64_t kGrain = 1 << 14;  // elements a thread takes at least (parallel.h)

}  // namespace

template <typename S>
void SwigluForward(const S* gate, const S* up, S* y, int64_t n) {
  ParallelFor(n, kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = gate[i] * Sigmoid(gate[i]) * up[i];
  });
}

template <typename S>
void SwigluBackward(const S* dy, const S* gate, const S* up, S* dgate, S* dup, int64_t n) {
  ParallelFor(n, kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const S z = gate[i];
      const S s = Sigmoid(z);
      dgate[i] += dy[i] * up[i] * s * (S(1) + z * (S(1) - s));
      dup[i] += dy[i] * z * s;
    }
  });
}

template void SwigluForward<float>(const float*, const float*, float*, int64_t);
template void SwigluForward<double>(const double*, const double*, double*, int64_t);
template void SwigluBackward<float>(const float*, const float*, const float*, float*, float*,
                                    int64_t);
template void SwigluBackward<double>(const double*, const double*, const double*, double*, double*,
                                     int64_t);

}  // namespace shardsim::runtime
