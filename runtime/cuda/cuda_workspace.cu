// See cuda_workspace.h.
#include <cuda_runtime.h>

#include "runtime/cuda/cuda_device.cuh"
#include "runtime/cuda/cuda_workspace.h"

namespace shardsim::runtime {
namespace {

using cuda_device::BlockSum;
using cuda_device::GlobalIndex;
using cuda_device::GlobalStride;
using cuda_device::kThreads;

// Stage 1: block b sums a fixed strided subset of x (x^2 when `square`) in double into
// partials[b]. Stage 2: one block sums the partials. Grid and block sizes are constants, so
// the order of additions, and thus the result, is the same on every run.
constexpr int kReduceBlocks = 256;

__global__ void PartialSumKernel(const float* x, int64_t n, bool square, double* partials) {
  double s = 0;
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    const double xi = x[i];
    s += square ? xi * xi : xi;
  }
  const double total = BlockSum(s);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

__global__ void FinalSumKernel(double* partials, int count) {
  double s = 0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) s += partials[i];
  const double total = BlockSum(s);
  if (threadIdx.x == 0) partials[0] = total;
}

}  // namespace

CudaWorkspace::CudaWorkspace(cudaStream_t stream, cublasHandle_t cublas)
    : stream_(stream), gemm_(stream, cublas) {
  SHARDSIM_CUDA_CHECK(cudaMallocHost(&host_result_, sizeof(double)));
}

CudaWorkspace::~CudaWorkspace() {
  // The scratch is freed in stream order, after the pending work that may still use it, and the
  // stream drained before the pinned result goes (errors here are ignored; the process is
  // ending or the device is already lost).
  for (Scratch& s : scratch_) {
    if (s.data != nullptr) (void)cudaFreeAsync(s.data, stream_);
  }
  (void)cudaStreamSynchronize(stream_);
  (void)cudaFreeHost(host_result_);
}

void* CudaWorkspace::Grow(Slot slot, int64_t bytes) {
  Scratch& s = scratch_[static_cast<int>(slot)];
  if (bytes > s.bytes) {
    // Stream-ordered, as CudaMemory: the old block is reused only after the kernels enqueued so
    // far, and no device-wide synchronisation waits on NCCL kernels (cuda_memory.h).
    if (s.data != nullptr) SHARDSIM_CUDA_CHECK(cudaFreeAsync(s.data, stream_));
    s.data = nullptr;
    s.bytes = 0;
    SHARDSIM_CUDA_CHECK(cudaMallocAsync(&s.data, static_cast<size_t>(bytes), stream_));
    s.bytes = bytes;
  }
  return s.data;
}

double CudaWorkspace::ReduceToHost(const float* x, int64_t n, bool square) {
  if (n <= 0) return 0;
  auto* partials = static_cast<double*>(Grow(Slot::kPartials, kReduceBlocks * sizeof(double)));
  PartialSumKernel<<<kReduceBlocks, kThreads, 0, stream_>>>(x, n, square, partials);
  SHARDSIM_CUDA_CHECK_LAUNCH();
  FinalSumKernel<<<1, kThreads, 0, stream_>>>(partials, kReduceBlocks);
  SHARDSIM_CUDA_CHECK_LAUNCH();
  SHARDSIM_CUDA_CHECK(
      cudaMemcpyAsync(host_result_, partials, sizeof(double), cudaMemcpyDeviceToHost, stream_));
  SHARDSIM_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return *host_result_;
}

}  // namespace shardsim::runtime
