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

// glibc's malloc hands blocks of 128 KiB and more straight back to the kernel when freed (its
// mmap threshold, and trimming of the heap's top), so each micro-batch's activations and
// gradients land on fresh pages that the kernel faults in and zeroes again: measured 24,000 page
// faults a step, about 5 % of the step time, on models/small-17m.yaml in bf16 on one thread
// (`perf stat -e page-faults` over 2 and 6 steps). This keeps freed blocks for reuse: mmap only
// from glibc's largest threshold on (32 MiB, its maximum on 64-bit: mallopt(3) M_MMAP_THRESHOLD),
// no trimming, a 64 MiB pad when the heap grows. The heap then stays at the run's peak. Process-wide;
// `shardsim run` calls it once before training on the CPU backend. Returns whether glibc took
// all three settings (false off glibc, where it does nothing).
bool KeepFreedHostMemory();

}  // namespace shardsim::runtime
