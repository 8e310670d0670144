// The GEMM-based members of CudaTypedKernels (see cuda_typed_kernels.h): the linear layer and
// causal GQA attention, as cuBLAS calls (cuda_gemm.h: row-major conventions, precision per
// operand type) on the row-major buffers of backend.h, plus row kernels for the softmax.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cmath>
#include <type_traits>

#include "runtime/cuda/cuda_device.cuh"
#include "runtime/cuda/cuda_gemm.h"
#include "runtime/cuda/cuda_typed_kernels.h"

namespace shardsim::runtime {
namespace {

using cuda_device::BlockMax;
using cuda_device::BlocksFor;
using cuda_device::BlockSum;
using cuda_device::GlobalIndex;
using cuda_device::GlobalStride;
using cuda_device::kThreads;
using cuda_device::Load;
using cuda_device::RowBlocks;
using cuda_device::Store;
using cuda_device::ToDev;
using cuda_gemm::In;
using cuda_gemm::Out;
using cuda_gemm::RowMajorGemm;

// out (n, c) = bias broadcast over rows: the C that a bf16 linear layer's GEMM adds into.
template <typename E>
__global__ void BroadcastRowsKernel(E* out, const E* bias, int64_t n, int64_t c) {
  for (int64_t idx = GlobalIndex(); idx < n * c; idx += GlobalStride()) out[idx] = bias[idx % c];
}

// One block per row r of the (rows, T) score matrices s (fp32; row i = r % T of its matrix):
// p = softmax over columns 0..i, zeros after, as attention.cc. Scores are already scaled.
// p may alias s (fp32): the first two passes only read, and the last reads s[j] and writes
// p[j] in the same thread. The exponentials are recomputed in the last pass rather than
// stored unnormalised (a bf16 p is rounded once); on float the result is bitwise the same.
template <typename E>
__global__ void CausalSoftmaxKernel(const float* s, E* p, int64_t t) {
  const int64_t r = blockIdx.x;
  const int64_t i = r % t;
  const float* srow = s + r * t;
  E* prow = p + r * t;
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j <= i; j += blockDim.x) m = fmaxf(m, srow[j]);
  const float max = BlockMax(m);
  float sum_e = 0.0f;
  for (int64_t j = threadIdx.x; j <= i; j += blockDim.x) sum_e += expf(srow[j] - max);
  const float sum = BlockSum(sum_e);
  for (int64_t j = threadIdx.x; j < t; j += blockDim.x) {
    Store(prow + j, j <= i ? expf(srow[j] - max) / sum : 0.0f);
  }
}

// One block per row: dS = P (dP - rowsum(P dP)) from P (E) and dP (fp32) into ds (E). ds may
// alias dp (fp32): each thread reads dp[j] before writing ds[j], and the row sum is complete
// (BlockSum's barriers) before any write.
template <typename E>
__global__ void SoftmaxBackwardKernel(const E* p, const float* dp, E* ds, int64_t t) {
  const int64_t r = blockIdx.x;
  const E* pr = p + r * t;
  const float* dr = dp + r * t;
  E* sr = ds + r * t;
  float s = 0.0f;
  for (int64_t j = threadIdx.x; j < t; j += blockDim.x) s += Load(pr + j) * dr[j];
  const float dot = BlockSum(s);
  for (int64_t j = threadIdx.x; j < t; j += blockDim.x) {
    const float pj = Load(pr + j);
    Store(sr + j, pj * (dr[j] - dot));
  }
}

// Bytes from the start of attention's scratch to its bf16 part, rounded up so that part is
// 256-byte aligned, as cuBLAS's tensor-op kernels prefer.
int64_t AlignUp(int64_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace

// out (n, m) = in (n, k) w^T: RowMajorGemm(M=n, N=m, K=k, A=in (ld k), B=w transposed (ld k)),
// i.e. cublasSgemm(T, N, m, n, k, w, k, in, k, out, m). fp32: then += bias (as before). bf16:
// out = bias rows first and the GEMM accumulates into them (beta 1): one rounding.
template <typename T>
void CudaTypedKernels<T>::LinearForward(const T* in, const T* w, const T* bias, T* out, int64_t n,
                                        int64_t k, int64_t m) {
  if (n * m == 0) return;
  if constexpr (std::is_same_v<T, float>) {
    RowMajorGemm(ws_.cublas(), n, m, k, 1.0f, In(in, k, false), In(w, k, true), 0.0f, Out(out, m));
    if (bias != nullptr) AddRowBias(out, bias, n, m);
  } else {
    float beta = 0.0f;
    if (bias != nullptr) {
      BroadcastRowsKernel<<<BlocksFor(n * m), kThreads, 0, ws_.stream()>>>(ToDev(out), ToDev(bias),
                                                                           n, m);
      SHARDSIM_CUDA_CHECK_LAUNCH();
      beta = 1.0f;
    }
    RowMajorGemm(ws_.cublas(), n, m, k, 1.0f, In(in, k, false), In(w, k, true), beta, Out(out, m));
  }
}

// din (n, k) += dout (n, m) w (m, k); dw (m, k) += dout^T (m, n) in (n, k); db += colsum(dout).
// dw and db are fp32 whatever T is: on bf16 the dw GEMM takes bf16 operands and accumulates
// into the fp32 C (beta 1).
template <typename T>
void CudaTypedKernels<T>::LinearBackward(const T* dout, const T* in, const T* w, T* din, float* dw,
                                         float* db, int64_t n, int64_t k, int64_t m) {
  if (n == 0) return;
  if (din != nullptr) {
    RowMajorGemm(ws_.cublas(), n, k, m, 1.0f, In(dout, m, false), In(w, k, false), 1.0f,
                 Out(din, k));
  }
  RowMajorGemm(ws_.cublas(), m, k, n, 1.0f, In(dout, m, true), In(in, k, false), 1.0f, Out(dw, k));
  if (db != nullptr) AddColumnSums(dout, db, n, m);
}

// Buffers: q, out (B*T, H*d); k, v (B*T, KV*d); probs (B, H, T, T). For sequence b and KV head
// g, the query heads h = g*group + j (j < group) share K_g, V_g; Q_h is the (T, d) block at
// row b*T, column h*d (ld H*d), so consecutive j are d elements apart (the batch stride), and
// K_g's stride is 0. Per (b, g):
//   S_h (T, T) = scale Q_h K_g^T        (batched over j, stride T*T) into fp32 scores: probs[b, h]
//                                       itself on fp32, the scratch (group, T, T) on bf16
//   P_h = causal row-softmax of S_h     into probs[b, h] (group*T rows, one kernel)
//   O_h (T, d) = P_h V_g                (batched over j)
template <typename T>
void CudaTypedKernels<T>::AttentionForward(const T* q, const T* k, const T* v, T* probs, T* out,
                                           const AttentionDims& s) {
  CHECK(s.kv_heads > 0 && s.heads % s.kv_heads == 0) << s.heads << " / " << s.kv_heads;
  const int64_t t = s.seq, d = s.head_dim, group = s.heads / s.kv_heads;
  if (s.batch * s.heads * t == 0) return;
  const int64_t ldq = s.heads * d, ldk = s.kv_heads * d;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  float* scratch = nullptr;
  if constexpr (!std::is_same_v<T, float>) {
    scratch = static_cast<float*>(ws_.Grow(CudaWorkspace::Slot::kAttention,
                                           group * t * t * static_cast<int64_t>(sizeof(float))));
  }
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t g = 0; g < s.kv_heads; ++g) {
      const int64_t h0 = g * group;
      T* p0 = probs + (b * s.heads + h0) * t * t;
      float* scores;
      if constexpr (std::is_same_v<T, float>) {
        scores = p0;
      } else {
        scores = scratch;
      }
      RowMajorGemm(ws_.cublas(), t, t, d, scale, In(q + b * t * ldq + h0 * d, ldq, false, d),
                   In(k + b * t * ldk + g * d, ldk, true, 0), 0.0f, Out(scores, t, t * t), group);
      CausalSoftmaxKernel<<<RowBlocks(group * t), kThreads, 0, ws_.stream()>>>(scores, ToDev(p0),
                                                                               t);
      SHARDSIM_CUDA_CHECK_LAUNCH();
      RowMajorGemm(ws_.cublas(), t, d, t, 1.0f, In<T>(p0, t, false, t * t),
                   In(v + b * t * ldk + g * d, ldk, false, 0), 0.0f,
                   Out(out + b * t * ldq + h0 * d, ldq, d), group);
    }
  }
}

