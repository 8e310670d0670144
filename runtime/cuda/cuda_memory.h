// CudaMemory: the CUDA backend's Memory: cudaMalloc'd device memory, and copies and memsets
// issued on the backend's compute stream, so they are ordered with the kernels.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/backend/backend.h"

namespace shardsim::runtime {

// Contract of each copy (backend.h gives none beyond "copies"): CopyToDevice and CopyToHost
// synchronise the stream before returning, since the host buffer may be reused or read at once;
// Copy and Zero are only enqueued. Every DeviceBuffer must be freed before the CudaMemory is
// destroyed (CHECKed).
class CudaMemory : public Memory {
 public:
  explicit CudaMemory(cudaStream_t stream) : stream_(stream) {}
  CudaMemory(const CudaMemory&) = delete;
  CudaMemory& operator=(const CudaMemory&) = delete;
  ~CudaMemory() override;

  void CopyToDevice(void* dst, const void* host_src, int64_t bytes) override;
  void CopyToHost(void* host_dst, const void* src, int64_t bytes) override;
  void Copy(void* dst, const void* src, int64_t bytes) override;
  void Zero(void* dst, int64_t bytes) override;

 protected:
  // nullptr when cudaMalloc refuses (out of memory, no device); the sticky-free error state is
  // cleared so the next call is not blamed for it. Never throws or aborts.
  void* RawAllocate(int64_t bytes) override;
  // cudaFree synchronises the device: a buffer is never freed under a kernel still using it.
  void RawFree(void* p) override;

 private:
  cudaStream_t stream_;
};

}  // namespace shardsim::runtime
