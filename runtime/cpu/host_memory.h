// HostMemory: the CPU backend's Memory, plain host RAM with 64-byte aligned blocks.
// "Device" pointers are host pointers here, so every copy is a memcpy.
#pragma once

#include <cstdint>

#include "runtime/backend/backend.h"

namespace shardsim::runtime {

// Blocks are aligned to 64 bytes (a cache line, and a full AVX-512 vector) so Eigen's packet
// loads on a buffer's start are aligned. Every DeviceBuffer must be freed before its
// HostMemory is destroyed (CHECKed).
class HostMemory : public Memory {
 public:
  static constexpr int64_t kAlignment = 64;

  HostMemory() = default;
  HostMemory(const HostMemory&) = delete;
  HostMemory& operator=(const HostMemory&) = delete;
  ~HostMemory() override;

  void CopyToDevice(void* dst, const void* host_src, int64_t bytes) override;
  void CopyToHost(void* host_dst, const void* src, int64_t bytes) override;
  void Copy(void* dst, const void* src, int64_t bytes) override;
  void Zero(void* dst, int64_t bytes) override;

 protected:
  void* RawAllocate(int64_t bytes) override;  // nullptr when the allocator refuses
  void RawFree(void* p) override;
};

}  // namespace shardsim::runtime
