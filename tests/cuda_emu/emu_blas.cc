// See emu_blas.h.
#include "tests/cuda_emu/emu_blas.h"

#include <algorithm>
#include <cstring>
#include <vector>

struct cublasContext {
  cudaStream_t stream = nullptr;
  cublasMath_t mode = CUBLAS_DEFAULT_MATH;
};
struct cublasLtContext {};
struct cublasLtMatmulDescOpaque_t {
  cublasComputeType_t compute;
  cudaDataType_t scale;
  cublasOperation_t trans_a = CUBLAS_OP_N, trans_b = CUBLAS_OP_N;
};
struct cublasLtMatrixLayoutOpaque_t {
  cudaDataType_t type;
  uint64_t rows, cols;
  int64_t ld;
  bool operator==(const cublasLtMatrixLayoutOpaque_t&) const = default;
};
struct cublasLtMatmulPreferenceOpaque_t {
  uint64_t max_workspace = 0;
  uint32_t reduction_mask = 0;
  uint32_t alignment[4] = {256, 256, 256, 256};  // A, B, C, D; cuBLASLt's default
};

namespace {

constexpr uint64_t kAlgoMagic = 0x656d752d616c676fULL;  // "emu-algo"

// A column-major matrix: element (r, c) at p[r + c ld], matrix i of a batch at i * stride.
struct Matrix {
  const void* p;
  cudaDataType_t type;
  int64_t ld, stride;
};

float Get(const Matrix& x, int64_t at) {
  if (x.type == CUDA_R_32F) return static_cast<const float*>(x.p)[at];
  return __bfloat162float(static_cast<const __nv_bfloat16*>(x.p)[at]);
}

void Put(const Matrix& x, int64_t at, float v) {
  if (x.type == CUDA_R_32F) {
    static_cast<float*>(const_cast<void*>(x.p))[at] = v;
  } else {
    static_cast<__nv_bfloat16*>(const_cast<void*>(x.p))[at] = __float2bfloat16_rn(v);
  }
}

// The operand and output types cuBLAS and cuBLASLt take with CUBLAS_COMPUTE_32F here.
bool Supported(cudaDataType_t a, cudaDataType_t b, cudaDataType_t c) {
  return (a == CUDA_R_32F && b == CUDA_R_32F && c == CUDA_R_32F) ||
         (a == CUDA_R_16BF && b == CUDA_R_16BF && (c == CUDA_R_16BF || c == CUDA_R_32F));
}

// C (m, n) = alpha op(A) op(B) + beta C, column-major, for `batch` matrices (emu_blas.h).
cublasStatus_t Gemm(cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n, int64_t k,
                    float alpha, const Matrix& a, const Matrix& b, float beta, const Matrix& c,
                    int64_t batch) {
  const int64_t a_rows = ta == CUBLAS_OP_N ? m : k, b_rows = tb == CUBLAS_OP_N ? k : n;
  if (m < 0 || n < 0 || k < 0 || batch < 0 || a.ld < std::max<int64_t>(1, a_rows) ||
      b.ld < std::max<int64_t>(1, b_rows) || c.ld < std::max<int64_t>(1, m)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (!Supported(a.type, b.type, c.type)) return CUBLAS_STATUS_NOT_SUPPORTED;
  std::vector<float> rows(static_cast<size_t>(m * k)), cols(static_cast<size_t>(n * k));
  for (int64_t i = 0; i < batch; ++i) {
    const int64_t ao = i * a.stride, bo = i * b.stride, co = i * c.stride;
    for (int64_t r = 0; r < m; ++r) {  // op(A) row r
      for (int64_t p = 0; p < k; ++p) {
        rows[r * k + p] = Get(a, ao + (ta == CUBLAS_OP_N ? r + p * a.ld : p + r * a.ld));
      }
    }
    for (int64_t j = 0; j < n; ++j) {  // op(B) column j
      for (int64_t p = 0; p < k; ++p) {
        cols[j * k + p] = Get(b, bo + (tb == CUBLAS_OP_N ? p + j * b.ld : j + p * b.ld));
      }
    }
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t r = 0; r < m; ++r) {
        float sum = 0.0f;
        for (int64_t p = 0; p < k; ++p) sum += rows[r * k + p] * cols[j * k + p];
        const int64_t at = co + r + j * c.ld;
        float out = alpha * sum;
        if (beta != 0.0f) out += beta * Get(c, at);  // beta 0: C is not read
        Put(c, at, out);
      }
    }
  }
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t Handle(cublasHandle_t h) {
  return h == nullptr ? CUBLAS_STATUS_NOT_INITIALIZED : CUBLAS_STATUS_SUCCESS;
}

// The (m, n, k) of a cuBLASLt matmul from its layouts, or why not.
cublasStatus_t LtShape(const cublasLtMatmulDescOpaque_t& op, const cublasLtMatrixLayoutOpaque_t& a,
                       const cublasLtMatrixLayoutOpaque_t& b, const cublasLtMatrixLayoutOpaque_t& c,
                       const cublasLtMatrixLayoutOpaque_t& d, int64_t* m, int64_t* n,
                       int64_t* k) {
  *m = static_cast<int64_t>(c.rows);
  *n = static_cast<int64_t>(c.cols);
  *k = static_cast<int64_t>(op.trans_a == CUBLAS_OP_N ? a.cols : a.rows);
  const uint64_t a_m = op.trans_a == CUBLAS_OP_N ? a.rows : a.cols;
  const uint64_t b_k = op.trans_b == CUBLAS_OP_N ? b.rows : b.cols;
  const uint64_t b_n = op.trans_b == CUBLAS_OP_N ? b.cols : b.rows;
  if (a_m != c.rows || b_k != static_cast<uint64_t>(*k) || b_n != c.cols || d.rows != c.rows ||
      d.cols != c.cols || d.type != c.type) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  for (const auto* l : {&a, &b, &c, &d}) {
    if (l->ld < std::max<int64_t>(1, static_cast<int64_t>(l->rows))) {
      return CUBLAS_STATUS_INVALID_VALUE;
    }
  }
  if (op.compute != CUBLAS_COMPUTE_32F || op.scale != CUDA_R_32F ||
      !Supported(a.type, b.type, c.type)) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  return CUBLAS_STATUS_SUCCESS;
}

uint64_t AlignmentOf(const void* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  uint64_t a = 256;
  while (a > 1 && address % a != 0) a /= 2;
  return a;
}

}  // namespace

