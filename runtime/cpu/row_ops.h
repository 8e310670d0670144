// Row gathers, scatters and per-row products of (rows, c) row-major buffers: the token
// permutations of a mixture-of-experts layer (moe_mlp.h, and the executor's dispatch through
// CpuKernels). Plain loops in a fixed order, so the reference and the executor agree bitwise.
#pragma once

#include <cstdint>

namespace shardsim::runtime {

// dst row i = src row idx[i].
template <typename S>
void GatherRows(const S* src, const int32_t* idx, S* dst, int64_t rows, int64_t c) {
  for (int64_t i = 0; i < rows; ++i) {
    const S* from = src + static_cast<int64_t>(idx[i]) * c;
    for (int64_t j = 0; j < c; ++j) dst[i * c + j] = from[j];
  }
}

// dst row idx[i] += src row i, i in order (repeated destinations add in that order).
template <typename S>
void ScatterAddRows(const S* src, const int32_t* idx, S* dst, int64_t rows, int64_t c) {
  for (int64_t i = 0; i < rows; ++i) {
    S* to = dst + static_cast<int64_t>(idx[i]) * c;
    for (int64_t j = 0; j < c; ++j) to[j] += src[i * c + j];
  }
}

// x row i *= scale[i] (rounded to S first).
template <typename S, typename W>
void ScaleRows(S* x, const W* scale, int64_t rows, int64_t c) {
  for (int64_t i = 0; i < rows; ++i) {
    const S s = static_cast<S>(scale[i]);
    for (int64_t j = 0; j < c; ++j) x[i * c + j] *= s;
  }
}

// out[i] = row i of a . row i of b, summed in double, left to right.
template <typename S>
void RowDots(const S* a, const S* b, double* out, int64_t rows, int64_t c) {
  for (int64_t i = 0; i < rows; ++i) {
    double sum = 0;
    for (int64_t j = 0; j < c; ++j) sum += static_cast<double>(a[i * c + j]) * static_cast<double>(b[i * c + j]);
    out[i] = sum;
  }
}

}  // namespace shardsim::runtime
