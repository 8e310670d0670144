// See flash_fused.h. This file: the backward pass (Dao 2023, FlashAttention-2, Alg. 2) in three
// or four kernels: delta = rowsum(dO o O); dK, dV with one block per (64-key tile, batch, query
// head) that walks the query tiles from the diagonal down, recomputing P; under GQA (groups of
// more than one query head) each block's sums go to fp32 partials, one per query head, and a
// fourth kernel adds a KV head's group of partials in head order; and dQ with one block per
// (64-query tile, batch, head) that walks the key tiles up to the diagonal, recomputing P and
// dS. Every output element is owned by one block (or one thread) and summed in a fixed order:
// no atomics, so results are bitwise the same run to run (cuda_typed_kernels.h's promise), at
// the price of computing S and dP twice. One block per query head rather than per KV head
// (FlashAttention-2's own grid) gives group times more blocks: at Llama 3.2 1B's shape on one
// H200 (B 1, T 2048, 32 heads, 8 KV heads) 1,024 blocks instead of 256, and a longest block of
// 64 query-tile steps instead of 4 x 64.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/cuda_device.cuh"
#include "runtime/cuda/flash_fused.h"
#include "runtime/cuda/flash_fused_tiles.cuh"
#include "src/util/check.h"

namespace shardsim::runtime::flash_fused {
namespace {

namespace wmma = nvcuda::wmma;

inline constexpr int kRows = 32;  // Br: queries per step (32, not 64: d = 128 then fits sm_80)
inline constexpr int kCols = 64;  // Bc: keys per block
inline constexpr int kWarps = 8;
inline constexpr int kThreads = 32 * kWarps;
inline constexpr int kScoreTiles = (kRows / kTile) * (kCols / kTile);  // 16x16 tiles of S: 8

// The block's dynamic shared memory, byte offsets (each a multiple of 128):
//   k, v       bf16 (64, d + 8)  the block's key and value tiles
//   q, dout    bf16 (32, d + 8)  the current query tile and its dO
//   dk, dv     fp32 (64, d + 4)  the block's gradient accumulators (dk unscaled)
//   s, dp      fp32 (32, 68)     S = Q K^T (unscaled), dP = dO V^T
//   p, ds      bf16 (32, 72)     P and dS, the tensor-core operands
//   lse, delta fp32 (32)         the query rows' statistics
// d = 128: 2 * 17408 + 2 * 8704 + 2 * 33792 + 2 * 8704 + 2 * 4608 + 2 * 128 = 146,688 bytes (sm_80
// allows 166,912, sm_90 232,448 per block).
struct BackwardSmem {
  __host__ __device__ constexpr explicit BackwardSmem(int d)
      : ld_x(d + kPadBf16), ld_a(d + kPadF32), ld_s(kCols + kPadF32), ld_p(kCols + kPadBf16) {
    k = 0;
    v = k + kCols * ld_x * 2;
    q = v + kCols * ld_x * 2;
    dout = q + kRows * ld_x * 2;
    dk = dout + kRows * ld_x * 2;
    dv = dk + kCols * ld_a * 4;
    s = dv + kCols * ld_a * 4;
    dp = s + kRows * ld_s * 4;
    p = dp + kRows * ld_s * 4;
    ds = p + kRows * ld_p * 2;
    lse = ds + kRows * ld_p * 2;
    delta = lse + kRows * 4;
    bytes = delta + kRows * 4;
  }
  int ld_x, ld_a, ld_s, ld_p;  // leading dimensions, elements
  int k = 0, v = 0, q = 0, dout = 0, dk = 0, dv = 0, s = 0, dp = 0, p = 0, ds = 0, lse = 0,
      delta = 0, bytes = 0;
};
static_assert(BackwardSmem(128).bytes == 146688 && BackwardSmem(128).bytes <= 166912);
// Every tile base 128-byte aligned (wmma wants 32) for every supported d.
constexpr bool BackwardSmemAligned() {
  for (int d = kTile; d <= 128; d += kTile) {
    const BackwardSmem a(d);
    for (const int offset : {a.v, a.q, a.dout, a.dk, a.dv, a.s, a.dp, a.p, a.ds, a.lse}) {
      if (offset % 128 != 0) return false;
    }
  }
  return true;
}
static_assert(BackwardSmemAligned());

// delta (B, H, T): delta[b, h, i] = sum_x dO[b*T + i, h*d + x] O[b*T + i, h*d + x] (Alg. 2
// line 4; fp32 from the widened bf16). One warp per (token, head) row of d contiguous elements.
__global__ void DeltaKernel(const Elem* dout, const Elem* out, float* delta, int64_t rows,
                            int64_t t, int heads, int d) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  // w is the same for the warp's 32 lanes (blockDim.x % 32 == 0): the shuffles see full warps.
  for (int64_t w = cuda_device::GlobalIndex() / 32; w < rows; w += warps) {
    float sum = 0.0f;
    for (int x = lane; x < d; x += 32) {
      sum += __bfloat162float(dout[w * d + x]) * __bfloat162float(out[w * d + x]);
    }
    sum = WarpSum(sum);
    if (lane == 0) {
      const int64_t token = w / heads, h = w % heads;  // token = b*T + i
      delta[((token / t) * heads + h) * t + token % t] = sum;
    }
  }
}

// grid (B*H, ceil(T/64)), kThreads threads; x = b * H + h, y = the key tile (tile 0, which
// sees every query tile, first). For query head h (of KV head g = h / group) and each query
// tile from the one holding key k0 to the last (earlier ones are masked out entirely), with i a
// query row and j a key row:
//   S = Q K^T, dP = dO V^T                             (tensor cores, fp32 out)
//   P = exp(scale S - lse_i) where j <= i < T, else 0;  dS = P o (dP - delta_i)
//   dV += P^T dO, dK += dS^T Q                       (shared fp32)
// and finally, with one query head per KV head, dk += scale dK, dv += dV, one bf16 rounding per
// element; otherwise (dk_part non-null) the fp32 scale dK and dV into the partials (B*T, H*d),
// row j, columns h*d.., for GroupSumKernel.
__global__ void __launch_bounds__(kThreads)
    BackwardKernel(const Elem* dout, const Elem* q, const Elem* k, const Elem* v, const float* lse,
                   const float* delta, Elem* dk, Elem* dv, float* dk_part, float* dv_part,
                   int64_t t, int heads, int kv_heads, int d, float scale, bool vec) {
  extern __shared__ __align__(128) unsigned char smem[];
  const BackwardSmem lay(d);
  Elem* k_s = reinterpret_cast<Elem*>(smem + lay.k);
  Elem* v_s = reinterpret_cast<Elem*>(smem + lay.v);
  Elem* q_s = reinterpret_cast<Elem*>(smem + lay.q);
  Elem* dout_s = reinterpret_cast<Elem*>(smem + lay.dout);
  float* dk_s = reinterpret_cast<float*>(smem + lay.dk);
  float* dv_s = reinterpret_cast<float*>(smem + lay.dv);
  float* s_s = reinterpret_cast<float*>(smem + lay.s);
  float* dp_s = reinterpret_cast<float*>(smem + lay.dp);
  Elem* p_s = reinterpret_cast<Elem*>(smem + lay.p);
  Elem* ds_s = reinterpret_cast<Elem*>(smem + lay.ds);
  float* lse_s = reinterpret_cast<float*>(smem + lay.lse);
  float* delta_s = reinterpret_cast<float*>(smem + lay.delta);

  const int64_t b = blockIdx.x / heads;
  const int64_t h = blockIdx.x % heads;
  const int g = static_cast<int>(h / (heads / kv_heads));
  const int64_t k0 = static_cast<int64_t>(blockIdx.y) * kCols;
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
  const int d_tiles = d / kTile;
  const int64_t ld_q = static_cast<int64_t>(heads) * d;                  // row stride of q, dout
  const int64_t ld_k = static_cast<int64_t>(kv_heads) * d;               // of k, v, dk, dv
  const int64_t kv_offset = b * t * ld_k + static_cast<int64_t>(g) * d;  // row j: + j * ld_k

  LoadRows(k_s, lay.ld_x, k + kv_offset, ld_k, k0, kCols, t, d, vec);
  LoadRows(v_s, lay.ld_x, v + kv_offset, ld_k, k0, kCols, t, d, vec);
  for (int e = tid; e < kCols * d; e += kThreads) {
    dk_s[(e / d) * lay.ld_a + e % d] = 0.0f;
    dv_s[(e / d) * lay.ld_a + e % d] = 0.0f;
  }

  const int q_tiles = static_cast<int>(Tiles(t, kRows));
  const int kv_jobs = (kCols / kTile) * d_tiles;  // 16x16 tiles of dK (and of dV)
  const int64_t q_offset = b * t * ld_q + h * d;  // row i of q, dout: + i * ld_q
  const float* lse_bh = lse + (b * heads + h) * t;
  const float* delta_bh = delta + (b * heads + h) * t;
  // Block-uniform loop bounds: every barrier is reached by all threads.
  for (int qt = static_cast<int>(k0 / kRows); qt < q_tiles; ++qt) {
    const int64_t q0 = static_cast<int64_t>(qt) * kRows;
    __syncthreads();  // the previous step's reads of q_s, dout_s are done (and setup)
    LoadRows(q_s, lay.ld_x, q + q_offset, ld_q, q0, kRows, t, d, vec);
    LoadRows(dout_s, lay.ld_x, dout + q_offset, ld_q, q0, kRows, t, d, vec);
    if (tid < kRows) {
      const bool in = q0 + tid < t;
      lse_s[tid] = in ? lse_bh[q0 + tid] : 0.0f;
      delta_s[tid] = in ? delta_bh[q0 + tid] : 0.0f;
    }
    __syncthreads();

    // S = Q K^T and dP = dO V^T: A row-major, B = K^T or V^T (col-major views of K, V).
    for (int job = warp; job < 2 * kScoreTiles; job += kWarps) {
      const bool is_dp = job >= kScoreTiles;
      const int tile = job % kScoreTiles;
      const int m = tile / (kCols / kTile), n = tile % (kCols / kTile);
      FragC acc;
      wmma::fill_fragment(acc, 0.0f);
      MmaAccumulate<FragA, FragBTransposed>(
          acc, (is_dp ? dout_s : q_s) + m * kTile * lay.ld_x, kTile, lay.ld_x,
          (is_dp ? v_s : k_s) + n * kTile * lay.ld_x, kTile, lay.ld_x, d_tiles);
      wmma::store_matrix_sync((is_dp ? dp_s : s_s) + m * kTile * lay.ld_s + n * kTile, acc,
                              lay.ld_s, wmma::mem_row_major);
    }
    __syncthreads();

    // P and dS (Alg. 2 lines 13 and 16), rounded to bf16 for the products below.
    for (int e = tid; e < kRows * kCols; e += kThreads) {
      const int r = e / kCols, c = e % kCols;
      const int64_t i = q0 + r, j = k0 + c;
      const bool valid = i < t && j <= i;  // causal; j <= i < T keeps j below T too
      const float p = valid ? expf(s_s[r * lay.ld_s + c] * scale - lse_s[r]) : 0.0f;
      const float ds = p * (dp_s[r * lay.ld_s + c] - delta_s[r]);
      p_s[r * lay.ld_p + c] = __float2bfloat16_rn(p);
      ds_s[r * lay.ld_p + c] = __float2bfloat16_rn(ds);
    }
    __syncthreads();

    // dV += P^T dO and dK += dS^T Q (A = P^T, dS^T: col-major views of P, dS; B row-major),
    // accumulators through shared memory.
    for (int job = warp; job < 2 * kv_jobs; job += kWarps) {
      const bool is_dk = job >= kv_jobs;
      const int tile = job % kv_jobs;
      const int m = tile / d_tiles, n = tile % d_tiles;  // key rows 16 m.., columns 16 n..
      float* c_tile = (is_dk ? dk_s : dv_s) + m * kTile * lay.ld_a + n * kTile;
      FragC acc;
      wmma::load_matrix_sync(acc, c_tile, lay.ld_a, wmma::mem_row_major);
      MmaAccumulate<FragATransposed, FragB>(
          acc, (is_dk ? ds_s : p_s) + m * kTile, static_cast<int64_t>(kTile) * lay.ld_p, lay.ld_p,
          (is_dk ? q_s : dout_s) + n * kTile, static_cast<int64_t>(kTile) * lay.ld_x, lay.ld_x,
          kRows / kTile);
      wmma::store_matrix_sync(c_tile, acc, lay.ld_a, wmma::mem_row_major);
    }
  }
  __syncthreads();

  for (int e = tid; e < kCols * d; e += kThreads) {
    const int c = e / d, x = e % d;
    if (k0 + c >= t) continue;
    if (dk_part != nullptr) {
      const int64_t idx = (b * t + k0 + c) * ld_q + h * d + x;
      dk_part[idx] = scale * dk_s[c * lay.ld_a + x];
      dv_part[idx] = dv_s[c * lay.ld_a + x];
    } else {
      const int64_t idx = kv_offset + (k0 + c) * ld_k + x;
      dk[idx] = __float2bfloat16_rn(__bfloat162float(dk[idx]) + scale * dk_s[c * lay.ld_a + x]);
      dv[idx] = __float2bfloat16_rn(__bfloat162float(dv[idx]) + dv_s[c * lay.ld_a + x]);
    }
  }
}

// GQA: dk[b*T + j, g*d + x] += sum over the group's query heads h = g*group .. in order of the
// partial dk_part[b*T + j, h*d + x] (fp32), rounded to bf16 once; dv likewise. One thread per
// element of dk (rows B*T, KV*d columns).
__global__ void GroupSumKernel(const float* dk_part, const float* dv_part, Elem* dk, Elem* dv,
                               int64_t rows, int heads, int kv_heads, int d) {
  const int group = heads / kv_heads;
  const int64_t ld_k = static_cast<int64_t>(kv_heads) * d, ld_q = static_cast<int64_t>(heads) * d;
  for (int64_t e = cuda_device::GlobalIndex(); e < rows * ld_k; e += cuda_device::GlobalStride()) {
    const int64_t row = e / ld_k, col = e % ld_k;  // col = g*d + x
    const int64_t g = col / d, x = col % d;
    const float* pk = dk_part + row * ld_q + g * group * d + x;
    const float* pv = dv_part + row * ld_q + g * group * d + x;
    float sk = 0.0f, sv = 0.0f;
    for (int hh = 0; hh < group; ++hh) {
      sk += pk[hh * d];
      sv += pv[hh * d];
    }
    dk[e] = __float2bfloat16_rn(__bfloat162float(dk[e]) + sk);
    dv[e] = __float2bfloat16_rn(__bfloat162float(dv[e]) + sv);
  }
}

// The dQ pass: 64 query rows per block, 4 warps, warp w owning rows [16 w, 16 w + 16) of every
// per-row buffer (so the steps between key tiles need only __syncwarp).
inline constexpr int kDqRows = 64;
inline constexpr int kDqWarps = kDqRows / kTile;
inline constexpr int kDqThreads = 32 * kDqWarps;

// Its dynamic shared memory, byte offsets (each a multiple of 128):
//   q, dout    bf16 (64, d + 8)  the block's query tile and its dO
//   k, v       bf16 (64, d + 8)  the current key and value tiles
//   s, dp      fp32 (64, 68)     S = Q K^T (unscaled), dP = dO V^T
//   ds         bf16 (64, 72)     dS, the tensor-core operand
//   dq         fp32 (64, d + 4)  the dQ accumulator (unscaled)
//   lse, delta fp32 (64)         the query rows' statistics
// d = 128: 4 * 17408 + 2 * 17408 + 9216 + 33792 + 2 * 256 = 147,968 bytes.
struct DqSmem {
  __host__ __device__ constexpr explicit DqSmem(int d)
      : ld_x(d + kPadBf16), ld_a(d + kPadF32), ld_s(kCols + kPadF32), ld_p(kCols + kPadBf16) {
    q = 0;
    dout = q + kDqRows * ld_x * 2;
    k = dout + kDqRows * ld_x * 2;
    v = k + kCols * ld_x * 2;
    s = v + kCols * ld_x * 2;
    dp = s + kDqRows * ld_s * 4;
    ds = dp + kDqRows * ld_s * 4;
    dq = ds + kDqRows * ld_p * 2;
    lse = dq + kDqRows * ld_a * 4;
    delta = lse + kDqRows * 4;
    bytes = delta + kDqRows * 4;
  }
  int ld_x, ld_a, ld_s, ld_p;  // leading dimensions, elements
  int q = 0, dout = 0, k = 0, v = 0, s = 0, dp = 0, ds = 0, dq = 0, lse = 0, delta = 0, bytes = 0;
};
static_assert(DqSmem(128).bytes == 147968 && DqSmem(128).bytes <= 166912);
constexpr bool DqSmemAligned() {
  for (int d = kTile; d <= 128; d += kTile) {
    const DqSmem a(d);
    for (const int offset : {a.dout, a.k, a.v, a.s, a.dp, a.ds, a.dq, a.lse}) {
      if (offset % 128 != 0) return false;
    }
  }
  return true;
}
static_assert(DqSmemAligned());

// grid (B*H, ceil(T/64)), kDqThreads threads; y reversed (the longest query tiles first). For
// the block's query tile and each key tile up to the diagonal: S = Q K^T, dP = dO V^T,
// dS = P o (dP - delta) with P = exp(scale S - lse) where j <= i < T (as BackwardKernel), and
// dQ += dS K; finally dq += scale dQ, one bf16 rounding per element (Alg. 2 line 17 with the
// key loop innermost, so each dq row is summed by one block in key order).
__global__ void __launch_bounds__(kDqThreads)
    DqKernel(const Elem* dout, const Elem* q, const Elem* k, const Elem* v, const float* lse,
             const float* delta, Elem* dq, int64_t t, int heads, int kv_heads, int d, float scale,
             bool vec) {
  extern __shared__ __align__(128) unsigned char smem[];
  const DqSmem lay(d);
  Elem* q_s = reinterpret_cast<Elem*>(smem + lay.q);
  Elem* dout_s = reinterpret_cast<Elem*>(smem + lay.dout);
  Elem* k_s = reinterpret_cast<Elem*>(smem + lay.k);
  Elem* v_s = reinterpret_cast<Elem*>(smem + lay.v);
  float* s_s = reinterpret_cast<float*>(smem + lay.s);
  float* dp_s = reinterpret_cast<float*>(smem + lay.dp);
  Elem* ds_s = reinterpret_cast<Elem*>(smem + lay.ds);
  float* dq_s = reinterpret_cast<float*>(smem + lay.dq);
  float* lse_s = reinterpret_cast<float*>(smem + lay.lse);
  float* delta_s = reinterpret_cast<float*>(smem + lay.delta);

  const int64_t b = blockIdx.x / heads;
  const int h = static_cast<int>(blockIdx.x % heads);
  const int g = h / (heads / kv_heads);
  const int qt = static_cast<int>(gridDim.y - 1 - blockIdx.y);
  const int64_t q0 = static_cast<int64_t>(qt) * kDqRows;
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32, lane = tid % 32;
  const int row0 = warp * kTile;  // this warp's first row in the tile
  const int d_tiles = d / kTile;
  const int64_t ld_q = static_cast<int64_t>(heads) * d;                 // row stride of q, dout, dq
  const int64_t ld_k = static_cast<int64_t>(kv_heads) * d;              // of k, v
  const int64_t q_offset = b * t * ld_q + static_cast<int64_t>(h) * d;  // row i: + i * ld_q
  const int64_t kv_offset = b * t * ld_k + static_cast<int64_t>(g) * d;  // row j: + j * ld_k
  const float* lse_bh = lse + (b * heads + h) * t;
  const float* delta_bh = delta + (b * heads + h) * t;

  LoadRows(q_s, lay.ld_x, q + q_offset, ld_q, q0, kDqRows, t, d, vec);
  LoadRows(dout_s, lay.ld_x, dout + q_offset, ld_q, q0, kDqRows, t, d, vec);
  for (int e = tid; e < kDqRows * d; e += kDqThreads) dq_s[(e / d) * lay.ld_a + e % d] = 0.0f;
  if (tid < kDqRows) {
    const bool in = q0 + tid < t;
    lse_s[tid] = in ? lse_bh[q0 + tid] : 0.0f;
    delta_s[tid] = in ? delta_bh[q0 + tid] : 0.0f;
  }

  for (int kt = 0; kt <= qt; ++kt) {  // block-uniform bounds: every barrier is reached by all
    const int64_t k0 = static_cast<int64_t>(kt) * kCols;
    __syncthreads();  // the previous step's reads of k_s are done (and the setup above)
    LoadRows(k_s, lay.ld_x, k + kv_offset, ld_k, k0, kCols, t, d, vec);
    LoadRows(v_s, lay.ld_x, v + kv_offset, ld_k, k0, kCols, t, d, vec);
    __syncthreads();

    // The warp's 16 rows of S = Q K^T and dP = dO V^T (B = col-major views of K, V).
    for (int n = 0; n < kCols / kTile; ++n) {
      FragC acc;
      wmma::fill_fragment(acc, 0.0f);
      MmaAccumulate<FragA, FragBTransposed>(acc, q_s + row0 * lay.ld_x, kTile, lay.ld_x,
                                            k_s + n * kTile * lay.ld_x, kTile, lay.ld_x, d_tiles);
      wmma::store_matrix_sync(s_s + row0 * lay.ld_s + n * kTile, acc, lay.ld_s,
                              wmma::mem_row_major);
      wmma::fill_fragment(acc, 0.0f);
      MmaAccumulate<FragA, FragBTransposed>(acc, dout_s + row0 * lay.ld_x, kTile, lay.ld_x,
                                            v_s + n * kTile * lay.ld_x, kTile, lay.ld_x, d_tiles);
      wmma::store_matrix_sync(dp_s + row0 * lay.ld_s + n * kTile, acc, lay.ld_s,
                              wmma::mem_row_major);
    }
    __syncwarp();

    // The warp's rows of dS, rounded to bf16.
    for (int e = lane; e < kTile * kCols; e += 32) {
      const int r = row0 + e / kCols, c = e % kCols;
      const int64_t i = q0 + r, j = k0 + c;
      const bool valid = i < t && j <= i;
      const float p = valid ? expf(s_s[r * lay.ld_s + c] * scale - lse_s[r]) : 0.0f;
      ds_s[r * lay.ld_p + c] = __float2bfloat16_rn(p * (dp_s[r * lay.ld_s + c] - delta_s[r]));
    }
    __syncwarp();

    // The warp's rows of dQ += dS K (A = dS, B = K, both row-major).
    for (int n = 0; n < d_tiles; ++n) {
      float* c_tile = dq_s + row0 * lay.ld_a + n * kTile;
      FragC acc;
      wmma::load_matrix_sync(acc, c_tile, lay.ld_a, wmma::mem_row_major);
      MmaAccumulate<FragA, FragB>(acc, ds_s + row0 * lay.ld_p, kTile, lay.ld_p, k_s + n * kTile,
                                  static_cast<int64_t>(kTile) * lay.ld_x, lay.ld_x, kCols / kTile);
      wmma::store_matrix_sync(c_tile, acc, lay.ld_a, wmma::mem_row_major);
    }
  }
  __syncwarp();

  for (int e = lane; e < kTile * d; e += 32) {
    const int r = row0 + e / d, x = e % d;
    if (q0 + r >= t) continue;
    const int64_t idx = q_offset + (q0 + r) * ld_q + x;
    dq[idx] = __float2bfloat16_rn(__bfloat162float(dq[idx]) + scale * dq_s[r * lay.ld_a + x]);
  }
}

}  // namespace

