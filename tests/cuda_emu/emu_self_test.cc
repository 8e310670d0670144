// The CPU emulator's own checks (tests/cuda_emu): each rule a kernel can break, broken by a
// small kernel here, must abort the launch with the rule's message, so that
// flash_fused_emu_test.cc passing means the fused kernels kept them.
#include <gtest/gtest.h>
#include <mma.h>  // tests/cuda_emu/fake/mma.h

#include <cuda_runtime.h>  // tests/cuda_emu/fake/cuda_runtime.h

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

__global__ void WritePast(int bytes) {
  if (threadIdx.x == 0) Smem()[bytes] = 0;
}

__global__ void Sum(float* out) {
  float v = static_cast<float>(threadIdx.x);
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  out[threadIdx.x] = v;
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

}  // namespace
