// Kernel launches on the host for the CUDA emulator: each block runs as blockDim.x std::threads
// (one per CUDA thread), blocks one after another; __syncthreads and __syncwarp are barriers
// and __shfl_xor_sync goes through a per-warp exchange array. A launch first checks what the
// hardware would refuse (block and grid sizes, dynamic shared memory against the kernel's
// cudaFuncSetAttribute value and sm_90's opt-in limit), and each block ends with checks the
// hardware would not make but a correct kernel passes: every thread reached the same number of
// __syncthreads (each lane of a warp the same number of __syncwarp), and nothing was written
// past the block's dynamic shared memory. Dynamic shared memory starts each block as 0xff
// bytes (NaN as fp32 and bf16), so a read of a word the block never wrote shows in the results.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "tests/cuda_emu/emu_device.h"

namespace cuda_emu {

// The order blocks run in. A kernel whose blocks each own their outputs gives bitwise the same
// results either way; the test flips it to check that.
enum class BlockOrder { kForward, kReverse };
void SetBlockOrder(BlockOrder order);

// Launches so far (all kernels).
int64_t Launches();

// The running block's dynamic shared memory (128-byte aligned) and its size: the launch's
// third <<< >>> argument. cuda_to_cc.cmake turns `extern __shared__ T name[];` into a pointer
// to it.
unsigned char* DynamicSharedMemory();
size_t DynamicSharedBytes();

// Runs `body` as every thread of every block of the grid (see the file comment).
void RunGrid(const void* kernel, dim3 grid, dim3 block, size_t shared_bytes,
             const std::function<void()>& body);

// kernel<<<grid, block, shared_bytes, stream>>>(args...), as cuda_to_cc.cmake rewrites it. The
// arguments are converted to the kernel's parameter types once, as a launch copies them.
template <typename... P, typename... A>
void Launch(dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t, void (*kernel)(P...),
            A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "kernel launched with the wrong argument count");
  const std::tuple<std::decay_t<P>...> params(std::forward<A>(args)...);
  RunGrid(reinterpret_cast<const void*>(kernel), grid, block, shared_bytes,
          [&] { std::apply(kernel, params); });
}

// Warp-level exchange of one 32-bit value (emu_launch.cc).
uint32_t ShuffleXor(uint32_t bits, int lane_mask);

}  // namespace cuda_emu

// The block-wide and warp-wide barriers. Only full warps are modelled: mask must be all 32 lanes.
void __syncthreads();
void __syncwarp(unsigned mask = 0xffffffffu);

template <typename T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask) {
  static_assert(sizeof(T) == 4 && std::is_trivially_copyable_v<T>, "32-bit shuffles only");
  CUDA_EMU_CHECK(mask == 0xffffffffu, "shuffle mask %#x: only full warps are emulated", mask);
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  bits = cuda_emu::ShuffleXor(bits, lane_mask);
  std::memcpy(&v, &bits, sizeof v);
  return v;
}
