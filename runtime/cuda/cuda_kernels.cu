// See cuda_kernels.h: the fp32-only kernels. Each cites the CPU operator whose float operations
// it restates.
#include <cuda_runtime.h>

#include <cmath>

#include "runtime/cuda/cuda_device.cuh"
#include "runtime/cuda/cuda_kernels.h"

namespace shardsim::runtime {
namespace {

using cuda_device::BlocksFor;
using cuda_device::GlobalIndex;
using cuda_device::GlobalStride;
using cuda_device::kThreads;
using cuda_device::ToDev;

// One thread per row, ranks in order, as CpuKernels::VocabParallelLogSumExp.
__global__ void VocabParallelLogSumExpKernel(const float* all_stats, int64_t tp, float* lse,
                                             float* row_loss, int64_t n) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    float max = all_stats[3 * i];
    for (int64_t r = 1; r < tp; ++r) max = fmaxf(max, all_stats[(r * n + i) * 3]);
    float sum = 0.0f, target = 0.0f;
    for (int64_t r = 0; r < tp; ++r) {
      const float* s = all_stats + (r * n + i) * 3;
      sum += s[1] * expf(s[0] - max);
      target += s[2];
    }
    lse[i] = max + logf(sum);
    row_loss[i] = logf(sum) - (target - max);
  }
}

__global__ void ScaleKernel(float* x, float s, int64_t n) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) x[i] *= s;
}

// --- AdamW (adamw.cc, as CpuKernels::AdamW) ------------------------------------------------

__global__ void AdamWKernel(float* p, const float* g, float* m, float* v, int64_t n,
                            float grad_scale, AdamWArgs a) {
  const bool scaled = grad_scale != 1.0f;
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    float gi = g[i];
    if (scaled) gi *= grad_scale;
    m[i] = a.beta1 * m[i] + (1.0f - a.beta1) * gi;
    v[i] = a.beta2 * v[i] + (1.0f - a.beta2) * gi * gi;
    const float m_hat = m[i] * a.bias_correction1;
    const float v_hat = v[i] * a.bias_correction2;
    p[i] -= a.lr * (m_hat / (sqrtf(v_hat) + a.eps) + a.weight_decay * p[i]);
  }
}

// Round to nearest even; NaN stays NaN, overflow goes to infinity (as ToBf16).
__global__ void CastToBf16Kernel(const float* src, __nv_bfloat16* dst, int64_t n) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) dst[i] = __float2bfloat16_rn(src[i]);
}

}  // namespace

CudaKernels::CudaKernels(cudaStream_t stream, cublasHandle_t cublas)
    : workspace_(stream, cublas), f32_(workspace_), bf16_(workspace_), fp8_(workspace_) {}

double CudaKernels::VocabParallelLogSumExp(const float* all_stats, int64_t tp, float* lse,
                                           int64_t n) {
  if (n == 0) return 0;
  auto* row_loss = static_cast<float*>(
      workspace_.Grow(CudaWorkspace::Slot::kRows, n * static_cast<int64_t>(sizeof(float))));
  VocabParallelLogSumExpKernel<<<BlocksFor(n), kThreads, 0, workspace_.stream()>>>(
      all_stats, tp, lse, row_loss, n);
  SHARDSIM_CUDA_CHECK_LAUNCH();
  return workspace_.ReduceToHost(row_loss, n, /*square=*/false);
}

void CudaKernels::Scale(float* x, float s, int64_t n) {
  if (n == 0) return;
  ScaleKernel<<<BlocksFor(n), kThreads, 0, workspace_.stream()>>>(x, s, n);
  SHARDSIM_CUDA_CHECK_LAUNCH();
}

double CudaKernels::SumSquares(const float* x, int64_t n) {
  return workspace_.ReduceToHost(x, n, /*square=*/true);
}

void CudaKernels::AdamW(float* p, const float* g, float* m, float* v, int64_t n, float grad_scale,
                        const AdamWArgs& args) {
  if (n == 0) return;
  AdamWKernel<<<BlocksFor(n), kThreads, 0, workspace_.stream()>>>(p, g, m, v, n, grad_scale, args);
  SHARDSIM_CUDA_CHECK_LAUNCH();
}

void CudaKernels::CastToBf16(const float* src, Bf16* dst, int64_t n) {
  if (n == 0) return;
  CastToBf16Kernel<<<BlocksFor(n), kThreads, 0, workspace_.stream()>>>(src, ToDev(dst), n);
  SHARDSIM_CUDA_CHECK_LAUNCH();
}

}  // namespace shardsim::runtime
