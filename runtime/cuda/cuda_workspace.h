// CudaWorkspace: what CudaKernels' fp32 and bf16 halves share: the compute stream, the GEMM
// entry point (cuBLASLt / cuBLAS, cuda_gemm.h), device scratch that grows on demand, and the
// deterministic sum-to-host reduction.
// One object, so the two storage types' kernels use one set of scratch buffers.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/cuda/cuda_gemm.h"

namespace shardsim::runtime {

class CudaWorkspace {
 public:
  // Scratch buffers by use. Held outside Memory's accounting (as the cuBLAS workspace is): a few
  // MB at the sizes the runtime trains.
  enum class Slot : int {
    kRows,       // per-row losses: n floats
    kPartials,   // the reduction's per-block partial sums: kReduceBlocks doubles
    kAttention,  // attention's per-(sequence, KV head) scores / dP / dS (and the flash
                 // variant's P): (group, T, T), and bf16 dK / dV accumulators (T, d); see
                 // cuda_attention.cu for the layout per storage type
    kColumns,    // column sums' per-chunk partials: 2 x ceil(n / 64) x c floats
    kTokens,     // embedding backward's per-row links: n int32 + n bytes
    kFlash,      // the fused attention backward's delta and GQA partials
                 // (flash_fused::BackwardWorkspaceBytes)
    kFp8,        // CudaFp8Kernels: the amax, a GEMM's fp32 C and decoded bf16 operands
  };

  // `stream` and `cublas` (already bound to `stream`) are owned by the caller (CudaBackend) and
  // outlive this object.
  CudaWorkspace(cudaStream_t stream, cublasHandle_t cublas);
  CudaWorkspace(const CudaWorkspace&) = delete;
  CudaWorkspace& operator=(const CudaWorkspace&) = delete;
  ~CudaWorkspace();

  cudaStream_t stream() const { return stream_; }
  cuda_gemm::Gemm& gemm() { return gemm_; }

  // At least `bytes` of device scratch in `slot`, valid until the next Grow of that slot;
  // stream-ordered (cudaMallocAsync / cudaFreeAsync), so work already enqueued on the old block
  // finishes before it is reused. Never shrinks.
  void* Grow(Slot slot, int64_t bytes);

  // sum_i x[i] (or x[i]^2) in double over n floats, deterministic (fixed grid, fixed tree),
  // copied to the host after synchronising the stream.
  double ReduceToHost(const float* x, int64_t n, bool square);

 private:
  struct Scratch {
    void* data = nullptr;
    int64_t bytes = 0;
  };
  static constexpr int kSlots = 7;

  cudaStream_t stream_;
  cuda_gemm::Gemm gemm_;
  Scratch scratch_[kSlots];
  double* host_result_ = nullptr;  // pinned, one double
};

}  // namespace shardsim::runtime
