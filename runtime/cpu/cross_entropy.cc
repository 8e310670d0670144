// Row softmax with the max subtracted (exact in exact arithmetic, no overflow in floating
// point) and the mean negative log-likelihood, summed in double.
#include "runtime/cpu/cross_entropy.h"

#include <cmath>

#include "runtime/cpu/eigen_types.h"
#include "src/util/check.h"

namespace shardsim::runtime {

template <typename S>
S CrossEntropyForward(const S* logits, const int32_t* targets, S* probs, int64_t n, int64_t v) {
  CHECK(n > 0);
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t target = targets[i];
    CHECK(target >= 0 && target < v) << "target " << target << " outside vocab " << v;
    ConstRowVectorMap<S> z(logits + i * v, v);
    RowVectorMap<S> p(probs + i * v, v);
    const S max = z.maxCoeff();
    p = (z.array() - max).exp().matrix();
    const S sum = p.sum();
    p /= sum;
    // -log p[target] = log(sum) - (z[target] - max): no log of a rounded-to-zero probability.
    total += static_cast<double>(std::log(sum) - (z[target] - max));
  }
  return static_cast<S>(total / static_cast<double>(n));
}

template <typename S>
void CrossEntropyBackward(const S* probs, const int32_t* targets, S scale, S* dlogits, int64_t n,
                          int64_t v) {
  const S per_token = scale / static_cast<S>(n);
  for (int64_t i = 0; i < n; ++i) {
    RowVectorMap<S> d(dlogits + i * v, v);
    d += per_token * ConstRowVectorMap<S>(probs + i * v, v);
    d[targets[i]] -= per_token;
  }
}

template float CrossEntropyForward<float>(const float*, const int32_t*, float*, int64_t, int64_t);
template double CrossEntropyForward<double>(const double*, const int32_t*, double*, int64_t,
                                            int64_t);
template void CrossEntropyBackward<float>(const float*, const int32_t*, float, float*, int64_t,
                                          int64_t);
template void CrossEntropyBackward<double>(const double*, const int32_t*, double, double*, int64_t,
                                           int64_t);

}  // namespace shardsim::runtime
