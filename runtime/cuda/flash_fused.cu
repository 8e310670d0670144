// See flash_fused.h. This file: Supported and the forward pass (Dao 2023, FlashAttention-2,
// Alg. 1): one block per (64-query tile, batch, head) walks the key tiles up to the causal
// diagonal, with the online softmax (running max m, running sum l) in fp32.
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

inline constexpr int kRows = 64;              // Br: queries per block
inline constexpr int kCols = 64;              // Bc: keys per step (kCols == kRows: the diagonal
                                              // tile of query tile qt is key tile qt)
inline constexpr int kWarps = kRows / kTile;  // 4: warp w owns query rows [16 w, 16 w + 16)
inline constexpr int kThreads = 32 * kWarps;

// The block's dynamic shared memory, byte offsets (each a multiple of 128):
//   q, k, v  bf16 (64, d + 8)  the query tile and the current key and value tiles
//   s        fp32 (64, 68)     S = Q K^T of the current key tile (unscaled)
//   p        bf16 (64, 72)     P = exp(scale S - m) of the current key tile
//   o        fp32 (64, d + 4)  the unnormalised output accumulator
//   m, l     fp32 (64)         running row max and row sum
// d = 128: 3 * 17408 + 17408 + 9216 + 33792 + 2 * 256 = 113,152 bytes (sm_80 allows 166,912,
// sm_90 232,448 per block).
struct ForwardSmem {
  __host__ __device__ constexpr explicit ForwardSmem(int d)
      : ld_x(d + kPadBf16), ld_s(kCols + kPadF32), ld_p(kCols + kPadBf16), ld_o(d + kPadF32) {
    q = 0;
    k = q + kRows * ld_x * 2;
    v = k + kCols * ld_x * 2;
    s = v + kCols * ld_x * 2;
    p = s + kRows * ld_s * 4;
    o = p + kRows * ld_p * 2;
    m = o + kRows * ld_o * 4;
    l = m + kRows * 4;
    bytes = l + kRows * 4;
  }
  int ld_x, ld_s, ld_p, ld_o;  // leading dimensions, elements
  int q = 0, k = 0, v = 0, s = 0, p = 0, o = 0, m = 0, l = 0, bytes = 0;
};
static_assert(ForwardSmem(128).bytes == 113152 && ForwardSmem(128).bytes <= 166912);
// Every tile base 128-byte aligned (wmma wants 32) for every supported d.
constexpr bool ForwardSmemAligned() {
  for (int d = kTile; d <= 128; d += kTile) {
    const ForwardSmem a(d);
    for (const int offset : {a.k, a.v, a.s, a.p, a.o, a.m}) {
      if (offset % 128 != 0) return false;
    }
  }
  return true;
}
static_assert(ForwardSmemAligned());

