// CpuFp8Kernels: backend.h's Fp8Kernels on host memory. Quantization is runtime/backend/fp8.h's
// conversion of each element; a GEMM decodes both operands' codes to fp32 (exact: every fp8
// value is a float) and multiplies them with Eigen, then applies the two factors, as an fp8
// tensor-core GEMM accumulates in fp32 and scales its result (cuBLASLt's A and B scale
// pointers).
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/backend/backend.h"

namespace shardsim::runtime {

class CpuFp8Kernels final : public Fp8Kernels {
 public:
  float Amax(const Bf16* x, int64_t count) override;
  void Quantize(const Bf16* x, int64_t rows, int64_t cols, Fp8Format format, float scale, uint8_t* codes,
                uint8_t* transposed) override;
  void Transpose(const uint8_t* codes, int64_t rows, int64_t cols, uint8_t* out) override;
  void Gemm(const std::vector<Product>& terms, int64_t n, int64_t m, Bf16* out_bf16, bool accumulate,
            float* out_f32, const Bf16* bias) override;
};

}  // namespace shardsim::runtime
