// See cpu_fp8_kernels.h.
#include "runtime/cpu/cpu_fp8_kernels.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "runtime/cpu/eigen_types.h"
#include "src/util/check.h"

namespace shardsim::runtime {
namespace {

// The codes' values as an (rows, cols) fp32 matrix (the scale factor not applied).
Matrix<float> Decode(const Fp8Tensor& t, int64_t rows, int64_t cols) {
  Matrix<float> out(rows, cols);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) out(i, j) = FromFp8(t.codes[i * cols + j], t.format);
  }
  return out;
}

}  // namespace

float CpuFp8Kernels::Amax(const Bf16* x, int64_t count) {
  float amax = 0;
  for (int64_t i = 0; i < count; ++i) amax = std::max(amax, std::fabs(ToFloat(x[i])));
  return amax;
}

void CpuFp8Kernels::Quantize(const Bf16* x, int64_t rows, int64_t cols, Fp8Format format, float scale,
                             uint8_t* codes, uint8_t* transposed) {
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      const uint8_t q = ToFp8(ToFloat(x[i * cols + j]) * scale, format);
      if (codes != nullptr) codes[i * cols + j] = q;
      if (transposed != nullptr) transposed[j * rows + i] = q;
    }
  }
}

void CpuFp8Kernels::Transpose(const uint8_t* codes, int64_t rows, int64_t cols, uint8_t* out) {
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) out[j * rows + i] = codes[i * cols + j];
  }
}

void CpuFp8Kernels::Gemm(const std::vector<Product>& terms, int64_t n, int64_t m, Bf16* out_bf16, bool accumulate,
                         float* out_f32, const Bf16* bias) {
  CHECK((out_bf16 == nullptr) != (out_f32 == nullptr)) << "an fp8 GEMM writes bf16 or adds into fp32";
  Matrix<float> c = Matrix<float>::Zero(n, m);
  for (const Product& t : terms) {
    c.noalias() += (t.a.scale_inv * t.b.scale_inv) * (Decode(t.a, n, t.k) * Decode(t.b, m, t.k).transpose());
  }
  if (out_f32 != nullptr) {
    MatrixMap<float>(out_f32, n, m) += c;
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < m; ++j) {
      float v = c(i, j);
      if (bias != nullptr) v += ToFloat(bias[j]);
      if (accumulate) v += ToFloat(out_bf16[i * m + j]);
      out_bf16[i * m + j] = ToBf16(v);
    }
  }
}

}  // namespace shardsim::runtime
