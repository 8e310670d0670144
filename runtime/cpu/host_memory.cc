// See host_memory.h.
#include "runtime/cpu/host_memory.h"

#include <cstdlib>
#include <cstring>
#include <limits>

#include "src/util/check.h"

namespace shardsim::runtime {

HostMemory::~HostMemory() {
  CHECK(current().total() == 0) << current().total()
                                << " bytes still allocated when the HostMemory was destroyed";
}

void* HostMemory::RawAllocate(int64_t bytes) {
  // std::aligned_alloc wants a multiple of the alignment; it returns nullptr (never throws)
  // when the request cannot be met, including sizes beyond the address space.
  if (bytes <= 0 || bytes > std::numeric_limits<int64_t>::max() - kAlignment) return nullptr;
  const int64_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  return std::aligned_alloc(static_cast<size_t>(kAlignment), static_cast<size_t>(rounded));
}

void HostMemory::RawFree(void* p) { std::free(p); }

void HostMemory::CopyToDevice(void* dst, const void* host_src, int64_t bytes) {
  CHECK(bytes >= 0) << bytes;
  if (bytes > 0) std::memcpy(dst, host_src, static_cast<size_t>(bytes));
}

void HostMemory::CopyToHost(void* host_dst, const void* src, int64_t bytes) {
  CHECK(bytes >= 0) << bytes;
  if (bytes > 0) std::memcpy(host_dst, src, static_cast<size_t>(bytes));
}

void HostMemory::Copy(void* dst, const void* src, int64_t bytes) {
  CHECK(bytes >= 0) << bytes;
  if (bytes > 0 && dst != src) std::memmove(dst, src, static_cast<size_t>(bytes));
}

void HostMemory::Zero(void* dst, int64_t bytes) {
  CHECK(bytes >= 0) << bytes;
  if (bytes > 0) std::memset(dst, 0, static_cast<size_t>(bytes));
}

}  // namespace shardsim::runtime
