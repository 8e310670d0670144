// The GEMM-based Kernels of CudaKernels (see cuda_kernels.h): the linear layer and causal GQA
// attention, as cuBLAS calls on the row-major buffers of backend.h plus two row kernels.
//
// Row-major to cuBLAS (column-major). A row-major (r, c) matrix with leading dimension ld is,
// read column-major, its transpose (c, r) with the same ld. So the row-major product
//   C (M, N) = op(A) (M, K) op(B) (K, N)
// is the column-major product C^T (N, M) = op(B)^T op(A)^T, i.e.
//   cublasSgemm(opB, opA, N, M, K, alpha, B, ldb, A, lda, beta, C, ldc)
// with each op flag unchanged: a row-major operand that is not transposed is already its own
// transpose in column-major view (CUBLAS_OP_N), and one that is transposed needs CUBLAS_OP_T.
// RowMajorGemm below is exactly this swap; every call site states its row-major product.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cmath>

#include "runtime/cuda/cuda_device.cuh"
#include "runtime/cuda/cuda_kernels.h"

namespace shardsim::runtime {
namespace {

using cuda_device::BlockMax;
using cuda_device::BlockSum;
using cuda_device::kThreads;
using cuda_device::RowBlocks;

int Int(int64_t x) {
  CHECK(x >= 0 && x <= 0x7fffffff) << x << " exceeds cuBLAS's int dimensions";
  return static_cast<int>(x);
}

// Row-major C (m, n) = alpha op(A) op(B) + beta C, op(A) (m, k), op(B) (k, n); batched over
// `batch` matrices at the given element strides (stride 0 reuses one matrix).
struct Operand {
  const float* p;
  int64_t ld;
  bool trans;
  int64_t stride = 0;
};

void RowMajorGemm(cublasHandle_t h, int64_t m, int64_t n, int64_t k, float alpha, Operand a,
                  Operand b, float beta, float* c, int64_t ldc, int64_t stride_c = 0,
                  int64_t batch = 1) {
  const cublasOperation_t op_a = a.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = b.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (batch == 1) {
    SHARDSIM_CUBLAS_CHECK(cublasSgemm(h, op_b, op_a, Int(n), Int(m), Int(k), &alpha, b.p, Int(b.ld),
                                      a.p, Int(a.ld), &beta, c, Int(ldc)));
  } else {
    SHARDSIM_CUBLAS_CHECK(cublasSgemmStridedBatched(
        h, op_b, op_a, Int(n), Int(m), Int(k), &alpha, b.p, Int(b.ld), b.stride, a.p, Int(a.ld),
        a.stride, &beta, c, Int(ldc), stride_c, Int(batch)));
  }
}

// One block per row r of the (rows, T) score matrices (row i = r % T of its matrix): softmax
// over columns 0..i, zeros after, as attention.cc. Scores are already scaled.
__global__ void CausalSoftmaxKernel(float* p, int64_t t) {
  const int64_t r = blockIdx.x;
  const int64_t i = r % t;
  float* row = p + r * t;
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j <= i; j += blockDim.x) m = fmaxf(m, row[j]);
  const float max = BlockMax(m);
  float s = 0.0f;
  for (int64_t j = threadIdx.x; j <= i; j += blockDim.x) {
    const float e = expf(row[j] - max);
    row[j] = e;
    s += e;
  }
  const float sum = BlockSum(s);
  for (int64_t j = threadIdx.x; j < t; j += blockDim.x) row[j] = j <= i ? row[j] / sum : 0.0f;
}

// One block per row: dS = P (dP - rowsum(P dP)), overwriting dP (softmax's backward).
__global__ void SoftmaxBackwardKernel(const float* p, float* dp, int64_t t) {
  const int64_t r = blockIdx.x;
  const float* pr = p + r * t;
  float* dr = dp + r * t;
  float s = 0.0f;
  for (int64_t j = threadIdx.x; j < t; j += blockDim.x) s += pr[j] * dr[j];
  const float dot = BlockSum(s);
  for (int64_t j = threadIdx.x; j < t; j += blockDim.x) dr[j] = pr[j] * (dr[j] - dot);
}

}  // namespace

// out (n, m) = in (n, k) w^T: RowMajorGemm(M=n, N=m, K=k, A=in (ld k), B=w transposed (ld k)),
// i.e. cublasSgemm(T, N, m, n, k, w, k, in, k, out, m).
void CudaKernels::LinearForward(const float* in, const float* w, const float* bias, float* out,
                                int64_t n, int64_t k, int64_t m) {
  if (n * m == 0) return;
  RowMajorGemm(cublas_, n, m, k, 1.0f, {in, k, false}, {w, k, true}, 0.0f, out, m);
  if (bias != nullptr) AddRowBias(out, bias, n, m);
}

// din (n, k) += dout (n, m) w (m, k); dw (m, k) += dout^T (m, n) in (n, k); db += colsum(dout).
void CudaKernels::LinearBackward(const float* dout, const float* in, const float* w, float* din,
                                 float* dw, float* db, int64_t n, int64_t k, int64_t m) {
  if (n == 0) return;
  if (din != nullptr) {
    RowMajorGemm(cublas_, n, k, m, 1.0f, {dout, m, false}, {w, k, false}, 1.0f, din, k);
  }
  RowMajorGemm(cublas_, m, k, n, 1.0f, {dout, m, true}, {in, k, false}, 1.0f, dw, k);
  if (db != nullptr) AddColumnSums(dout, db, n, m);
}