int64_t BackwardSharedBytes(int64_t d) {
  return std::max<int64_t>(BackwardSmem(static_cast<int>(d)).bytes, DqSmem(static_cast<int>(d)).bytes);
}

namespace {

// The workspace: delta (B*H*T floats, rounded up to 64 so the partials start 256-byte aligned),
// then under GQA the dK and dV partials, (B*T, H*d) floats each.
int64_t DeltaFloats(const AttentionDims& dims) {
  return (dims.batch * dims.heads * dims.seq + 63) / 64 * 64;
}
int64_t PartialFloats(const AttentionDims& dims) {
  return dims.heads == dims.kv_heads ? 0 : dims.batch * dims.seq * dims.heads * dims.head_dim;
}

}  // namespace

int64_t BackwardWorkspaceBytes(const AttentionDims& dims) {
  return static_cast<int64_t>(sizeof(float)) * (DeltaFloats(dims) + 2 * PartialFloats(dims));
}

void Backward(cudaStream_t stream, const Elem* dout, const Elem* q, const Elem* k, const Elem* v,
              const Elem* out, const float* lse, Elem* dq, Elem* dk, Elem* dv,
              const AttentionDims& dims, float* workspace) {
  CHECK(Supported(dims)) << "flash_fused::Backward: unsupported dims B " << dims.batch << " T "
                         << dims.seq << " H " << dims.heads << " KV " << dims.kv_heads << " d "
                         << dims.head_dim;
  const int d = static_cast<int>(dims.head_dim);
  const int heads = static_cast<int>(dims.heads), kv_heads = static_cast<int>(dims.kv_heads);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const int64_t rows = dims.batch * dims.seq * dims.heads;  // (token, head) rows of d elements
  const bool vec = Aligned16(dout) && Aligned16(q) && Aligned16(k) && Aligned16(v);
  float* delta = workspace;
  const int64_t partials = PartialFloats(dims);
  float* dk_part = partials > 0 ? workspace + DeltaFloats(dims) : nullptr;
  float* dv_part = partials > 0 ? dk_part + partials : nullptr;

  DeltaKernel<<<cuda_device::BlocksFor(rows * 32), cuda_device::kThreads, 0, stream>>>(
      dout, out, delta, rows, dims.seq, heads, d);
  SHARDSIM_CUDA_CHECK_LAUNCH();

  const BackwardSmem lay(d);
  SHARDSIM_CUDA_CHECK(
      cudaFuncSetAttribute(BackwardKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, lay.bytes));
  const dim3 grid(static_cast<unsigned>(dims.batch * dims.heads),
                  static_cast<unsigned>(Tiles(dims.seq, kCols)));
  BackwardKernel<<<grid, kThreads, lay.bytes, stream>>>(dout, q, k, v, lse, delta, dk, dv, dk_part,
                                                        dv_part, dims.seq, heads, kv_heads, d,
                                                        scale, vec);
  SHARDSIM_CUDA_CHECK_LAUNCH();
  if (partials > 0) {
    const int64_t tokens = dims.batch * dims.seq;
    GroupSumKernel<<<cuda_device::BlocksFor(tokens * dims.kv_heads * d), cuda_device::kThreads, 0,
                     stream>>>(dk_part, dv_part, dk, dv, tokens, heads, kv_heads, d);
    SHARDSIM_CUDA_CHECK_LAUNCH();
  }

  const DqSmem dq_lay(d);
  SHARDSIM_CUDA_CHECK(
      cudaFuncSetAttribute(DqKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, dq_lay.bytes));
  const dim3 dq_grid(static_cast<unsigned>(dims.batch * dims.heads),
                     static_cast<unsigned>(Tiles(dims.seq, kDqRows)));
  DqKernel<<<dq_grid, kDqThreads, dq_lay.bytes, stream>>>(dout, q, k, v, lse, delta, dq, dims.seq,
                                                          heads, kv_heads, d, scale, vec);
  SHARDSIM_CUDA_CHECK_LAUNCH();
}

}  // namespace shardsim::runtime::flash_fused
