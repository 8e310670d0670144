// See cuda_backend.h.
#include "runtime/cuda/cuda_backend.h"

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

#include "runtime/cuda/cuda_check.h"
#include "runtime/backend/local_collectives.h"
#include "src/util/check.h"

namespace shardsim::runtime {

int CudaBackend::CudaDeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // e.g. cudaErrorNoDevice, cudaErrorInsufficientDriver
    return 0;
  }
  return count;
}

StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(int device,
                                                           const CollectivesFactory& make_comm) {
  const int count = CudaDeviceCount();
  if (device < 0 || device >= count) {
    return Status::Error("CUDA device " + std::to_string(device) + " requested, " +
                         std::to_string(count) + " visible");
  }
  std::unique_ptr<CudaBackend> b(new CudaBackend());
  b->device_ = device;
  SHARDSIM_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  int pools = 0;  // CudaMemory allocates with cudaMallocAsync (cuda_memory.h says why)
  SHARDSIM_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device));
  if (pools == 0) {
    return Status::Error("CUDA device " + std::to_string(device) +
                         " does not support stream-ordered allocation (cudaMallocAsync)");
  }
  // The pool keeps what is freed instead of returning it to the driver at every
  // synchronisation (its default release threshold is 0): every buffer of a step is allocated
  // and freed again each step, and Now() synchronises at each phase boundary, so without this
  // each allocation would map fresh memory (as a caching allocator, e.g. PyTorch's, avoids).
  cudaMemPool_t pool = nullptr;
  SHARDSIM_CUDA_RETURN_IF_ERROR(cudaDeviceGetDefaultMemPool(&pool, device));
  uint64_t keep_all = UINT64_MAX;
  SHARDSIM_CUDA_RETURN_IF_ERROR(
      cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all));
  SHARDSIM_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&b->stream_, cudaStreamNonBlocking));
  SHARDSIM_CUBLAS_RETURN_IF_ERROR(cublasCreate(&b->cublas_));
  SHARDSIM_CUBLAS_RETURN_IF_ERROR(cublasSetStream(b->cublas_, b->stream_));
  // Plain fp32 GEMMs (no TF32 tensor-op rounding), so results compare with the CPU's at fp32
  // tolerance. The bf16 GEMMs switch to the default (tensor-op) mode for their own calls
  // (cuda_gemm.h); TF32 is a later increment.
  SHARDSIM_CUBLAS_RETURN_IF_ERROR(cublasSetMathMode(b->cublas_, CUBLAS_PEDANTIC_MATH));
  b->memory_ = std::make_unique<CudaMemory>(b->stream_);
  b->kernels_ = std::make_unique<CudaKernels>(b->stream_, b->cublas_);
  if (make_comm) {
    SHARDSIM_ASSIGN_OR_RETURN(b->comm_, make_comm(b->stream_));
    CHECK(b->comm_ != nullptr) << "the collectives factory returned null";
  } else {
    CudaMemory* memory = b->memory_.get();
    b->comm_ = std::make_unique<LocalCollectives>(
        [memory](void* dst, const void* src, int64_t bytes) { memory->Copy(dst, src, bytes); });
  }
  return b;
}

CudaBackend::~CudaBackend() {
  if (stream_ != nullptr) (void)cudaStreamSynchronize(stream_);
  ClearMarks();
  for (cudaEvent_t e : free_events_) (void)cudaEventDestroy(e);
  comm_.reset();
  kernels_.reset();
  memory_.reset();
  if (cublas_ != nullptr) (void)cublasDestroy(cublas_);
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
}

double CudaBackend::Now() {
  SHARDSIM_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int64_t CudaBackend::Mark() {
  auto record = [this] {
    cudaEvent_t e = nullptr;
    if (free_events_.empty()) {
      SHARDSIM_CUDA_CHECK(cudaEventCreate(&e));
    } else {
      e = free_events_.back();
      free_events_.pop_back();
    }
    SHARDSIM_CUDA_CHECK(cudaEventRecord(e, stream_));
    marks_.push_back(e);
    return static_cast<int64_t>(marks_.size()) - 1;
  };
  if (marks_.empty()) {  // the base, read on the host clock once
    record();
    SHARDSIM_CUDA_CHECK(cudaEventSynchronize(marks_[0]));
    base_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }
  return record();
}

double CudaBackend::MarkSeconds(int64_t mark) {
  CHECK(mark >= 0 && mark < static_cast<int64_t>(marks_.size())) << "no mark " << mark;
  SHARDSIM_CUDA_CHECK(cudaEventSynchronize(marks_[mark]));
  float ms = 0;
  SHARDSIM_CUDA_CHECK(cudaEventElapsedTime(&ms, marks_[0], marks_[mark]));
  return base_s_ + 1e-3 * static_cast<double>(ms);
}

void CudaBackend::ClearMarks() {
  free_events_.insert(free_events_.end(), marks_.begin(), marks_.end());
  marks_.clear();
}

int64_t CudaBackend::DeviceBytesInUse() {
  size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) return -1;
  return static_cast<int64_t>(total - free);
}

}  // namespace shardsim::runtime
