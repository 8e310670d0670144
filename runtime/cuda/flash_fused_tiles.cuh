// Tile helpers shared by the fused attention kernels (flash_fused.cu, flash_fused_backward.cu):
// tensor-core fragments, a warp's 16x16 product over shared-memory tiles, global-to-shared row
// loads with zero fill past T, and warp reductions. Included by those two .cu files only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cstdint>

namespace shardsim::runtime::flash_fused {

using Elem = __nv_bfloat16;

// nvcuda::wmma 16x16x16 tiles, bf16 operands, fp32 accumulator (sm_80+). A fragment's element
// layout is opaque, so the kernels exchange accumulators through shared memory. Loads want a
// 32-byte aligned pointer and a leading dimension (in elements) that is a multiple of 8 for bf16
// and 4 for fp32: the shared buffers below are laid out so.
inline constexpr int kTile = 16;
using FragA = nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, kTile, kTile, kTile, Elem,
                                     nvcuda::wmma::row_major>;
using FragATransposed = nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, kTile, kTile, kTile, Elem,
                                               nvcuda::wmma::col_major>;
using FragB = nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, kTile, kTile, kTile, Elem,
                                     nvcuda::wmma::row_major>;
using FragBTransposed = nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, kTile, kTile, kTile, Elem,
                                               nvcuda::wmma::col_major>;
using FragC = nvcuda::wmma::fragment<nvcuda::wmma::accumulator, kTile, kTile, kTile, float>;

// Row padding of shared tiles, in elements: keeps the leading dimension a multiple of 8 (bf16)
// or 4 (fp32) and every row 16-byte aligned, and staggers rows across banks.
inline constexpr int kPadBf16 = 8;
inline constexpr int kPadF32 = 4;

// acc += A B for a 16 x (16 steps) tile A and a (16 steps) x 16 tile B, one 16x16x16 product per
// step; a and b point at step 0's tiles and advance by a_step, b_step elements per step:
//   row-major A (A(r, c) = a[r * lda + c]):   a_step = 16;
//   col-major A (A(r, c) = a[r + c * lda]):   a_step = 16 * lda   (A is a stored matrix's
//                                              transpose);
//   row-major B (B(k, n) = b[k * ldb + n]):   b_step = 16 * ldb;
//   col-major B (B(k, n) = b[k + n * ldb]):   b_step = 16         (B is a transpose).
// Every lane of the warp must call it (the loads and the product are warp-collective).
template <typename FA, typename FB>
__device__ inline void MmaAccumulate(FragC& acc, const Elem* a, int64_t a_step, int lda,
                                     const Elem* b, int64_t b_step, int ldb, int steps) {
  FA fa;
  FB fb;
  for (int s = 0; s < steps; ++s) {
    nvcuda::wmma::load_matrix_sync(fa, a + s * a_step, lda);
    nvcuda::wmma::load_matrix_sync(fb, b + s * b_step, ldb);
    nvcuda::wmma::mma_sync(acc, fa, fb, acc);
  }
}

// dst (rows, ld_dst) in shared memory <- rows [row0, row0 + rows) of src (row i at
// src + i * ld_src), columns [0, d); rows at or past t are zeros, and nothing past row t - 1 is
// read. The zeros matter: a NaN bit pattern left in shared memory would survive a product by a
// masked (zero) probability. With vec, 16-byte accesses: src and ld_src must then be multiples of
// 8 elements (16 bytes), as d % 16 == 0 and 16-byte aligned base pointers make them. The whole
// block calls it (a grid-stride loop over threadIdx.x, no barrier inside).
__device__ inline void LoadRows(Elem* dst, int ld_dst, const Elem* src, int64_t ld_src,
                                int64_t row0, int rows, int64_t t, int d, bool vec) {
  if (vec) {
    const int chunks = d / 8;  // 8 bf16 = 16 bytes
    for (int e = threadIdx.x; e < rows * chunks; e += blockDim.x) {
      const int r = e / chunks, c = (e % chunks) * 8;
      uint4 x = make_uint4(0u, 0u, 0u, 0u);
      if (row0 + r < t) x = *reinterpret_cast<const uint4*>(src + (row0 + r) * ld_src + c);
      *reinterpret_cast<uint4*>(dst + r * ld_dst + c) = x;
    }
  } else {
    for (int e = threadIdx.x; e < rows * d; e += blockDim.x) {
      const int r = e / d, c = e % d;
      dst[r * ld_dst + c] = row0 + r < t ? src[(row0 + r) * ld_src + c] : __float2bfloat16_rn(0.0f);
    }
  }
}

// The warp's sum (max) of v, returned to every lane; all 32 lanes must call it.
__device__ inline float WarpSum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ inline float WarpMax(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Tiles of `tile` covering n.
__host__ __device__ inline int64_t Tiles(int64_t n, int64_t tile) { return (n + tile - 1) / tile; }

// Whether a device pointer allows LoadRows' 16-byte accesses.
inline bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace shardsim::runtime::flash_fused
