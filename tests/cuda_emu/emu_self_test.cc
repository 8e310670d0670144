// The CPU emulator's own checks (tests/cuda_emu): each rule a kernel can break, broken by a
// small kernel here, must abort the launch with the rule's message, so that
// flash_fused_emu_test.cc passing means the fused kernels kept them.
#include <gtest/gtest.h>
#include <mma.h>  // tests/cuda_emu/fake/mma.h

#include <cublas_v2.h>     // tests/cuda_emu/fake/cublas_v2.h
#include <cuda_runtime.h>  // tests/cuda_emu/fake/cuda_runtime.h

#include <cmath>
#include <vector>

namespace {

namespace wmma = nvcuda::wmma;
using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major>;
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

// Shared memory as the kernels declare it after cuda_to_cc.cmake.
unsigned char* Smem() { return cuda_emu::DynamicSharedMemory(); }

__global__ void ZeroTile(int offset_bytes, unsigned ldm) {
  for (int e = threadIdx.x; e < 16 * 16; e += blockDim.x) {
    reinterpret_cast<float*>(Smem())[e] = 0.0f;
  }
  __syncthreads();
  FragC c;
  wmma::fill_fragment(c, 0.0f);
  wmma::store_matrix_sync(reinterpret_cast<float*>(Smem() + offset_bytes), c, ldm,
                          wmma::mem_row_major);
}

__global__ void LoadA(int offset_bytes) {
  FragA a;
  wmma::load_matrix_sync(a, reinterpret_cast<const __nv_bfloat16*>(Smem() + offset_bytes), 16);
}

__global__ void EarlyReturn() {
  if (threadIdx.x == 5) return;
  __syncthreads();
}

// Lane 0 waits at the block's barrier, lanes 1-31 at the warp's: neither can complete.
__global__ void SplitBarriers() {
  if (threadIdx.x == 0) {
    __syncthreads();
  } else {
    __syncwarp();
  }
}

__global__ void WritePast(int bytes) {
  if (threadIdx.x == 0) Smem()[bytes] = 0;
}

__global__ void Sum(float* out) {
  float v = static_cast<float>(threadIdx.x);
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  out[threadIdx.x] = v;
}

// A static __shared__ array as cuda_to_cc.cmake rewrites `__shared__ float s[64];`: thread t
// writes s[t] (64 threads), reads s[t ^ 1] after the barrier; out[t] gets what it read, or
// s[63 - t] read before anything was written there (threads up to 31 write, every block).
__global__ void StaticArray(float* out, bool half) {
  auto& s = cuda_emu::StaticShared<float[64]>([] {});
  if (!half || threadIdx.x < 32) s[threadIdx.x] = static_cast<float>(threadIdx.x + blockIdx.x);
  __syncthreads();
  out[blockIdx.x * 64 + threadIdx.x] = half ? s[63 - threadIdx.x] : s[threadIdx.x ^ 1];
}

// The same exchange without the barrier: a race.
__global__ void StaticArrayNoBarrier(float* out) {
  auto& s = cuda_emu::StaticShared<float[64]>([] {});
  s[threadIdx.x] = static_cast<float>(threadIdx.x);
  out[threadIdx.x] = s[threadIdx.x ^ 1];
}

__global__ void StaticArrayPast() {
  auto& s = cuda_emu::StaticShared<float[8]>([] {});
  if (threadIdx.x == 0) (&s[0])[8] = 0.0f;
}

// A kernel template, launched as `Twice<<<1, 32, 0, nullptr>>>(out, v)` is rewritten.
template <typename T>
__global__ void Twice(T* out, T v) {
  out[threadIdx.x] = v + __shfl_xor_sync(0xffffffffu, v, 1);
}

class EmulatorTest : public testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

// A 16x16 fp32 tile at offset 0 with ldm 16: 1,024 bytes, within 1,024.
TEST_F(EmulatorTest, ValidTileStoreRuns) {
  cuda_emu::Launch(dim3(1), dim3(32), 1024, nullptr, ZeroTile, 0, 16u);
}

TEST_F(EmulatorTest, RejectsASharedMemoryAboveTheAttribute) {
  // No cudaFuncSetAttribute: 48 KiB by default.
  EXPECT_DEATH(cuda_emu::Launch(dim3(1), dim3(32), 48 * 1024 + 1, nullptr, ZeroTile, 0, 16u),
               "the kernel's attribute allows 49152");
  EXPECT_DEATH(cudaFuncSetAttribute(ZeroTile, cudaFuncAttributeMaxDynamicSharedMemorySize, 232449),
               "sm_90 allows 232448");
}

TEST_F(EmulatorTest, RejectsBadLaunchShapes) {
  EXPECT_DEATH(cuda_emu::Launch(dim3(1), dim3(48), 1024, nullptr, ZeroTile, 0, 16u),
               "whole warps");
  EXPECT_DEATH(cuda_emu::Launch(dim3(1), dim3(2048), 1024, nullptr, ZeroTile, 0, 16u),
               "whole warps, at most 1024");
  EXPECT_DEATH(cuda_emu::Launch(dim3(1, 65536), dim3(32), 1024, nullptr, ZeroTile, 0, 16u),
               "outside");
}

TEST_F(EmulatorTest, RejectsBadTiles) {
  EXPECT_DEATH(cuda_emu::Launch(dim3(1), dim3(32), 2048, nullptr, ZeroTile, 16, 16u),
               "not 32-byte aligned");
  EXPECT_DEATH(cuda_emu::Launch(dim3(1), dim3(32), 2048, nullptr, ZeroTile, 0, 18u),
               "not a multiple of 16 bytes");
  // 15 rows of 20 floats and one of 16: 1,264 bytes, past 1,024.
  EXPECT_DEATH(cuda_emu::Launch(dim3(1), dim3(32), 1024, nullptr, ZeroTile, 0, 20u),
               "outside the block's 1024 bytes");
  EXPECT_DEATH(cuda_emu::Launch(dim3(1), dim3(32), 512, nullptr, LoadA, 32), "outside");
}

TEST_F(EmulatorTest, ReportsDivergentBarriers) {
  EXPECT_DEATH(cuda_emu::Launch(dim3(2), dim3(64), 0, nullptr, EarlyReturn),
               "thread 5 passed 0 __syncthreads, thread 0 1");
}

// On a GPU this hangs; the emulator's scheduler sees that no barrier can be released.
TEST_F(EmulatorTest, ReportsThreadsStuckAtDifferentBarriers) {
  EXPECT_DEATH(cuda_emu::Launch(dim3(1), dim3(32), 0, nullptr, SplitBarriers),
               "1 threads wait at __syncthreads and the other 31 live ones at a warp barrier");
}

TEST_F(EmulatorTest, ReportsWritesPastSharedMemory) {
  EXPECT_DEATH(cuda_emu::Launch(dim3(1), dim3(32), 256, nullptr, WritePast, 256),
               "wrote byte 256 of dynamic shared memory, past its 256");
}

// sum over the warp's lanes 0..31 = 496 in every lane, for each warp.
TEST_F(EmulatorTest, ShuffleSumsAWarp) {
  std::vector<float> out(64, -1.0f);
  cuda_emu::Launch(dim3(1), dim3(64), 0, nullptr, Sum, out.data());
  for (int t = 0; t < 64; ++t) EXPECT_EQ(out[t], t < 32 ? 496.0f : 496.0f + 32 * 32) << t;
}

// Static shared arrays are the block's: what a block wrote is there after its barrier, and a
// word no thread of the block wrote reads as NaN (0xff bytes), even after an earlier block.
TEST_F(EmulatorTest, StaticSharedArraysAreTheBlocks) {
  std::vector<float> out(3 * 64);
  cuda_emu::Launch(dim3(3), dim3(64), 0, nullptr, CUDA_EMU_KERNEL(StaticArray), out.data(), false);
  for (int i = 0; i < 3 * 64; ++i) EXPECT_EQ(out[i], static_cast<float>((i % 64 ^ 1) + i / 64));
  cuda_emu::Launch(dim3(2), dim3(64), 0, nullptr, CUDA_EMU_KERNEL(StaticArray), out.data(), true);
  for (int t = 0; t < 64; ++t) EXPECT_EQ(std::isnan(out[64 + t]), t < 32) << t;
  EXPECT_DEATH(cuda_emu::Launch(dim3(1), dim3(32), 0, nullptr, CUDA_EMU_KERNEL(StaticArrayPast)),
               "wrote byte 32 of a 32-byte static __shared__ array");
}

// Between barriers the threads run one at a time, in thread order or (SetBlockOrder kReverse)
// the reverse, so a read of another thread's write with no barrier between them finds the word
// unwritten (NaN) in one order or the other: forward, thread 2k reads word 2k + 1 before thread
// 2k + 1 runs; reversed, thread 2k + 1 reads word 2k before thread 2k runs.
TEST_F(EmulatorTest, AMissingBarrierReadsUnwrittenSharedMemory) {
  std::vector<float> out(64);
  for (cuda_emu::BlockOrder order : {cuda_emu::BlockOrder::kForward, cuda_emu::BlockOrder::kReverse}) {
    cuda_emu::SetBlockOrder(order);
    cuda_emu::Launch(dim3(1), dim3(64), 0, nullptr, CUDA_EMU_KERNEL(StaticArrayNoBarrier), out.data());
    const int stale = order == cuda_emu::BlockOrder::kForward ? 0 : 1;  // parity of the NaN reads
    for (int t = 0; t < 64; ++t) {
      if (t % 2 == stale) {
        EXPECT_TRUE(std::isnan(out[t])) << t;
      } else {
        EXPECT_EQ(out[t], static_cast<float>(t ^ 1)) << t;
      }
    }
  }
  cuda_emu::SetBlockOrder(cuda_emu::BlockOrder::kForward);
}

// A template kernel is deduced from the arguments, as CUDA does; 64-bit shuffles exchange whole
// doubles.
TEST_F(EmulatorTest, LaunchesTemplatesAndShufflesDoubles) {
  std::vector<double> out(32);
  cuda_emu::Launch(dim3(1), dim3(32), 0, nullptr, CUDA_EMU_KERNEL(Twice), out.data(), 0.25);
  for (double x : out) EXPECT_EQ(x, 0.5);
}

// Copies and memsets check their device side; cudaGetLastError returns an error once.
TEST_F(EmulatorTest, RuntimeChecksDeviceMemory) {
  float* d = nullptr;
  ASSERT_EQ(cudaMallocAsync(&d, 16 * sizeof(float), nullptr), cudaSuccess);
  std::vector<float> h(17, 1.0f);
  EXPECT_EQ(cudaMemcpy(d, h.data(), 16 * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(d, h.data(), 17 * sizeof(float), cudaMemcpyHostToDevice),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(h.data(), d, 4, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaMemset(h.data(), 0, 4), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFreeAsync(d, nullptr), cudaSuccess);
  EXPECT_EQ(cudaFreeAsync(d, nullptr), cudaErrorInvalidValue);
  (void)cudaGetLastError();
}

// Column-major C (2, 2) = A (2, 3) B (3, 2) with beta 0 over a NaN C (not read), and a leading
// dimension below the rows refused as cuBLAS does. A = [1 2 3; 4 5 6], B = [1 0; 0 1; 1 1]:
// C = [1+3 2+3; 4+6 5+6] = [4 5; 10 11].
TEST_F(EmulatorTest, CublasGemmIsColumnMajor) {
  cublasHandle_t h = nullptr;
  ASSERT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
  const float a[6] = {1, 4, 2, 5, 3, 6}, b[6] = {1, 0, 1, 0, 1, 1};
  float c[4] = {NAN, NAN, NAN, NAN};
  const float alpha = 1.0f, beta = 0.0f;
  ASSERT_EQ(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &alpha, a, 2, b, 3, &beta, c, 2),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(c[0], 4.0f);
  EXPECT_EQ(c[1], 10.0f);
  EXPECT_EQ(c[2], 5.0f);
  EXPECT_EQ(c[3], 11.0f);
  EXPECT_EQ(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &alpha, a, 1, b, 3, &beta, c, 2),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasDestroy(h), CUBLAS_STATUS_SUCCESS);
}

}  // namespace
