// See emu_runtime.h.
#include "tests/cuda_emu/emu_runtime.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

struct CUstream_st {};
struct CUevent_st {
  bool recorded = false;
  double host_s = 0;  // steady_clock when recorded
};
struct CUmemPoolHandle_st {
  uint64_t release_threshold = 0;
};

namespace {

constexpr size_t kTotalBytes = size_t{141} * 1000 * 1000 * 1000;  // an H200's 141 GB
constexpr size_t kAlignment = 256;                                 // cudaMalloc's

std::mutex g_mutex;
cudaError_t g_last = cudaSuccess;
std::map<const unsigned char*, size_t> g_device;  // live device allocations: start -> bytes
size_t g_device_bytes = 0;
std::set<const CUstream_st*> g_streams;
std::set<const CUevent_st*> g_events;
CUmemPoolHandle_st g_pool;

// Returns e, and keeps it for cudaGetLastError when it is an error.
cudaError_t Result(cudaError_t e) {
  if (e != cudaSuccess) g_last = e;
  return e;
}

// Whether [p, p + bytes) lies inside one live device allocation (g_mutex held).
bool OnDevice(const void* p, size_t bytes) {
  const auto* b = static_cast<const unsigned char*>(p);
  auto it = g_device.upper_bound(b);
  if (it == g_device.begin()) return false;
  --it;
  return b >= it->first && b + bytes <= it->first + it->second;
}

bool StreamOk(cudaStream_t s) { return s == nullptr || g_streams.count(s) != 0; }

double HostSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
  }
  return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInsufficientDriver:
      return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
  }
  return "unknown error";
}

cudaError_t cudaGetLastError() {
  const std::lock_guard<std::mutex> lock(g_mutex);
  const cudaError_t e = g_last;
  g_last = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError() {
  const std::lock_guard<std::mutex> lock(g_mutex);
  return g_last;
}

cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  const std::lock_guard<std::mutex> lock(g_mutex);
  return Result(device == 0 ? cudaSuccess : cudaErrorInvalidDevice);
}

cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (device != 0) {
    const std::lock_guard<std::mutex> lock(g_mutex);
    return Result(cudaErrorInvalidDevice);
  }
  switch (attr) {
    case cudaDevAttrMultiProcessorCount: *value = 132; break;
    case cudaDevAttrComputeCapabilityMajor: *value = 9; break;
    case cudaDevAttrComputeCapabilityMinor: *value = 0; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin:
      *value = static_cast<int>(cuda_emu::kMaxSharedOptin);
      break;
    case cudaDevAttrMemoryPoolsSupported: *value = 1; break;
    default: CUDA_EMU_CHECK(false, "device attribute %d is not emulated", attr);
  }
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }

cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  const std::lock_guard<std::mutex> lock(g_mutex);
  *total = kTotalBytes;
  *free = kTotalBytes - g_device_bytes;
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** p, size_t bytes) { return cudaMallocAsync(p, bytes, nullptr); }
cudaError_t cudaFree(void* p) { return cudaFreeAsync(p, nullptr); }

cudaError_t cudaMallocAsync(void** p, size_t bytes, cudaStream_t stream) {
  const std::lock_guard<std::mutex> lock(g_mutex);
  *p = nullptr;
  if (!StreamOk(stream)) return Result(cudaErrorInvalidResourceHandle);
  if (bytes == 0) return cudaSuccess;
  if (bytes > kTotalBytes - g_device_bytes) return Result(cudaErrorMemoryAllocation);
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* q = std::aligned_alloc(kAlignment, rounded);
  if (q == nullptr) return Result(cudaErrorMemoryAllocation);
  std::memset(q, 0xff, rounded);  // NaN: a read of memory never written shows
  g_device[static_cast<unsigned char*>(q)] = bytes;
  g_device_bytes += bytes;
  *p = q;
  return cudaSuccess;
}

