// Linear layer over Eigen maps; the three products of the backward pass are the standard
// ones (e.g. Goodfellow et al. 2016, sec. 6.5.6 for a matrix-multiply node).
#include "runtime/cpu/linear.h"

#include "runtime/cpu/cpu_threads.h"
#include "runtime/cpu/eigen_types.h"

namespace shardsim::runtime {

namespace {
const bool kDefaultThreads = SetDefaultCpuThreads();  // cpu_threads.h
}  // namespace

template <typename S>
void LinearForward(const S* x, const S* w, const S* b, S* y, int64_t n, int64_t c, int64_t oc) {
  ConstMatrixMap<S> X(x, n, c);   // (N, C)
  ConstMatrixMap<S> W(w, oc, c);  // (OC, C)
  MatrixMap<S> Y(y, n, oc);       // (N, OC)
  Y.noalias() = X * W.transpose();
  if (b != nullptr) Y.rowwise() += ConstRowVectorMap<S>(b, oc);
}

template <typename S>
void LinearBackward(const S* dy, const S* x, const S* w, S* dx, S* dw, S* db, int64_t n, int64_t c,
                    int64_t oc) {
  ConstMatrixMap<S> dY(dy, n, oc);  // (N, OC)
  // w (OC, C) is read only for dx, x (N, C) only for dw: either may be null without them.
  if (dx != nullptr) MatrixMap<S>(dx, n, c).noalias() += dY * ConstMatrixMap<S>(w, oc, c);
  if (dw != nullptr) {
    MatrixMap<S>(dw, oc, c).noalias() += dY.transpose() * ConstMatrixMap<S>(x, n, c);
  }
  if (db != nullptr) RowVectorMap<S>(db, oc) += dY.colwise().sum();
}

template void LinearForward<float>(const float*, const float*, const float*, float*, int64_t,
                                   int64_t, int64_t);
template void LinearForward<double>(const double*, const double*, const double*, double*, int64_t,
                                    int64_t, int64_t);
template void LinearBackward<float>(const float*, const float*, const float*, float*, float*,
                                    float*, int64_t, int64_t, int64_t);
template void LinearBackward<double>(const double*, const double*, const double*, double*, double*,
                                     double*, int64_t, int64_t, int64_t);

}  // namespace shardsim::runtime
