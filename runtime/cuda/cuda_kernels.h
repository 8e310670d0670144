// CudaKernels: the Kernels of backend.h on an NVIDIA GPU: one CudaTypedKernels per storage type
// (fp32, and bf16 for mixed precision; cuda_typed_kernels.h) sharing one CudaWorkspace, plus the
// fp32-only kernels here (optimizer, gradient norms, the vocab-parallel log-sum-exp, the cast
// of master weights to their bf16 working copy). All work is enqueued on one stream, in call
// order.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/backend/backend.h"
#include "runtime/cuda/cuda_fp8_kernels.h"
#include "runtime/cuda/cuda_typed_kernels.h"
#include "runtime/cuda/cuda_workspace.h"

namespace shardsim::runtime {

// Numerics of the fp32-only kernels against CpuKernels: AdamW and Scale (sqrt, division,
// products) are expected bitwise equal; the log-sum-exp differs where CUDA's expf/logf differ
// from glibc's (a few ulp); SumSquares and the losses are doubles summed in a fixed tree
// (cuda_workspace.h). CastToBf16 is __float2bfloat16_rn, bitwise ToBf16 (bf16.h).
// Scalars returned to the host synchronise the stream; nothing else does.
class CudaKernels final : public Kernels {
 public:
  // `stream` and `cublas` (already bound to `stream`) are owned by the caller (CudaBackend) and
  // outlive this object.
  CudaKernels(cudaStream_t stream, cublasHandle_t cublas);
  CudaKernels(const CudaKernels&) = delete;
  CudaKernels& operator=(const CudaKernels&) = delete;

  TypedKernels<float>& f32() override { return f32_; }
  TypedKernels<Bf16>& bf16() override { return bf16_; }
  Fp8Kernels* fp8() override { return &fp8_; }

  double VocabParallelLogSumExp(const float* all_stats, int64_t tp, float* lse, int64_t n) override;
  void Scale(float* x, float s, int64_t n) override;
  double SumSquares(const float* x, int64_t n) override;
  void AdamW(float* p, const float* g, float* m, float* v, int64_t n, float grad_scale,
             const AdamWArgs& args) override;
  void CastToBf16(const float* src, Bf16* dst, int64_t n) override;

 private:
  CudaWorkspace workspace_;  // first: the typed kernels hold a reference to it
  CudaTypedKernels<float> f32_;
  CudaTypedKernels<Bf16> bf16_;
  CudaFp8Kernels fp8_;
};

}  // namespace shardsim::runtime