cudaError_t cudaFreeAsync(void* p, cudaStream_t stream) {
  const std::lock_guard<std::mutex> lock(g_mutex);
  if (!StreamOk(stream)) return Result(cudaErrorInvalidResourceHandle);
  if (p == nullptr) return cudaSuccess;
  const auto it = g_device.find(static_cast<unsigned char*>(p));
  if (it == g_device.end()) return Result(cudaErrorInvalidValue);
  g_device_bytes -= it->second;
  g_device.erase(it);
  std::free(p);
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** p, size_t bytes) {
  *p = std::aligned_alloc(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
  const std::lock_guard<std::mutex> lock(g_mutex);
  return Result(*p == nullptr && bytes > 0 ? cudaErrorMemoryAllocation : cudaSuccess);
}

cudaError_t cudaFreeHost(void* p) {
  std::free(p);
  return cudaSuccess;
}

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int device) {
  const std::lock_guard<std::mutex> lock(g_mutex);
  if (device != 0) return Result(cudaErrorInvalidDevice);
  *pool = &g_pool;
  return cudaSuccess;
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void* value) {
  const std::lock_guard<std::mutex> lock(g_mutex);
  if (pool != &g_pool || attr != cudaMemPoolAttrReleaseThreshold) {
    return Result(cudaErrorInvalidValue);
  }
  std::memcpy(&pool->release_threshold, value, sizeof(uint64_t));
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  const std::lock_guard<std::mutex> lock(g_mutex);
  if (!StreamOk(stream)) return Result(cudaErrorInvalidResourceHandle);
  if (bytes == 0) return cudaSuccess;
  const bool dst_device = OnDevice(dst, bytes), src_device = OnDevice(src, bytes);
  bool ok = false;
  switch (kind) {
    case cudaMemcpyHostToHost: ok = true; break;
    case cudaMemcpyHostToDevice: ok = dst_device; break;
    case cudaMemcpyDeviceToHost: ok = src_device; break;
    case cudaMemcpyDeviceToDevice: ok = dst_device && src_device; break;
    case cudaMemcpyDefault: ok = true; break;
  }
  if (!ok) return Result(cudaErrorInvalidValue);
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  return cudaMemcpyAsync(dst, src, bytes, kind, nullptr);
}

cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t stream) {
  const std::lock_guard<std::mutex> lock(g_mutex);
  if (!StreamOk(stream)) return Result(cudaErrorInvalidResourceHandle);
  if (bytes == 0) return cudaSuccess;
  if (!OnDevice(dst, bytes)) return Result(cudaErrorInvalidValue);
  std::memset(dst, value, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemset(void* dst, int value, size_t bytes) {
  return cudaMemsetAsync(dst, value, bytes, nullptr);
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags) {
  const std::lock_guard<std::mutex> lock(g_mutex);
  if (flags > cudaStreamNonBlocking) return Result(cudaErrorInvalidValue);
  *stream = new CUstream_st;
  g_streams.insert(*stream);
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  const std::lock_guard<std::mutex> lock(g_mutex);
  if (stream == nullptr || g_streams.erase(stream) == 0) {
    return Result(cudaErrorInvalidResourceHandle);
  }
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  const std::lock_guard<std::mutex> lock(g_mutex);
  return StreamOk(stream) ? cudaSuccess : Result(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  const std::lock_guard<std::mutex> lock(g_mutex);
  *event = new CUevent_st;
  g_events.insert(*event);
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  const std::lock_guard<std::mutex> lock(g_mutex);
  if (g_events.erase(event) == 0) return Result(cudaErrorInvalidResourceHandle);
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  const std::lock_guard<std::mutex> lock(g_mutex);
  if (g_events.count(event) == 0 || !StreamOk(stream)) {
    return Result(cudaErrorInvalidResourceHandle);
  }
  event->recorded = true;
  event->host_s = HostSeconds();
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  const std::lock_guard<std::mutex> lock(g_mutex);
  return g_events.count(event) != 0 ? cudaSuccess : Result(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  const std::lock_guard<std::mutex> lock(g_mutex);
  if (g_events.count(start) == 0 || g_events.count(end) == 0 || !start->recorded ||
      !end->recorded) {
    return Result(cudaErrorInvalidResourceHandle);
  }
  *ms = static_cast<float>(1e3 * (end->host_s - start->host_s));
  return cudaSuccess;
}
