// See cuda_memory.h.
#include "runtime/cuda/cuda_memory.h"

#include "runtime/cuda/cuda_check.h"
#include "src/util/check.h"

namespace shardsim::runtime {

CudaMemory::~CudaMemory() {
  CHECK(current().total() == 0) << current().total()
                                << " bytes still allocated when the CudaMemory was destroyed";
}

void* CudaMemory::RawAllocate(int64_t bytes) {
  if (bytes <= 0) return nullptr;
  void* p = nullptr;
  if (cudaMallocAsync(&p, static_cast<size_t>(bytes), stream_) != cudaSuccess) {
    (void)cudaGetLastError();  // out of memory is not sticky: clear it for the next call
    return nullptr;
  }
  return p;
}

void CudaMemory::RawFree(void* p) { SHARDSIM_CUDA_CHECK(cudaFreeAsync(p, stream_)); }

void CudaMemory::CopyToDevice(void* dst, const void* host_src, int64_t bytes) {
  CHECK(bytes >= 0) << bytes;
  if (bytes == 0) return;
  SHARDSIM_CUDA_CHECK(
      cudaMemcpyAsync(dst, host_src, static_cast<size_t>(bytes), cudaMemcpyHostToDevice, stream_));
  SHARDSIM_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaMemory::CopyToHost(void* host_dst, const void* src, int64_t bytes) {
  CHECK(bytes >= 0) << bytes;
  if (bytes == 0) return;
  SHARDSIM_CUDA_CHECK(
      cudaMemcpyAsync(host_dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost, stream_));
  SHARDSIM_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaMemory::Copy(void* dst, const void* src, int64_t bytes) {
  CHECK(bytes >= 0) << bytes;
  if (bytes == 0 || dst == src) return;
  SHARDSIM_CUDA_CHECK(
      cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, stream_));
}

void CudaMemory::Zero(void* dst, int64_t bytes) {
  CHECK(bytes >= 0) << bytes;
  if (bytes > 0) SHARDSIM_CUDA_CHECK(cudaMemsetAsync(dst, 0, static_cast<size_t>(bytes), stream_));
}

}  // namespace shardsim::runtime
