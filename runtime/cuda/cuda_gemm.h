// cuda_gemm: the row-major GEMMs of the CUDA backend (the linear layers, cuda_attention.cu's
// linear and unfused-attention products), fp32 or bf16 storage.
//
// Row-major to column-major. A row-major (r, c) matrix with leading dimension ld is, read
// column-major, its transpose (c, r) with the same ld. So the row-major product
//   C (M, N) = op(A) (M, K) op(B) (K, N)
// is the column-major product C^T (N, M) = op(B)^T op(A)^T, i.e.
//   gemm(opB, opA, N, M, K, alpha, B, ldb, A, lda, beta, C, ldc)
// with each op flag unchanged: a row-major operand that is not transposed is already its own
// transpose in column-major view (N), and one that is transposed needs T. Both paths below are
// exactly this swap; every call site states its row-major product.
//
// Two paths, the same products:
//   cuBLASLt (Gemm::Run, single GEMMs, the default): cublasLtMatmul with the algorithm that
//     cublasLtMatmulAlgoGetHeuristic ranks first for the shape, the operand types and the
//     pointers' alignments, cached per such key (the heuristic costs host time, as PyTorch's
//     and Megatron/TransformerEngine's GEMM wrappers also cache). Compute CUBLAS_COMPUTE_32F
//     either way: fp32 operands get plain fp32 math (no TF32: that is
//     CUBLAS_COMPUTE_32F_FAST_TF32), bf16 operands tensor-core products with fp32 accumulation
//     and alpha AB + beta C in fp32, C rounded once if bf16. An fp32 C with bf16 operands is
//     Megatron's gradient-accumulation fusion (dw += in fp32 main grads). Split-K partial sums
//     are reduced only in the compute type (reduction-scheme mask COMPUTE_TYPE: no in-place
//     reduction in the output buffer, no reduction in bf16), which also keeps each algorithm
//     free of atomics, so results repeat bitwise run to run. The workspace is the size the
//     cuBLAS API reference recommends (cublasSetWorkspace): 32 MiB on Hopper (sm_90 and
//     later), 4 MiB before, allocated once, stream-ordered and outside Memory's accounting.
//   cuBLAS (RowMajorGemm): cublasSgemm(StridedBatched) for fp32 under the handle's math mode
//     (CudaBackend sets CUBLAS_PEDANTIC_MATH: fp32 compute, no TF32), cublasGemm(StridedBatched)Ex
//     with CUBLAS_COMPUTE_32F for bf16 (tensor ops allowed for the call, split-K reduced in fp32:
//     CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION). Gemm::Run takes it for batched calls
//     (the unfused attention's per-head products), when the heuristic offers no algorithm or
//     cublasLtMatmul reports the case unsupported, and for every call when the environment sets
//     SHARDSIM_CUBLASLT=0 (an A/B switch for checking the Lt path on a GPU).
// Other type combinations (fp32 with bf16 operands) are not supported by cuBLAS and CHECK-fail.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <library_types.h>

#include <array>
#include <cstdint>
#include <map>

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
// matrices at the operands' strides, with cuBLAS. Enqueued on the handle's stream.
void RowMajorGemm(cublasHandle_t h, int64_t m, int64_t n, int64_t k, float alpha, const Operand& a,
                  const Operand& b, float beta, const Output& c, int64_t batch = 1);

// The backend's GEMM entry point: cuBLASLt for single GEMMs, cuBLAS otherwise (see above).
class Gemm {
 public:
  enum class Path { kLt, kCublas };
  // `stream` and `cublas` (bound to `stream`) are owned by the caller and outlive this object.
  // `path` kLt still falls back per shape as above; the default reads SHARDSIM_CUBLASLT.
  Gemm(cudaStream_t stream, cublasHandle_t cublas, Path path = DefaultPath());
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;
  ~Gemm();

  // kCublas when the environment sets SHARDSIM_CUBLASLT=0, else kLt.
  static Path DefaultPath();

  // Row-major C = alpha op(A) op(B) + beta C as RowMajorGemm, on the stream.
  void Run(int64_t m, int64_t n, int64_t k, float alpha, const Operand& a, const Operand& b,
           float beta, const Output& c, int64_t batch = 1);

  cublasHandle_t cublas() const { return cublas_; }
  // Calls run through cublasLtMatmul, and through cuBLAS (batched or fallen back), so far.
  int64_t lt_calls() const { return lt_calls_; }
  int64_t cublas_calls() const { return cublas_calls_; }

 private:
  // Shape (m, n, k), types and transposes of A, B, C, leading dimensions, and the alignment in
  // bytes (up to 256) of each pointer: what the heuristic's answer depends on.
  using Key = std::array<int64_t, 14>;
  struct Plan {
    bool lt = false;  // false: this key goes to cuBLAS
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  Plan& PlanFor(const Key& key, int64_t m, int64_t n, int64_t k, const Operand& a,
                const Operand& b, const Output& c);
  void RunCublas(int64_t m, int64_t n, int64_t k, float alpha, const Operand& a, const Operand& b,
                 float beta, const Output& c, int64_t batch);

  cudaStream_t stream_;
  cublasHandle_t cublas_;
  Path path_;
  cublasLtHandle_t lt_ = nullptr;
  void* workspace_ = nullptr;
  int64_t workspace_bytes_ = 0;
  std::map<Key, Plan> plans_;
  int64_t lt_calls_ = 0;
  int64_t cublas_calls_ = 0;
};

}  // namespace shardsim::runtime::cuda_gemm
