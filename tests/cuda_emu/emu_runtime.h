// The CUDA runtime API that runtime/cuda's host code calls, for the CPU emulator: one emulated
// H200 (sm_90, 132 SMs, 232,448 B opt-in shared memory per block, 141 GB). Everything runs at
// once on the calling thread: a launch, copy or memset has finished when the call returns, so
// streams only order what is already ordered, and synchronisation returns at once. Device
// memory is host memory (256-byte aligned, filled with 0xff bytes, NaN as fp32 and bf16, when
// allocated, as cudaMalloc's is not zeroed); copies and memsets check that their device side
// lies inside a live allocation. Events record the host clock, so elapsed times are the host's
// time between the records, not the device's. Errors are returned (and kept for
// cudaGetLastError) as the runtime does for the cases emulated; anything else aborts.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tests/cuda_emu/emu_device.h"

using cudaStream_t = struct CUstream_st*;
using cudaEvent_t = struct CUevent_st*;
using cudaMemPool_t = struct CUmemPoolHandle_st*;

// The values of CUDA 12's driver_types.h.
enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInsufficientDriver = 35,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
};
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
enum cudaDeviceAttr {
  cudaDevAttrMultiProcessorCount = 16,
  cudaDevAttrComputeCapabilityMajor = 75,
  cudaDevAttrComputeCapabilityMinor = 76,
  cudaDevAttrMaxSharedMemoryPerBlockOptin = 97,
  cudaDevAttrMemoryPoolsSupported = 115,
};
enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};
enum cudaMemPoolAttr { cudaMemPoolAttrReleaseThreshold = 4 };
inline constexpr unsigned cudaStreamDefault = 0x00;
inline constexpr unsigned cudaStreamNonBlocking = 0x01;

namespace cuda_emu {
// sm_90's opt-in dynamic shared memory per block (cudaDevAttrMaxSharedMemoryPerBlockOptin on
// H100 and H200: 227 KiB), and the default without cudaFuncSetAttribute (48 KiB).
inline constexpr size_t kMaxSharedOptin = 232448;
inline constexpr size_t kDefaultShared = 48 * 1024;
// Records a kernel's cudaFuncAttributeMaxDynamicSharedMemorySize (emu_launch.cc).
void SetMaxDynamicShared(const void* kernel, int bytes);
}  // namespace cuda_emu

const char* cudaGetErrorName(cudaError_t e);
const char* cudaGetErrorString(cudaError_t e);
cudaError_t cudaGetLastError();  // and resets it to cudaSuccess
cudaError_t cudaPeekAtLastError();

cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaMemGetInfo(size_t* free, size_t* total);

cudaError_t cudaMalloc(void** p, size_t bytes);
cudaError_t cudaFree(void* p);
cudaError_t cudaMallocAsync(void** p, size_t bytes, cudaStream_t stream);
cudaError_t cudaFreeAsync(void* p, cudaStream_t stream);
cudaError_t cudaMallocHost(void** p, size_t bytes);
cudaError_t cudaFreeHost(void* p);
// cuda_runtime.h's typed overloads.
template <typename T>
cudaError_t cudaMallocAsync(T** p, size_t bytes, cudaStream_t stream) {
  return cudaMallocAsync(reinterpret_cast<void**>(p), bytes, stream);
}
template <typename T>
cudaError_t cudaMallocHost(T** p, size_t bytes) {
  return cudaMallocHost(reinterpret_cast<void**>(p), bytes);
}
cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int device);
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void* value);

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream = nullptr);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t stream = nullptr);
cudaError_t cudaMemset(void* dst, int value, size_t bytes);

cudaError_t cudaStreamCreate(cudaStream_t* stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);

cudaError_t cudaEventCreate(cudaEvent_t* event);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = nullptr);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);

template <typename... P>
cudaError_t cudaFuncSetAttribute(void (*kernel)(P...), cudaFuncAttribute attr, int value) {
  CUDA_EMU_CHECK(attr == cudaFuncAttributeMaxDynamicSharedMemorySize, "attribute %d", attr);
  cuda_emu::SetMaxDynamicShared(reinterpret_cast<const void*>(kernel), value);
  return cudaSuccess;
}
