// CudaFp8Kernels: backend.h's Fp8Kernels on the GPU, the contract CpuFp8Kernels keeps
// (runtime/cpu/cpu_fp8_kernels.h): current scaling's amax, the cast (and cast-transpose) to
// E4M3 / E5M2 codes with backend/fp8.h's rounding (to nearest, ties to even, saturating), and
// the scaled GEMMs over codes. The GEMM decodes each operand's codes to bf16 (every E4M3 and
// E5M2 value is a bf16 value, so exactly) and runs cuBLAS's bf16 GEMM with fp32 accumulation and
// alpha = the two scale_inv: the products and the fp32 sums of an fp8 tensor-core GEMM, not its
// speed (a cuBLASLt fp8 GEMM, Transformer Engine's, reads the codes directly; not done).
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/cuda/cuda_workspace.h"

namespace shardsim::runtime {

class CudaFp8Kernels final : public Fp8Kernels {
 public:
  explicit CudaFp8Kernels(CudaWorkspace& ws);
  CudaFp8Kernels(const CudaFp8Kernels&) = delete;
  CudaFp8Kernels& operator=(const CudaFp8Kernels&) = delete;
  ~CudaFp8Kernels() override;

  float Amax(const Bf16* x, int64_t count) override;
  void Quantize(const Bf16* x, int64_t rows, int64_t cols, Fp8Format format, float scale, uint8_t* codes,
                uint8_t* transposed) override;
  void Transpose(const uint8_t* codes, int64_t rows, int64_t cols, uint8_t* out) override;
  void Gemm(const std::vector<Product>& terms, int64_t n, int64_t m, Bf16* out_bf16, bool accumulate, float* out_f32,
            const Bf16* bias) override;

 private:
  CudaWorkspace& ws_;
  float* host_amax_ = nullptr;  // pinned, one float
};

}  // namespace shardsim::runtime
