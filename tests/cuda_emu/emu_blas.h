// cuBLAS and cuBLASLt for the CPU emulator: exactly the calls runtime/cuda/cuda_gemm.cc makes,
// as plain column-major GEMMs on the host, D = alpha op(A) op(B) + beta C. Each output element
// is an fp32 sum over k = 0..K-1 in that order of exact products (bf16 inputs widened), then
// alpha sum + beta C in fp32 (C not read when beta is 0, as cuBLAS), rounded once to C's type.
// Real cuBLAS sums in its kernels' order (tiles, split-K), so results agree to fp32 rounding,
// not bitwise; the math mode (TF32, reduced-precision reduction) changes nothing here. Shapes
// and leading dimensions are checked as cuBLAS checks them (CUBLAS_STATUS_INVALID_VALUE);
// cuBLASLt's layouts must agree with each other and the operations, C and D in place must have
// one layout, and a matmul's pointers must be as aligned as the preference the algorithm was
// found for (else CUBLAS_STATUS_NOT_SUPPORTED). The heuristic returns one algorithm, needing
// no workspace.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tests/cuda_emu/emu_runtime.h"

// library_types.h
enum cudaDataType_t { CUDA_R_32F = 0, CUDA_R_16BF = 14 };

// cublas_api.h
enum cublasStatus_t {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
};
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum cublasMath_t {
  CUBLAS_DEFAULT_MATH = 0,
  CUBLAS_TENSOR_OP_MATH = 1,
  CUBLAS_PEDANTIC_MATH = 2,
  CUBLAS_TF32_TENSOR_OP_MATH = 3,
  CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION = 16,
};
enum cublasComputeType_t { CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_32F_FAST_TF32 = 77 };
enum cublasGemmAlgo_t { CUBLAS_GEMM_DEFAULT = -1 };
using cublasHandle_t = struct cublasContext*;

const char* cublasGetStatusName(cublasStatus_t s);
const char* cublasGetStatusString(cublasStatus_t s);
cublasStatus_t cublasCreate(cublasHandle_t* handle);
cublasStatus_t cublasDestroy(cublasHandle_t handle);
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream);
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode);
cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t* mode);
cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa,
                           cublasOperation_t transb, int m, int n, int k, const float* alpha,
                           const float* a, int lda, const float* b, int ldb, const float* beta,
                           float* c, int ldc);
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const float* alpha, const float* a, int lda,
                                         long long stride_a, const float* b, int ldb,
                                         long long stride_b, const float* beta, float* c, int ldc,
                                         long long stride_c, int batch);
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void* alpha,
                            const void* a, cudaDataType_t a_type, int lda, const void* b,
                            cudaDataType_t b_type, int ldb, const void* beta, void* c,
                            cudaDataType_t c_type, int ldc, cublasComputeType_t compute,
                            cublasGemmAlgo_t algo);
cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
    const void* alpha, const void* a, cudaDataType_t a_type, int lda, long long stride_a,
    const void* b, cudaDataType_t b_type, int ldb, long long stride_b, const void* beta, void* c,
    cudaDataType_t c_type, int ldc, long long stride_c, int batch, cublasComputeType_t compute,
    cublasGemmAlgo_t algo);

// cublasLt.h
using cublasLtHandle_t = struct cublasLtContext*;
using cublasLtMatmulDesc_t = struct cublasLtMatmulDescOpaque_t*;
using cublasLtMatrixLayout_t = struct cublasLtMatrixLayoutOpaque_t*;
using cublasLtMatmulPreference_t = struct cublasLtMatmulPreferenceOpaque_t*;
struct cublasLtMatmulAlgo_t {
  uint64_t data[8];
};
struct cublasLtMatmulHeuristicResult_t {
  cublasLtMatmulAlgo_t algo;
  size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
};
enum cublasLtMatmulDescAttributes_t {
  CUBLASLT_MATMUL_DESC_TRANSA = 3,
  CUBLASLT_MATMUL_DESC_TRANSB = 4,
};
enum cublasLtMatmulPreferenceAttributes_t {
  CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,
  CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK = 3,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8,
};
enum cublasLtReductionScheme_t {
  CUBLASLT_REDUCTION_SCHEME_NONE = 0,
  CUBLASLT_REDUCTION_SCHEME_INPLACE = 1,
  CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE = 2,
  CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE = 4,
};

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle);
cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle);
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute,
                                        cudaDataType_t scale_type);
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc);
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                              cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t size);
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType_t type,
                                          uint64_t rows, uint64_t cols, int64_t ld);
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout);
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref);
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref);
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void* buf, size_t size);
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t op,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t* results,
                                              int* returned);
cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t op, const void* alpha,
                              const void* a, cublasLtMatrixLayout_t a_layout, const void* b,
                              cublasLtMatrixLayout_t b_layout, const void* beta, const void* c,
                              cublasLtMatrixLayout_t c_layout, void* d,
                              cublasLtMatrixLayout_t d_layout, const cublasLtMatmulAlgo_t* algo,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream);
