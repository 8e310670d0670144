// See emu_launch.h.
// Fibers switch with _setjmp/_longjmp between stacks, which _FORTIFY_SOURCE's __longjmp_chk
// would take for a jump into an uninitialized frame: this file is built without it.
#undef _FORTIFY_SOURCE
#include "tests/cuda_emu/emu_launch.h"

#include <setjmp.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <vector>

namespace cuda_emu {
namespace {

// Bytes past the largest dynamic shared memory that must stay 0xff (writes past the block's).
constexpr size_t kSharedGuard = 4096;
constexpr uint64_t kMaxGridX = 0x7fffffff, kMaxGridYZ = 65535;
constexpr unsigned kWarp = 32, kMaxBlockThreads = 1024;
// Each emulated thread's stack, above a guard page (an overflow faults instead of corrupting a
// neighbour's). The kernels keep a few KiB of locals per thread; pages are touched on demand.
constexpr size_t kFiberStack = 256 * 1024;

alignas(1024) unsigned char g_shared[kMaxSharedOptin + kSharedGuard];
size_t g_shared_bytes = 0;

std::mutex g_attr_mutex;
std::map<const void*, size_t> g_max_dynamic;  // cudaFuncAttributeMaxDynamicSharedMemorySize
BlockOrder g_order = BlockOrder::kForward;
std::atomic<int64_t> g_launches{0};

// An emulated thread: a fiber on the launching OS thread, run until it waits at a barrier or
// ends its block. One OS thread runs a whole launch, with no locks, no futex wake-ups and no
// system call per switch (the OS-thread version this replaced spent more time in the kernel
// than in the kernels; ucontext's swapcontext still made one per switch, to save the signal
// mask): a fiber starts once per launch (makecontext, setcontext) and runs every block of it;
// after that each switch is a _setjmp/_longjmp.
enum class FiberState { kReady, kBlockWait, kWarpWait, kDone };
struct Fiber {
  ucontext_t start;  // its first entry, on its own stack
  jmp_buf resume;    // where it waits
  bool started = false;
  FiberState state = FiberState::kReady;
};

// The running block: its threads; per thread the barriers passed (FinishBlock compares them: a
// thread that returns drops out of the barriers still to come, so one that passes more
// barriers than another does not hang) and __shfl_xor_sync's values.
struct Block {
  uint3 id;
  std::vector<Fiber> fibers;
  std::vector<int64_t> syncthreads, syncwarps;  // per thread
  std::vector<uint64_t> exchange;               // per thread, __shfl_xor_sync's values
  jmp_buf scheduler;                            // RunBlock's, resumed when a fiber waits or ends a block
  unsigned current = 0;                         // the running thread
  const std::function<void()>* body = nullptr;
};
Block* g_block = nullptr;

// Static __shared__ arrays (StaticShared): storage, bytes, guard bytes after them.
struct StaticArray {
  unsigned char* storage;
  size_t bytes, guard;
};
std::mutex g_static_mutex;
std::vector<StaticArray> g_static_shared;

// Thread t's stack, mapped on first use and kept from launch to launch.
std::vector<unsigned char*> g_stacks;
unsigned char* StackOf(unsigned t) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  while (g_stacks.size() <= t) {
    void* m = mmap(nullptr, kFiberStack + page, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    CUDA_EMU_CHECK(m != MAP_FAILED, "no memory for an emulated thread's %zu-byte stack", kFiberStack);
    CUDA_EMU_CHECK(mprotect(m, page, PROT_NONE) == 0, "the guard page below a stack");
    g_stacks.push_back(static_cast<unsigned char*>(m) + page);
  }
  return g_stacks[t];
}

void StartBlock(Block& b, uint3 id, unsigned threads) {
  b.id = id;
  b.syncthreads.assign(threads, 0);
  b.syncwarps.assign(threads, 0);
  b.exchange.assign(threads, 0);
  std::memset(g_shared, 0xff, g_shared_bytes + kSharedGuard);
  const std::lock_guard<std::mutex> lock(g_static_mutex);
  for (const StaticArray& a : g_static_shared) std::memset(a.storage, 0xff, a.bytes + a.guard);
}

void FinishBlock(const Block& b) {
  const unsigned threads = static_cast<unsigned>(b.syncthreads.size());
  for (unsigned t = 0; t < threads; ++t) {
    CUDA_EMU_CHECK(b.syncthreads[t] == b.syncthreads[0],
                   "block (%u, %u, %u): thread %u passed %lld __syncthreads, thread 0 %lld "
                   "(a barrier in divergent code)",
                   b.id.x, b.id.y, b.id.z, t, static_cast<long long>(b.syncthreads[t]),
                   static_cast<long long>(b.syncthreads[0]));
    const unsigned lane0 = t / kWarp * kWarp;
    CUDA_EMU_CHECK(b.syncwarps[t] == b.syncwarps[lane0],
                   "block (%u, %u, %u): thread %u passed %lld warp barriers, lane 0 of its warp "
                   "%lld (a warp-collective call in divergent code)",
                   b.id.x, b.id.y, b.id.z, t, static_cast<long long>(b.syncwarps[t]),
                   static_cast<long long>(b.syncwarps[lane0]));
  }
  for (size_t i = g_shared_bytes; i < g_shared_bytes + kSharedGuard; ++i) {
    CUDA_EMU_CHECK(g_shared[i] == 0xff,
                   "block (%u, %u, %u) wrote byte %zu of dynamic shared memory, past its %zu",
                   b.id.x, b.id.y, b.id.z, i, g_shared_bytes);
  }
  const std::lock_guard<std::mutex> lock(g_static_mutex);
  for (const StaticArray& a : g_static_shared) {
    for (size_t i = a.bytes; i < a.bytes + a.guard; ++i) {
      CUDA_EMU_CHECK(a.storage[i] == 0xff,
                     "block (%u, %u, %u) wrote byte %zu of a %zu-byte static __shared__ array",
                     b.id.x, b.id.y, b.id.z, i, a.bytes);
    }
  }
}

// The running thread waits (`state`) until RunBlock releases it (kDone: until the next block).
void Wait(FiberState state) {
  Block& b = *g_block;
  Fiber& f = b.fibers[b.current];
  f.state = state;
  if (_setjmp(f.resume) == 0) _longjmp(b.scheduler, 1);
}

void WarpBarrier() {
  ++g_block->syncwarps[g_block->current];
  Wait(FiberState::kWarpWait);
}

// A fiber's life: the kernel body as thread `current` of each block of the launch in turn. It is
// left waiting after the launch's last block (its stack is taken afresh by the next launch), so
// it holds nothing that needs destroying.
[[noreturn]] void FiberMain() {
  while (true) {
    (*g_block->body)();
    Wait(FiberState::kDone);
  }
}

// Thread t's first entry: FiberMain on its own stack.
__attribute__((noinline)) void Prepare(Fiber& f, unsigned t) {
  CUDA_EMU_CHECK(getcontext(&f.start) == 0, "getcontext");
  f.start.uc_stack.ss_sp = StackOf(t);
  f.start.uc_stack.ss_size = kFiberStack;
  f.start.uc_link = nullptr;
  makecontext(&f.start, FiberMain, 0);
}

// Runs thread t until it waits or ends the block.
__attribute__((noinline)) void Resume(Block& b, unsigned t) {
  Fiber& f = b.fibers[t];
  b.current = t;
  threadIdx = uint3{t, 0, 0};
  if (_setjmp(b.scheduler) != 0) return;  // it waits
  if (f.started) _longjmp(f.resume, 1);
  f.started = true;
  setcontext(&f.start);
  CUDA_EMU_CHECK(false, "setcontext returned");
}

// Runs one block's threads to their ends: each ready thread until it waits or returns, in
// thread order; when none is ready, a barrier every live thread it concerns has reached is
// released (__syncthreads: the block's, a warp barrier: its warp's). Live threads waiting at
// different barriers can never all go on: a GPU would hang; this aborts.
void RunBlock(Block& b) {
  const unsigned threads = static_cast<unsigned>(b.fibers.size());
  for (Fiber& f : b.fibers) f.state = FiberState::kReady;
  while (true) {
    bool ran = false;
    for (unsigned n = 0; n < threads; ++n) {
      const unsigned t = g_order == BlockOrder::kForward ? n : threads - 1 - n;
      if (b.fibers[t].state != FiberState::kReady) continue;
      ran = true;
      Resume(b, t);
    }
    if (ran) continue;
    unsigned live = 0, at_block = 0;
    for (const Fiber& f : b.fibers) {
      live += f.state != FiberState::kDone ? 1 : 0;
      at_block += f.state == FiberState::kBlockWait ? 1 : 0;
    }
    if (live == 0) return;
    if (at_block == live) {
      for (Fiber& f : b.fibers) {
        if (f.state == FiberState::kBlockWait) f.state = FiberState::kReady;
      }
      continue;
    }
    bool released = false;
    for (unsigned w = 0; w < threads / kWarp; ++w) {
      unsigned warp_live = 0, at_warp = 0;
      for (unsigned t = w * kWarp; t < (w + 1) * kWarp; ++t) {
        warp_live += b.fibers[t].state != FiberState::kDone ? 1 : 0;
        at_warp += b.fibers[t].state == FiberState::kWarpWait ? 1 : 0;
      }
      if (at_warp == 0 || at_warp != warp_live) continue;
      for (unsigned t = w * kWarp; t < (w + 1) * kWarp; ++t) {
        if (b.fibers[t].state == FiberState::kWarpWait) b.fibers[t].state = FiberState::kReady;
      }
      released = true;
    }
    CUDA_EMU_CHECK(released,
                   "block (%u, %u, %u): %u threads wait at __syncthreads and the other %u live ones "
                   "at a warp barrier (a barrier in divergent code: a GPU would hang)",
                   b.id.x, b.id.y, b.id.z, at_block, live - at_block);
  }
}

}  // namespace

void SetMaxDynamicShared(const void* kernel, int bytes) {
  CUDA_EMU_CHECK(bytes >= 0 && static_cast<size_t>(bytes) <= kMaxSharedOptin,
                 "cudaFuncSetAttribute(MaxDynamicSharedMemorySize, %d): sm_90 allows %zu", bytes,
                 kMaxSharedOptin);
  const std::lock_guard<std::mutex> lock(g_attr_mutex);
  g_max_dynamic[kernel] = static_cast<size_t>(bytes);
}

void RegisterStaticShared(unsigned char* storage, size_t bytes, size_t guard) {
  std::memset(storage, 0xff, bytes + guard);
  const std::lock_guard<std::mutex> lock(g_static_mutex);
  g_static_shared.push_back({storage, bytes, guard});
}

void SetBlockOrder(BlockOrder order) { g_order = order; }
int64_t Launches() { return g_launches.load(); }
unsigned char* DynamicSharedMemory() { return g_shared; }
size_t DynamicSharedBytes() { return g_shared_bytes; }

uint64_t ShuffleXor(uint64_t bits, int lane_mask) {
  CUDA_EMU_CHECK(lane_mask >= 0 && lane_mask < static_cast<int>(kWarp), "lane mask %d",
                 lane_mask);
  std::vector<uint64_t>& x = g_block->exchange;
  const unsigned t = g_block->current;
  x[t] = bits;
  WarpBarrier();  // every lane has published its value
  const unsigned lane0 = t / kWarp * kWarp;
  const uint64_t r = x[lane0 + ((t - lane0) ^ static_cast<unsigned>(lane_mask))];
  WarpBarrier();  // every lane has read before any publishes the next value
  return r;
}

void RunGrid(const void* kernel, dim3 grid, dim3 block, size_t shared_bytes,
             const std::function<void()>& body) {
  size_t max_dynamic = kDefaultShared;
  {
    const std::lock_guard<std::mutex> lock(g_attr_mutex);
    if (const auto it = g_max_dynamic.find(kernel); it != g_max_dynamic.end()) {
      max_dynamic = it->second;
    }
  }
  CUDA_EMU_CHECK(shared_bytes <= max_dynamic,
                 "launch with %zu bytes of dynamic shared memory; the kernel's attribute allows "
                 "%zu (cudaFuncSetAttribute)",
                 shared_bytes, max_dynamic);
  CUDA_EMU_CHECK(block.y == 1 && block.z == 1, "block (%u, %u, %u): only 1-D blocks are emulated",
                 block.x, block.y, block.z);
  CUDA_EMU_CHECK(block.x >= kWarp && block.x % kWarp == 0 && block.x <= kMaxBlockThreads,
                 "block of %u threads: whole warps, at most %u", block.x, kMaxBlockThreads);
  CUDA_EMU_CHECK(grid.x >= 1 && grid.x <= kMaxGridX && grid.y >= 1 && grid.y <= kMaxGridYZ &&
                     grid.z >= 1 && grid.z <= kMaxGridYZ,
                 "grid (%u, %u, %u) outside (2^31 - 1, 65535, 65535)", grid.x, grid.y, grid.z);
  ++g_launches;
  gridDim = grid;
  blockDim = block;
  g_shared_bytes = shared_bytes;

  const uint64_t blocks = uint64_t{grid.x} * grid.y * grid.z;
  Block state;
  state.fibers.resize(block.x);
  state.body = &body;
  for (unsigned t = 0; t < block.x; ++t) Prepare(state.fibers[t], t);
  g_block = &state;
  for (uint64_t n = 0; n < blocks; ++n) {
    const uint64_t i = g_order == BlockOrder::kForward ? n : blocks - 1 - n;
    const uint3 id{static_cast<unsigned>(i % grid.x), static_cast<unsigned>(i / grid.x % grid.y),
                   static_cast<unsigned>(i / (uint64_t{grid.x} * grid.y))};
    StartBlock(state, id, block.x);
    blockIdx = id;
    RunBlock(state);
    FinishBlock(state);
  }
  g_block = nullptr;
}

}  // namespace cuda_emu

void __syncthreads() {
  ++cuda_emu::g_block->syncthreads[cuda_emu::g_block->current];
  cuda_emu::Wait(cuda_emu::FiberState::kBlockWait);
}

void __syncwarp(unsigned mask) {
  CUDA_EMU_CHECK(mask == 0xffffffffu, "__syncwarp(%#x): only full warps are emulated", mask);
  cuda_emu::WarpBarrier();
}
