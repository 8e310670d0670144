// RowMajorGemm: one cuBLAS GEMM (or strided batch of them) on the row-major buffers of
// backend.h, fp32 or bf16 storage, as the linear layer and attention (cuda_attention.cu) use it.
//
// Row-major to cuBLAS (column-major). A row-major (r, c) matrix with leading dimension ld is,
// read column-major, its transpose (c, r) with the same ld. So the row-major product
//   C (M, N) = op(A) (M, K) op(B) (K, N)
// is the column-major product C^T (N, M) = op(B)^T op(A)^T, i.e.
//   cublasSgemm(opB, opA, N, M, K, alpha, B, ldb, A, lda, beta, C, ldc)
// with each op flag unchanged: a row-major operand that is not transposed is already its own
// transpose in column-major view (CUBLAS_OP_N), and one that is transposed needs CUBLAS_OP_T.
// RowMajorGemm is exactly this swap; every call site states its row-major product.
//
// Precision, by operand types:
//   fp32 A, B, C: cublasSgemm(StridedBatched) under the handle's math mode (CudaBackend sets
//     CUBLAS_PEDANTIC_MATH: fp32 compute, no TF32), as before mixed precision;
//   bf16 A, B; C bf16 or fp32: cublasGemm(StridedBatched)Ex with CUBLAS_COMPUTE_32F and the
//     default (tensor-op) algorithm: bf16 products, fp32 accumulation, alpha AB + beta C in fp32,
//     C rounded once if bf16. An fp32 C is Megatron's gradient-accumulation fusion (dw += in
//     fp32 main grads). For these calls the handle's math mode is CUBLAS_DEFAULT_MATH (pedantic
//     mode may exclude tensor cores) with CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION (no
//     split-K reduction in bf16) for the call's duration, then restored.
// Other combinations (fp32 with bf16 operands) are not supported by cuBLAS and CHECK-fail.
#pragma once

#include <cublas_v2.h>
#include <library_types.h>

#include <cstdint>

#include "runtime/backend/bf16.h"

namespace shardsim::runtime::cuda_gemm {

template <typename T>
constexpr cudaDataType_t CudaTypeOf();
template <>
constexpr cudaDataType_t CudaTypeOf<float>() {
  return CUDA_R_32F;
}
template <>
constexpr cudaDataType_t CudaTypeOf<Bf16>() {
  return CUDA_R_16BF;
}

// A row-major input matrix: leading dimension `ld` (elements), transposed in the product when
// `trans`, `stride` elements between the matrices of a batch (0 reuses one matrix).
struct Operand {
  const void* p;
  cudaDataType_t type;
  int64_t ld;
  bool trans;
  int64_t stride;
};
template <typename T>
Operand In(const T* p, int64_t ld, bool trans, int64_t stride = 0) {
  return {p, CudaTypeOf<T>(), ld, trans, stride};
}

// The row-major output matrix, likewise.
struct Output {
  void* p;
  cudaDataType_t type;
  int64_t ld;
  int64_t stride;
};
template <typename T>
Output Out(T* p, int64_t ld, int64_t stride = 0) {
  return {p, CudaTypeOf<T>(), ld, stride};
}

// Row-major C (m, n) = alpha op(A) op(B) + beta C with op(A) (m, k), op(B) (k, n), over `batch`
// matrices at the operands' strides. Enqueued on the handle's stream.
void RowMajorGemm(cublasHandle_t h, int64_t m, int64_t n, int64_t k, float alpha, const Operand& a,
                  const Operand& b, float beta, const Output& c, int64_t batch = 1);

}  // namespace shardsim::runtime::cuda_gemm
