// Embedding lookup and its scatter-add backward.
#include "runtime/cpu/embedding.h"

#include "runtime/cpu/eigen_types.h"
#include "src/util/check.h"

namespace shardsim::runtime {

template <typename S>
void EmbeddingForward(const int32_t* tokens, const S* wte, const S* wpe, S* x, int64_t b, int64_t t,
                      int64_t c, int64_t vocab) {
  for (int64_t row = 0; row < b * t; ++row) {
    const int32_t token = tokens[row];
    CHECK(token >= 0 && token < vocab) << "token " << token << " outside vocab " << vocab;
    RowVectorMap<S> out(x + row * c, c);
    out = ConstRowVectorMap<S>(wte + token * c, c);
    if (wpe != nullptr) out += ConstRowVectorMap<S>(wpe + (row % t) * c, c);
  }
}

template <typename S>
void EmbeddingBackward(const S* dx, const int32_t* tokens, S* dwte, S* dwpe, int64_t b, int64_t t,
                       int64_t c, int64_t vocab) {
  for (int64_t row = 0; row < b * t; ++row) {
    const int32_t token = tokens[row];
    CHECK(token >= 0 && token < vocab) << "token " << token << " outside vocab " << vocab;
    ConstRowVectorMap<S> d(dx + row * c, c);
    RowVectorMap<S>(dwte + token * c, c) += d;
    if (dwpe != nullptr) RowVectorMap<S>(dwpe + (row % t) * c, c) += d;
  }
}

template void EmbeddingForward<float>(const int32_t*, const float*, const float*, float*, int64_t,
                                      int64_t, int64_t, int64_t);
template void EmbeddingForward<double>(const int32_t*, const double*, const double*, double*,
                                       int64_t, int64_t, int64_t, int64_t);
template void EmbeddingBackward<float>(const float*, const int32_t*, float*, float*, int64_t,
                                       int64_t, int64_t, int64_t);
template void EmbeddingBackward<double>(const double*, const int32_t*, double*, double*, int64_t,
                                        int64_t, int64_t, int64_t);

}  // namespace shardsim::runtime
