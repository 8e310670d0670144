// CudaBackend: the Backend of backend.h on one NVIDIA GPU: CudaMemory, CudaKernels (cuBLAS and
// CUDA kernels) on one compute stream, and the collectives given (NcclCollectives under mpirun,
// LocalCollectives over device copies for one process).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <functional>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/cuda/cuda_kernels.h"
#include "runtime/cuda/cuda_memory.h"

namespace shardsim::runtime {

class CudaBackend : public Backend {
 public:
  // Builds the collectives on the backend's compute stream (its device is current when called).
  using CollectivesFactory =
      std::function<StatusOr<std::unique_ptr<Collectives>>(cudaStream_t compute)>;

  // GPUs visible to this process; 0 when there is no driver, no device, or the runtime fails
  // to start (never aborts), so callers and tests can skip cleanly.
  static int CudaDeviceCount();

  // Makes `device` current for this thread and creates the stream, the cuBLAS handle (fp32
  // math, no TF32; bf16 GEMMs on tensor cores), memory and kernels (fp32 and bf16), then the
  // collectives from `make_comm`
  // (LocalCollectives when empty). Errors name the failing CUDA/cuBLAS call.
  static StatusOr<std::unique_ptr<CudaBackend>> Create(int device,
                                                       const CollectivesFactory& make_comm = {});
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;
  // Every DeviceBuffer must be freed first (CudaMemory CHECKs it).
  ~CudaBackend() override;

  std::string_view name() const override { return "cuda"; }
  Memory& memory() override { return *memory_; }
  Kernels& kernels() override { return *kernels_; }
  Collectives& comm() override { return *comm_; }
  // steady_clock in seconds, after cudaStreamSynchronize on the compute stream (the
  // collectives' streams are joined into it). A device error here is fatal (CHECK).
  double Now() override;
  // CUDA events recorded on the compute stream (from a pool reused across steps). The first
  // mark after ClearMarks also synchronises once and reads the host clock there: every other
  // mark's time is that reading plus cudaEventElapsedTime from it (0.5 us resolution).
  int64_t Mark() override;
  double MarkSeconds(int64_t mark) override;
  void ClearMarks() override;
  int64_t DeviceBytesInUse() override;  // cudaMemGetInfo: total - free

  // Replaces the collectives: for ones that need the backend's memory (EmulatedCollectives).
  void SetCollectives(std::unique_ptr<Collectives> comm) { comm_ = std::move(comm); }

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }

 private:
  CudaBackend() = default;

  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  std::unique_ptr<CudaMemory> memory_;
  std::unique_ptr<CudaKernels> kernels_;
  std::unique_ptr<Collectives> comm_;
  std::vector<cudaEvent_t> marks_;       // marks_[0] is the base
  std::vector<cudaEvent_t> free_events_;  // the pool
  double base_s_ = 0;                     // host time of marks_[0]
};

}  // namespace shardsim::runtime