// grid (B*H, ceil(T/64)), kThreads threads. y is reversed so that the longest query tiles (most
// key tiles) start first.
__global__ void __launch_bounds__(kThreads)
    ForwardKernel(const Elem* q, const Elem* k, const Elem* v, float* lse, Elem* out, int64_t t,
                  int heads, int kv_heads, int d, float scale, bool vec) {
  extern __shared__ __align__(128) unsigned char smem[];
  const ForwardSmem lay(d);
  Elem* q_s = reinterpret_cast<Elem*>(smem + lay.q);
  Elem* k_s = reinterpret_cast<Elem*>(smem + lay.k);
  Elem* v_s = reinterpret_cast<Elem*>(smem + lay.v);
  float* s_s = reinterpret_cast<float*>(smem + lay.s);
  Elem* p_s = reinterpret_cast<Elem*>(smem + lay.p);
  float* o_s = reinterpret_cast<float*>(smem + lay.o);
  float* m_s = reinterpret_cast<float*>(smem + lay.m);
  float* l_s = reinterpret_cast<float*>(smem + lay.l);

  const int64_t b = blockIdx.x / heads;
  const int h = static_cast<int>(blockIdx.x % heads);
  const int g = h / (heads / kv_heads);
  const int qt = static_cast<int>(gridDim.y - 1 - blockIdx.y);
  const int64_t q0 = static_cast<int64_t>(qt) * kRows;
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const int row0 = warp * kTile;  // this warp's first row in the tile
  const int d_steps = d / kTile;
  const int64_t ld_q = static_cast<int64_t>(heads) * d;              // row stride of q and out
  const int64_t ld_k = static_cast<int64_t>(kv_heads) * d;           // of k and v
  const Elem* q_b = q + b * t * ld_q + static_cast<int64_t>(h) * d;  // row i: q_b + i * ld_q
  const Elem* k_b = k + b * t * ld_k + static_cast<int64_t>(g) * d;
  const Elem* v_b = v + b * t * ld_k + static_cast<int64_t>(g) * d;

  LoadRows(q_s, lay.ld_x, q_b, ld_q, q0, kRows, t, d, vec);
  for (int e = threadIdx.x; e < kRows * d; e += blockDim.x) o_s[(e / d) * lay.ld_o + e % d] = 0.0f;
  if (static_cast<int>(threadIdx.x) < kRows) {
    m_s[threadIdx.x] = -INFINITY;
    l_s[threadIdx.x] = 0.0f;
  }

  for (int kt = 0; kt <= qt; ++kt) {  // block-uniform bounds: every barrier is reached by all
    const int64_t k0 = static_cast<int64_t>(kt) * kCols;
    __syncthreads();  // the previous step's reads of k_s, v_s are done (and the setup above)
    LoadRows(k_s, lay.ld_x, k_b, ld_k, k0, kCols, t, d, vec);
    LoadRows(v_s, lay.ld_x, v_b, ld_k, k0, kCols, t, d, vec);
    __syncthreads();

    // S (this warp's 16 rows, 64 keys) = Q K^T: A = Q row-major, B = K^T (col-major view of K).
    for (int n = 0; n < kCols / kTile; ++n) {
      FragC acc;
      wmma::fill_fragment(acc, 0.0f);
      MmaAccumulate<FragA, FragBTransposed>(acc, q_s + row0 * lay.ld_x, kTile, lay.ld_x,
                                            k_s + n * kTile * lay.ld_x, kTile, lay.ld_x, d_steps);
      wmma::store_matrix_sync(s_s + row0 * lay.ld_s + n * kTile, acc, lay.ld_s,
                              wmma::mem_row_major);
    }
    __syncwarp();

    // Online softmax of the warp's rows, one row at a time, lane owning keys lane and lane + 32
    // (Alg. 1 lines 9-10): m_new = max(m, rowmax(scale S)), P = exp(scale S - m_new),
    // l = exp(m - m_new) l + rowsum(P), O *= exp(m - m_new). Key 0 is valid for every row, so m
    // is finite from the first step on and exp(m - m_new) never sees inf - inf.
    for (int r = row0; r < row0 + kTile; ++r) {
      const int64_t i = q0 + r;
      float sv[2];
      bool valid[2];
      float row_max = -INFINITY;
      for (int half = 0; half < 2; ++half) {
        const int c = lane + 32 * half;
        const int64_t j = k0 + c;
        valid[half] = j <= i && j < t;  // causal; keys past T (zero rows) for padding rows
        sv[half] = valid[half] ? s_s[r * lay.ld_s + c] * scale : -INFINITY;
        row_max = fmaxf(row_max, sv[half]);
      }
      row_max = WarpMax(row_max);
      const float m_old = m_s[r];
      const float m_new = fmaxf(m_old, row_max);
      float sum = 0.0f;
      for (int half = 0; half < 2; ++half) {
        const float p = valid[half] ? expf(sv[half] - m_new) : 0.0f;
        sum += p;
        p_s[r * lay.ld_p + lane + 32 * half] = __float2bfloat16_rn(p);
      }
      sum = WarpSum(sum);
      const float alpha = expf(m_old - m_new);  // 0 on the first step (m_old = -inf)
      for (int x = lane; x < d; x += 32) o_s[r * lay.ld_o + x] *= alpha;
      __syncwarp();  // every lane has read m_s[r] before lane 0 replaces it
      if (lane == 0) {
        m_s[r] = m_new;
        l_s[r] = l_s[r] * alpha + sum;
      }
    }
    __syncwarp();

    // O (the warp's 16 rows) += P V: A = P row-major, B = V row-major.
    for (int n = 0; n < d_steps; ++n) {
      FragC acc;
      float* o_tile = o_s + row0 * lay.ld_o + n * kTile;
      wmma::load_matrix_sync(acc, o_tile, lay.ld_o, wmma::mem_row_major);
      MmaAccumulate<FragA, FragB>(acc, p_s + row0 * lay.ld_p, kTile, lay.ld_p, v_s + n * kTile,
                                  static_cast<int64_t>(kTile) * lay.ld_x, lay.ld_x, kCols / kTile);
      wmma::store_matrix_sync(o_tile, acc, lay.ld_o, wmma::mem_row_major);
    }
  }
  __syncwarp();

  // out = O / l and lse = m + log(l) for the warp's rows below T (Alg. 1 lines 12-13).
  Elem* out_b = out + b * t * ld_q + static_cast<int64_t>(h) * d;
  float* lse_bh = lse + (b * heads + h) * t;
  for (int r = row0; r < row0 + kTile; ++r) {
    const int64_t i = q0 + r;
    if (i >= t) break;  // uniform across the warp; no barrier follows
    const float l = l_s[r];
    const float inv_l = 1.0f / l;
    for (int x = lane; x < d; x += 32) {
      out_b[i * ld_q + x] = __float2bfloat16_rn(o_s[r * lay.ld_o + x] * inv_l);
    }
    if (lane == 0) lse_bh[i] = m_s[r] + logf(l);
  }
}

}  // namespace

