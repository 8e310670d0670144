// Error check for NCCL calls, the companion of cuda_check.h: a failed call becomes a Status
// naming the call, file:line and ncclGetErrorString (plus NCCL's last error text).
#pragma once

#include <nccl.h>

#include <string>

#include "src/util/status.h"

namespace shardsim::runtime {

inline Status NcclError(ncclResult_t r, const char* call, const char* file, int line) {
  return Status::Error(std::string(file) + ":" + std::to_string(line) + ": " + call + " failed: " +
                       ncclGetErrorString(r) + " (" + ncclGetLastError(nullptr) + ")");
}

}  // namespace shardsim::runtime

#define SHARDSIM_NCCL_RETURN_IF_ERROR(call)                                                      \
  do {                                                                                           \
    const ncclResult_t _r = (call);                                                              \
    if (_r != ncclSuccess) return ::shardsim::runtime::NcclError(_r, #call, __FILE__, __LINE__); \
  } while (0)