// Buffers: q, out (B*T, H*d); k, v (B*T, KV*d); probs (B, H, T, T). For sequence b and KV head
// g, the query heads h = g*group + j (j < group) share K_g, V_g; Q_h is the (T, d) block at
// row b*T, column h*d (ld H*d), so consecutive j are d floats apart (the batch stride), and
// K_g's stride is 0. Per (b, g):
//   S_h (T, T) = scale Q_h K_g^T            into probs[b, h]   (batched over j, stride T*T)
//   P_h = causal row-softmax of S_h          (one kernel over all B*H*T rows afterwards)
//   O_h (T, d) = P_h V_g                     (batched over j)
void CudaKernels::AttentionForward(const float* q, const float* k, const float* v, float* probs,
                                   float* out, const AttentionDims& s) {
  CHECK(s.kv_heads > 0 && s.heads % s.kv_heads == 0) << s.heads << " / " << s.kv_heads;
  const int64_t t = s.seq, d = s.head_dim, group = s.heads / s.kv_heads;
  if (s.batch * s.heads * t == 0) return;
  const int64_t ldq = s.heads * d, ldk = s.kv_heads * d;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t g = 0; g < s.kv_heads; ++g) {
      const int64_t h0 = g * group;
      RowMajorGemm(cublas_, t, t, d, scale, {q + b * t * ldq + h0 * d, ldq, false, d},
                   {k + b * t * ldk + g * d, ldk, true, 0}, 0.0f,
                   probs + (b * s.heads + h0) * t * t, t, t * t, group);
    }
  }
  CausalSoftmaxKernel<<<RowBlocks(s.batch * s.heads * t), kThreads, 0, stream_>>>(probs, t);
  SHARDSIM_CUDA_CHECK_LAUNCH();
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t g = 0; g < s.kv_heads; ++g) {
      const int64_t h0 = g * group;
      RowMajorGemm(cublas_, t, d, t, 1.0f, {probs + (b * s.heads + h0) * t * t, t, false, t * t},
                   {v + b * t * ldk + g * d, ldk, false, 0}, 0.0f, out + b * t * ldq + h0 * d, ldq,
                   d, group);
    }
  }
}

// Per (b, g), with dP for the group's heads in scratch (group, T, T):
//   dP_h = dO_h V_g^T                        (batched over j)
//   dV_g += P_h^T dO_h                       (one GEMM per j: the outputs coincide)
//   dS_h = P_h (dP_h - rowsum(P_h dP_h))     (row kernel, in place)
//   dQ_h += scale dS_h K_g                   (batched over j)
//   dK_g += scale dS_h^T Q_h                 (one GEMM per j)
void CudaKernels::AttentionBackward(const float* dout, const float* q, const float* k,
                                    const float* v, const float* probs, float* dq, float* dk,
                                    float* dv, const AttentionDims& s) {
  CHECK(s.kv_heads > 0 && s.heads % s.kv_heads == 0) << s.heads << " / " << s.kv_heads;
  const int64_t t = s.seq, d = s.head_dim, group = s.heads / s.kv_heads;
  if (s.batch * s.heads * t == 0) return;
  const int64_t ldq = s.heads * d, ldk = s.kv_heads * d;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  auto* dp =
      static_cast<float*>(Grow(attention_, group * t * t * static_cast<int64_t>(sizeof(float))));
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t g = 0; g < s.kv_heads; ++g) {
      const int64_t h0 = g * group;
      const float* p0 = probs + (b * s.heads + h0) * t * t;
      const float* do0 = dout + b * t * ldq + h0 * d;
      const float* q0 = q + b * t * ldq + h0 * d;
      const float* kg = k + b * t * ldk + g * d;
      const float* vg = v + b * t * ldk + g * d;
      float* dkg = dk + b * t * ldk + g * d;
      float* dvg = dv + b * t * ldk + g * d;
      RowMajorGemm(cublas_, t, t, d, 1.0f, {do0, ldq, false, d}, {vg, ldk, true, 0}, 0.0f, dp, t,
                   t * t, group);
      for (int64_t j = 0; j < group; ++j) {
        RowMajorGemm(cublas_, t, d, t, 1.0f, {p0 + j * t * t, t, true}, {do0 + j * d, ldq, false},
                     1.0f, dvg, ldk);
      }
      SoftmaxBackwardKernel<<<RowBlocks(group * t), kThreads, 0, stream_>>>(p0, dp, t);
      SHARDSIM_CUDA_CHECK_LAUNCH();
      RowMajorGemm(cublas_, t, d, t, scale, {dp, t, false, t * t}, {kg, ldk, false, 0}, 1.0f,
                   dq + b * t * ldq + h0 * d, ldq, d, group);
      for (int64_t j = 0; j < group; ++j) {
        RowMajorGemm(cublas_, t, d, t, scale, {dp + j * t * t, t, true}, {q0 + j * d, ldq, false},
                     1.0f, dkg, ldk);
      }
    }
  }
}

}  // namespace shardsim::runtime
