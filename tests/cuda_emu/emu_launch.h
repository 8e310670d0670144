// Kernel launches on the host for the CUDA emulator: each block runs as blockDim.x fibers (one
// per CUDA thread, cooperative, on the launching OS thread), blocks one after another;
// __syncthreads and __syncwarp are barriers at which a fiber waits until every live thread of
// the block (of the warp) has reached it, and __shfl_xor_sync goes through a per-warp exchange
// array. Threads left waiting at different barriers abort the launch (a GPU would hang). A launch first checks what the
// hardware would refuse (block and grid sizes, dynamic shared memory against the kernel's
// cudaFuncSetAttribute value and sm_90's opt-in limit), and each block ends with checks the
// hardware would not make but a correct kernel passes: every thread reached the same number of
// __syncthreads (each lane of a warp the same number of __syncwarp), and nothing was written
// past the block's dynamic shared memory or a static __shared__ array. All shared memory starts
// each block as 0xff bytes (NaN as fp32 and bf16), so a read of a word the block never wrote
// shows in the results.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "tests/cuda_emu/emu_runtime.h"

namespace cuda_emu {

// The order blocks run in, and the threads of a block between its barriers (fibers run one at
// a time, each until it waits: in thread order, or the reverse). A kernel whose blocks each own
// their outputs gives bitwise the same results either way, and so does one whose threads meet
// at a barrier between a shared-memory write and another thread's read of it; without that
// barrier one of the two orders reads the word before it is written (NaN, 0xff bytes) or a
// stale value. The tests flip it to check both.
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

// kernel<<<grid, block, shared_bytes, stream>>>(args...) for a kernel given by its pointer. The
// arguments are converted to the kernel's parameter types once, as a launch copies them.
template <typename... P, typename... A>
void Launch(dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t, void (*kernel)(P...),
            A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "kernel launched with the wrong argument count");
  const std::tuple<std::decay_t<P>...> params(std::forward<A>(args)...);
  RunGrid(reinterpret_cast<const void*>(kernel), grid, block, shared_bytes,
          [&] { std::apply(kernel, params); });
}

// A kernel named at a launch site (CUDA_EMU_KERNEL): `id` its address when the name is one
// function, nullptr for a template, whose instance the call deduces from the arguments as
// `Name<<<...>>>(args)` does (only the pointer's cudaFuncSetAttribute value needs it);
// `call(args...)` calls it.
template <typename F>
struct NamedKernel {
  const void* id;
  F call;
};
// C++20 deduces an aggregate's template arguments by itself; clang 14 does not implement that
// yet (P1816), so the guide is spelled out.
template <typename F>
NamedKernel(const void*, F) -> NamedKernel<F>;
template <typename Tag, typename... P>
const void* AddressOf(void (*kernel)(P...)) {
  return reinterpret_cast<const void*>(kernel);
}

// Name<<<grid, block, shared_bytes, stream>>>(args...) as cuda_to_cc.cmake rewrites it. The
// arguments are copied once (decayed), as a launch copies them; each thread converts them to
// the parameter types (a pure conversion, so the same values).
template <typename F, typename... A>
void Launch(dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t, const NamedKernel<F>& kernel,
            A&&... args) {
  const std::tuple<std::decay_t<A>...> params(std::forward<A>(args)...);
  RunGrid(kernel.id, grid, block, shared_bytes, [&] { std::apply(kernel.call, params); });
}

// Registers a static __shared__ array's storage (`bytes`, then `guard` bytes that must stay
// 0xff): it is filled with 0xff now and at the start of every block, and its guard checked at
// the end of every block (emu_launch.cc).
void RegisterStaticShared(unsigned char* storage, size_t bytes, size_t guard);
inline constexpr size_t kStaticSharedGuard = 64;

// `__shared__ T name[N];` in a kernel or device function, as cuda_to_cc.cmake rewrites it:
// `auto& name = StaticShared<T[N]>([] {});`. One array per declaration (the lambda's type is
// unique to it, and to each instance of an enclosing template, as each instance's __shared__
// variable is its own on the device), shared by every thread that reaches it. Blocks run one at
// a time, so one array per declaration is exactly the running block's.
template <typename A, typename Site>
A& StaticShared(Site) {
  struct Storage {
    alignas(16) A array;
    unsigned char guard[kStaticSharedGuard];
  };
  static Storage s;
  static const bool registered =
      (RegisterStaticShared(reinterpret_cast<unsigned char*>(&s), sizeof(A), kStaticSharedGuard),
       true);
  (void)registered;
  return s.array;
}

// Warp-level exchange of one 32- or 64-bit value (emu_launch.cc).
uint64_t ShuffleXor(uint64_t bits, int lane_mask);

}  // namespace cuda_emu

// The kernel `name` at a launch site (cuda_to_cc.cmake): a cuda_emu::NamedKernel.
#define CUDA_EMU_KERNEL(name)                                                                 \
  ::cuda_emu::NamedKernel{[](auto tag) -> const void* {                                     \
                            if constexpr (requires {                                        \
                                            ::cuda_emu::AddressOf<decltype(tag)>(name);     \
                                          }) {                                              \
                              return ::cuda_emu::AddressOf<decltype(tag)>(name);            \
                            } else {                                                        \
                              return nullptr;                                               \
                            }                                                               \
                          }(0),                                                             \
                          [](auto&&... a) { name(static_cast<decltype(a)>(a)...); }}

// The block-wide and warp-wide barriers. Only full warps are modelled: mask must be all 32 lanes.
void __syncthreads();
void __syncwarp(unsigned mask = 0xffffffffu);

template <typename T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask) {
  static_assert((sizeof(T) == 4 || sizeof(T) == 8) && std::is_trivially_copyable_v<T>,
                "32- and 64-bit shuffles only");
  CUDA_EMU_CHECK(mask == 0xffffffffu, "shuffle mask %#x: only full warps are emulated", mask);
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof v);
  bits = cuda_emu::ShuffleXor(bits, lane_mask);
  std::memcpy(&v, &bits, sizeof v);
  return v;
}
