// Error checks for CUDA, cuBLAS and NCCL calls: each turns a failed call into a Status naming
// the call, file:line and the library's own message, so a GPU failure reaches the user as an
// expected error (STYLE habit 3) rather than an abort.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <string>

#include "src/util/status.h"

namespace shardsim::runtime {

inline Status CudaError(cudaError_t e, const char* call, const char* file, int line) {
  return Status::Error(std::string(file) + ":" + std::to_string(line) + ": " + call +
                       " failed: " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

inline Status CublasError(cublasStatus_t s, const char* call, const char* file, int line) {
  return Status::Error(std::string(file) + ":" + std::to_string(line) + ": " + call + " failed: " +
                       cublasGetStatusName(s) + " (" + cublasGetStatusString(s) + ")");
}

}  // namespace shardsim::runtime

// `return` a Status from the calling function when the CUDA runtime call fails.
#define SHARDSIM_CUDA_RETURN_IF_ERROR(call)                                                      \
  do {                                                                                           \
    const cudaError_t _e = (call);                                                               \
    if (_e != cudaSuccess) return ::shardsim::runtime::CudaError(_e, #call, __FILE__, __LINE__); \
  } while (0)

#define SHARDSIM_CUBLAS_RETURN_IF_ERROR(call)                                 \
  do {                                                                        \
    const cublasStatus_t _s = (call);                                         \
    if (_s != CUBLAS_STATUS_SUCCESS)                                          \
      return ::shardsim::runtime::CublasError(_s, #call, __FILE__, __LINE__); \
  } while (0)

// For the Kernels and Memory interfaces, which return void: a failed launch or library call
// there is a broken invariant (bad shapes, a lost device), so it aborts with file:line and the
// message. Launch errors are read with cudaGetLastError right after each launch.
#define SHARDSIM_CUDA_CHECK(call)                                             \
  do {                                                                        \
    const cudaError_t _e = (call);                                            \
    CHECK(_e == cudaSuccess) << #call << ": " << cudaGetErrorName(_e) << " (" \
                             << cudaGetErrorString(_e) << ")";                \
  } while (0)

#define SHARDSIM_CUBLAS_CHECK(call)                                                              \
  do {                                                                                           \
    const cublasStatus_t _s = (call);                                                            \
    CHECK(_s == CUBLAS_STATUS_SUCCESS)                                                           \
        << #call << ": " << cublasGetStatusName(_s) << " (" << cublasGetStatusString(_s) << ")"; \
  } while (0)
