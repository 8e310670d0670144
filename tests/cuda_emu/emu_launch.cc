// See emu_launch.h.
#include "tests/cuda_emu/emu_launch.h"

#include <algorithm>
#include <atomic>
#include <barrier>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace cuda_emu {
namespace {

// Bytes past the largest dynamic shared memory that must stay 0xff (writes past the block's).
constexpr size_t kSharedGuard = 4096;
constexpr uint64_t kMaxGridX = 0x7fffffff, kMaxGridYZ = 65535;
constexpr unsigned kWarp = 32, kMaxBlockThreads = 1024;

alignas(1024) unsigned char g_shared[kMaxSharedOptin + kSharedGuard];
size_t g_shared_bytes = 0;

std::mutex g_attr_mutex;
std::map<const void*, size_t> g_max_dynamic;  // cudaFuncAttributeMaxDynamicSharedMemorySize
BlockOrder g_order = BlockOrder::kForward;
std::atomic<int64_t> g_launches{0};

// The running block's barriers and per-thread barrier counts. Fresh for every block: a thread
// that returns drops out of both barriers (arrive_and_drop), so a thread that passes more
// barriers than another does not hang; the counts then differ and FinishBlock reports it.
struct Block {
  uint3 id;
  std::unique_ptr<std::barrier<>> block_barrier;
  std::vector<std::unique_ptr<std::barrier<>>> warp_barriers;
  std::vector<int64_t> syncthreads, syncwarps;  // per thread
  std::vector<uint64_t> exchange;               // per thread, __shfl_xor_sync's values
};
Block* g_block = nullptr;

// Static __shared__ arrays (StaticShared): storage, bytes, guard bytes after them.
struct StaticArray {
  unsigned char* storage;
  size_t bytes, guard;
};
std::mutex g_static_mutex;
std::vector<StaticArray> g_static_shared;
thread_local unsigned t_thread = 0;  // threadIdx.x of the emulated thread

void StartBlock(Block& b, uint3 id, unsigned threads) {
  b.id = id;
  b.block_barrier = std::make_unique<std::barrier<>>(threads);
  b.warp_barriers.clear();
  for (unsigned w = 0; w < threads / kWarp; ++w) {
    b.warp_barriers.push_back(std::make_unique<std::barrier<>>(kWarp));
  }
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

void WarpBarrier() {
  ++g_block->syncwarps[t_thread];
  g_block->warp_barriers[t_thread / kWarp]->arrive_and_wait();
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
  x[t_thread] = bits;
  WarpBarrier();  // every lane has published its value
  const unsigned lane0 = t_thread / kWarp * kWarp;
  const uint64_t r = x[lane0 + ((t_thread - lane0) ^ static_cast<unsigned>(lane_mask))];
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
  std::barrier<> launch_barrier(block.x);
  Block state;
  g_block = &state;
  auto thread_main = [&](unsigned t) {
    t_thread = t;
    for (uint64_t n = 0; n < blocks; ++n) {
      const uint64_t i = g_order == BlockOrder::kForward ? n : blocks - 1 - n;
      const uint3 id{static_cast<unsigned>(i % grid.x),
                     static_cast<unsigned>(i / grid.x % grid.y),
                     static_cast<unsigned>(i / (uint64_t{grid.x} * grid.y))};
      launch_barrier.arrive_and_wait();  // the previous block is done
      if (t == 0) {
        if (n > 0) FinishBlock(state);
        StartBlock(state, id, block.x);
      }
      launch_barrier.arrive_and_wait();
      threadIdx = uint3{t, 0, 0};
      blockIdx = id;
      body();
      state.block_barrier->arrive_and_drop();
      state.warp_barriers[t / kWarp]->arrive_and_drop();
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(block.x);
  for (unsigned t = 0; t < block.x; ++t) threads.emplace_back(thread_main, t);
  for (std::thread& th : threads) th.join();
  FinishBlock(state);
  g_block = nullptr;
}

}  // namespace cuda_emu

void __syncthreads() {
  ++cuda_emu::g_block->syncthreads[cuda_emu::t_thread];
  cuda_emu::g_block->block_barrier->arrive_and_wait();
}

void __syncwarp(unsigned mask) {
  CUDA_EMU_CHECK(mask == 0xffffffffu, "__syncwarp(%#x): only full warps are emulated", mask);
  cuda_emu::WarpBarrier();
}