bool Supported(const AttentionDims& dims) {
  return dims.batch > 0 && dims.seq > 0 && dims.heads > 0 && dims.kv_heads > 0 &&
         dims.heads % dims.kv_heads == 0 && dims.head_dim > 0 && dims.head_dim % kTile == 0 &&
         dims.head_dim <= 128 && Tiles(dims.seq, 64) <= 65535 &&
         dims.batch * dims.heads <= 0x7fffffff;
}

int64_t ForwardSharedBytes(int64_t d) { return ForwardSmem(static_cast<int>(d)).bytes; }

bool FitsDevice(const AttentionDims& dims) {
  if (!Supported(dims)) return false;
  static const int optin = [] {  // a process drives one device (CudaBackend)
    int device = 0, bytes = 0;
    SHARDSIM_CUDA_CHECK(cudaGetDevice(&device));
    SHARDSIM_CUDA_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    return bytes;
  }();
  return std::max(ForwardSharedBytes(dims.head_dim), BackwardSharedBytes(dims.head_dim)) <= optin;
}

void Forward(cudaStream_t stream, const Elem* q, const Elem* k, const Elem* v, float* lse,
             Elem* out, const AttentionDims& dims) {
  CHECK(Supported(dims)) << "flash_fused::Forward: unsupported dims B " << dims.batch << " T "
                         << dims.seq << " H " << dims.heads << " KV " << dims.kv_heads << " d "
                         << dims.head_dim;
  const int d = static_cast<int>(dims.head_dim);
  const ForwardSmem lay(d);
  SHARDSIM_CUDA_CHECK(
      cudaFuncSetAttribute(ForwardKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, lay.bytes));
  const bool vec = Aligned16(q) && Aligned16(k) && Aligned16(v);
  const dim3 grid(static_cast<unsigned>(dims.batch * dims.heads),
                  static_cast<unsigned>(Tiles(dims.seq, kRows)));
  ForwardKernel<<<grid, kThreads, lay.bytes, stream>>>(
      q, k, v, lse, out, dims.seq, static_cast<int>(dims.heads), static_cast<int>(dims.kv_heads), d,
      1.0f / std::sqrt(static_cast<float>(d)), vec);
  SHARDSIM_CUDA_CHECK_LAUNCH();
}

}  // namespace shardsim::runtime::flash_fused