const char* cublasGetStatusName(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

const char* cublasGetStatusString(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
  }
  return "unknown error";
}

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  *handle = new cublasContext;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->mode = mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t* mode) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  *mode = handle->mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa,
                           cublasOperation_t transb, int m, int n, int k, const float* alpha,
                           const float* a, int lda, const float* b, int ldb, const float* beta,
                           float* c, int ldc) {
  return cublasSgemmStridedBatched(handle, transa, transb, m, n, k, alpha, a, lda, 0, b, ldb, 0,
                                   beta, c, ldc, 0, 1);
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const float* alpha, const float* a, int lda,
                                         long long stride_a, const float* b, int ldb,
                                         long long stride_b, const float* beta, float* c, int ldc,
                                         long long stride_c, int batch) {
  if (Handle(handle) != CUBLAS_STATUS_SUCCESS) return CUBLAS_STATUS_NOT_INITIALIZED;
  return Gemm(transa, transb, m, n, k, *alpha, {a, CUDA_R_32F, lda, stride_a},
              {b, CUDA_R_32F, ldb, stride_b}, *beta, {c, CUDA_R_32F, ldc, stride_c}, batch);
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void* alpha,
                            const void* a, cudaDataType_t a_type, int lda, const void* b,
                            cudaDataType_t b_type, int ldb, const void* beta, void* c,
                            cudaDataType_t c_type, int ldc, cublasComputeType_t compute,
                            cublasGemmAlgo_t algo) {
  return cublasGemmStridedBatchedEx(handle, transa, transb, m, n, k, alpha, a, a_type, lda, 0, b,
                                    b_type, ldb, 0, beta, c, c_type, ldc, 0, 1, compute, algo);
}

cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
    const void* alpha, const void* a, cudaDataType_t a_type, int lda, long long stride_a,
    const void* b, cudaDataType_t b_type, int ldb, long long stride_b, const void* beta, void* c,
    cudaDataType_t c_type, int ldc, long long stride_c, int batch, cublasComputeType_t compute,
    cublasGemmAlgo_t algo) {
  if (Handle(handle) != CUBLAS_STATUS_SUCCESS) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (compute != CUBLAS_COMPUTE_32F || algo != CUBLAS_GEMM_DEFAULT) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  // CUBLAS_COMPUTE_32F: alpha and beta are floats.
  return Gemm(transa, transb, m, n, k, *static_cast<const float*>(alpha),
              {a, a_type, lda, stride_a}, {b, b_type, ldb, stride_b},
              *static_cast<const float*>(beta), {c, c_type, ldc, stride_c}, batch);
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  *handle = new cublasLtContext;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute,
                                        cudaDataType_t scale_type) {
  *desc = new cublasLtMatmulDescOpaque_t{compute, scale_type};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete desc;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                              cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t size) {
  if (size != sizeof(cublasOperation_t)) return CUBLAS_STATUS_INVALID_VALUE;
  cublasOperation_t op;
  std::memcpy(&op, buf, size);
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA: desc->trans_a = op; break;
    case CUBLASLT_MATMUL_DESC_TRANSB: desc->trans_b = op; break;
  }
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType_t type,
                                          uint64_t rows, uint64_t cols, int64_t ld) {
  *layout = new cublasLtMatrixLayoutOpaque_t{type, rows, cols, ld};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete layout;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  *pref = new cublasLtMatmulPreferenceOpaque_t;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete pref;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void* buf, size_t size) {
  if (attr == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES) {
    if (size != sizeof(uint64_t)) return CUBLAS_STATUS_INVALID_VALUE;
    std::memcpy(&pref->max_workspace, buf, size);
    return CUBLAS_STATUS_SUCCESS;
  }
  if (size != sizeof(uint32_t)) return CUBLAS_STATUS_INVALID_VALUE;
  uint32_t v;
  std::memcpy(&v, buf, size);
  switch (attr) {
    case CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK: pref->reduction_mask = v; break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES: pref->alignment[0] = v; break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES: pref->alignment[1] = v; break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES: pref->alignment[2] = v; break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: pref->alignment[3] = v; break;
    default: return CUBLAS_STATUS_INVALID_VALUE;
  }
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t op,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t* results,
                                              int* returned) {
  *returned = 0;
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (requested < 1) return CUBLAS_STATUS_INVALID_VALUE;
  int64_t m, n, k;
  const cublasStatus_t s = LtShape(*op, *a, *b, *c, *d, &m, &n, &k);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  cublasLtMatmulHeuristicResult_t r{};
  r.algo.data[0] = kAlgoMagic;
  for (int i = 0; i < 4; ++i) r.algo.data[1 + i] = pref->alignment[i];
  r.state = CUBLAS_STATUS_SUCCESS;
  r.wavesCount = 1.0f;
  results[0] = r;
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t op, const void* alpha,
                              const void* a, cublasLtMatrixLayout_t a_layout, const void* b,
                              cublasLtMatrixLayout_t b_layout, const void* beta, const void* c,
                              cublasLtMatrixLayout_t c_layout, void* d,
                              cublasLtMatrixLayout_t d_layout, const cublasLtMatmulAlgo_t* algo,
                              void* /*workspace*/, size_t /*workspace_bytes*/, cudaStream_t) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (algo == nullptr || algo->data[0] != kAlgoMagic) return CUBLAS_STATUS_INVALID_VALUE;
  int64_t m, n, k;
  const cublasStatus_t s = LtShape(*op, *a_layout, *b_layout, *c_layout, *d_layout, &m, &n, &k);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  // C and D the same memory: one layout, as cuBLASLt requires for in-place matmuls. Here the
  // product is always written in place, so a separate D starts as a copy of C.
  if (c == d && !(*c_layout == *d_layout)) return CUBLAS_STATUS_INVALID_VALUE;
  CUDA_EMU_CHECK(c == d, "cublasLtMatmul with D apart from C is not emulated");
  const void* pointers[4] = {a, b, c, d};
  for (int i = 0; i < 4; ++i) {
    if (AlignmentOf(pointers[i]) < algo->data[1 + i]) return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  return Gemm(op->trans_a, op->trans_b, m, n, k, *static_cast<const float*>(alpha),
              {a, a_layout->type, a_layout->ld, 0}, {b, b_layout->type, b_layout->ld, 0},
              *static_cast<const float*>(beta), {d, d_layout->type, d_layout->ld, 0}, 1);
}
