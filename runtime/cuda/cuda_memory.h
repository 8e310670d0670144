// CudaMemory: the CUDA backend's Memory: device memory from the stream-ordered allocator
// (cudaMallocAsync), and copies and memsets issued on the backend's compute stream, so they are
// ordered with the kernels.
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
  // cudaMallocAsync on the compute stream; nullptr when it refuses (out of memory, no device),
  // the error cleared so the next call is not blamed for it. Never throws or aborts.
  void* RawAllocate(int64_t bytes) override;
  // cudaFreeAsync on the compute stream: the memory is reused only after the work enqueued
  // there so far, so a buffer is never freed under a kernel still using it. Not cudaFree, which
  // synchronises the whole device and so waits on NCCL kernels of other streams: a pending
  // pipeline send, complete only once the peer posts its receive, would stall this rank (and,
  // with the peer doing the same, deadlock both; NCCL's guide, "Using multiple NCCL
  // communicators concurrently"). Buffers used by a communication stream are the caller's to
  // keep alive until the operation completes (backend.h's Isend / IallReduceSum contract).
  void RawFree(void* p) override;

 private:
  cudaStream_t stream_;
};

}  // namespace shardsim::runtime