// Per (b, g), with dP for the group's heads in fp32 scratch (group, T, T), and dS in place of
// dP on fp32 or in a bf16 scratch (group, T, T) after it on bf16:
//   dP_h = dO_h V_g^T                        (batched over j)
//   dV_g += P_h^T dO_h                       (one GEMM per j: the outputs coincide)
//   dS_h = P_h (dP_h - rowsum(P_h dP_h))     (row kernel)
//   dQ_h += scale dS_h K_g                   (batched over j)
//   dK_g += scale dS_h^T Q_h                 (one GEMM per j)
template <typename T>
void CudaTypedKernels<T>::AttentionBackward(const T* dout, const T* q, const T* k, const T* v,
                                            const T* probs, T* dq, T* dk, T* dv,
                                            const AttentionDims& s) {
  CHECK(s.kv_heads > 0 && s.heads % s.kv_heads == 0) << s.heads << " / " << s.kv_heads;
  const int64_t t = s.seq, d = s.head_dim, group = s.heads / s.kv_heads;
  if (s.batch * s.heads * t == 0) return;
  const int64_t ldq = s.heads * d, ldk = s.kv_heads * d;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const int64_t dp_bytes = group * t * t * static_cast<int64_t>(sizeof(float));
  float* dp;
  T* ds;
  if constexpr (std::is_same_v<T, float>) {
    dp = static_cast<float*>(ws_.Grow(CudaWorkspace::Slot::kAttention, dp_bytes));
    ds = dp;
  } else {
    const int64_t ds_at = AlignUp(dp_bytes);
    auto* base = static_cast<char*>(ws_.Grow(
        CudaWorkspace::Slot::kAttention, ds_at + group * t * t * static_cast<int64_t>(sizeof(T))));
    dp = reinterpret_cast<float*>(base);
    ds = reinterpret_cast<T*>(base + ds_at);
  }
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t g = 0; g < s.kv_heads; ++g) {
      const int64_t h0 = g * group;
      const T* p0 = probs + (b * s.heads + h0) * t * t;
      const T* do0 = dout + b * t * ldq + h0 * d;
      const T* q0 = q + b * t * ldq + h0 * d;
      const T* kg = k + b * t * ldk + g * d;
      const T* vg = v + b * t * ldk + g * d;
      T* dkg = dk + b * t * ldk + g * d;
      T* dvg = dv + b * t * ldk + g * d;
      RowMajorGemm(ws_.cublas(), t, t, d, 1.0f, In(do0, ldq, false, d), In(vg, ldk, true, 0), 0.0f,
                   Out(dp, t, t * t), group);
      for (int64_t j = 0; j < group; ++j) {
        RowMajorGemm(ws_.cublas(), t, d, t, 1.0f, In(p0 + j * t * t, t, true),
                     In(do0 + j * d, ldq, false), 1.0f, Out(dvg, ldk));
      }
      SoftmaxBackwardKernel<<<RowBlocks(group * t), kThreads, 0, ws_.stream()>>>(ToDev(p0), dp,
                                                                                 ToDev(ds), t);
      SHARDSIM_CUDA_CHECK_LAUNCH();
      RowMajorGemm(ws_.cublas(), t, d, t, scale, In<T>(ds, t, false, t * t), In(kg, ldk, false, 0),
                   1.0f, Out(dq + b * t * ldq + h0 * d, ldq, d), group);
      for (int64_t j = 0; j < group; ++j) {
        RowMajorGemm(ws_.cublas(), t, d, t, scale, In<T>(ds + j * t * t, t, true),
                     In(q0 + j * d, ldq, false), 1.0f, Out(dkg, ldk));
      }
    }
  }
}

// Explicit instantiations of the members defined here (the class itself is instantiated in
// cuda_typed_kernels.cu with the members defined there).
#define SHARDSIM_INSTANTIATE_GEMM_KERNELS(T)                                                  \
  template void CudaTypedKernels<T>::LinearForward(const T*, const T*, const T*, T*, int64_t, \
                                                   int64_t, int64_t);                         \
  template void CudaTypedKernels<T>::LinearBackward(const T*, const T*, const T*, T*, float*, \
                                                    float*, int64_t, int64_t, int64_t);       \
  template void CudaTypedKernels<T>::AttentionForward(const T*, const T*, const T*, T*, T*,   \
                                                      const AttentionDims&);                  \
  template void CudaTypedKernels<T>::AttentionBackward(                                       \
      const T*, const T*, const T*, const T*, const T*, T*, T*, T*, const AttentionDims&);
SHARDSIM_INSTANTIATE_GEMM_KERNELS(float)
SHARDSIM_INSTANTIATE_GEMM_KERNELS(Bf16)
#undef SHARDSIM_INSTANTIATE_GEMM_KERNELS

}  // namespace shardsim::runtime
