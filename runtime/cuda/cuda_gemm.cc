// See cuda_gemm.h.
#include "runtime/cuda/cuda_gemm.h"

#include <cstdlib>
#include <cstring>

#include "runtime/cuda/cuda_check.h"
#include "src/util/check.h"

namespace shardsim::runtime::cuda_gemm {
namespace {

int Int(int64_t x) {
  CHECK(x >= 0 && x <= 0x7fffffff) << x << " exceeds cuBLAS's int dimensions";
  return static_cast<int>(x);
}

// The handle's math mode set to `mode` for the scope's duration, then restored.
class MathModeScope {
 public:
  MathModeScope(cublasHandle_t h, cublasMath_t mode) : h_(h) {
    SHARDSIM_CUBLAS_CHECK(cublasGetMathMode(h_, &saved_));
    if (saved_ != mode) SHARDSIM_CUBLAS_CHECK(cublasSetMathMode(h_, mode));
  }
  MathModeScope(const MathModeScope&) = delete;
  MathModeScope& operator=(const MathModeScope&) = delete;
  ~MathModeScope() { (void)cublasSetMathMode(h_, saved_); }

 private:
  cublasHandle_t h_;
  cublasMath_t saved_ = CUBLAS_DEFAULT_MATH;
};

// The largest power of two up to 256 that divides the address: what cuBLASLt's
// CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES describe (views into packed buffers, e.g. one
// layer's weights inside a ZeRO bucket, need not be 256-byte aligned as allocations are).
int64_t AlignmentBytes(const void* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  int64_t a = 256;
  while (a > 1 && address % static_cast<uintptr_t>(a) != 0) a /= 2;
  return a;
}

// A column-major layout for the matrix cuBLASLt sees: `rows` x `cols`, leading dimension `ld`.
cublasLtMatrixLayout_t Layout(cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld) {
  cublasLtMatrixLayout_t layout = nullptr;
  SHARDSIM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout, type, static_cast<uint64_t>(rows),
                                                   static_cast<uint64_t>(cols), ld));
  return layout;
}

template <typename V>
void SetPreference(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr,
                   V value) {
  SHARDSIM_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value)));
}

}  // namespace

void RowMajorGemm(cublasHandle_t h, int64_t m, int64_t n, int64_t k, float alpha, const Operand& a,
                  const Operand& b, float beta, const Output& c, int64_t batch) {
  const cublasOperation_t op_a = a.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = b.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (a.type == CUDA_R_32F && b.type == CUDA_R_32F && c.type == CUDA_R_32F) {
    const auto* pa = static_cast<const float*>(a.p);
    const auto* pb = static_cast<const float*>(b.p);
    auto* pc = static_cast<float*>(c.p);
    if (batch == 1) {
      SHARDSIM_CUBLAS_CHECK(cublasSgemm(h, op_b, op_a, Int(n), Int(m), Int(k), &alpha, pb,
                                        Int(b.ld), pa, Int(a.ld), &beta, pc, Int(c.ld)));
    } else {
      SHARDSIM_CUBLAS_CHECK(cublasSgemmStridedBatched(
          h, op_b, op_a, Int(n), Int(m), Int(k), &alpha, pb, Int(b.ld), b.stride, pa, Int(a.ld),
          a.stride, &beta, pc, Int(c.ld), c.stride, Int(batch)));
    }
    return;
  }
  CHECK(a.type == CUDA_R_16BF && b.type == CUDA_R_16BF &&
        (c.type == CUDA_R_16BF || c.type == CUDA_R_32F))
      << "RowMajorGemm: unsupported operand types " << a.type << ", " << b.type << " -> " << c.type;
  // Tensor ops allowed; split-K partial sums kept in fp32 (never reduced in the bf16 output
  // type), so a bf16 C is rounded once.
  const MathModeScope tensor_ops(
      h, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH |
                                   CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
  if (batch == 1) {
    SHARDSIM_CUBLAS_CHECK(cublasGemmEx(h, op_b, op_a, Int(n), Int(m), Int(k), &alpha, b.p, b.type,
                                       Int(b.ld), a.p, a.type, Int(a.ld), &beta, c.p, c.type,
                                       Int(c.ld), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  } else {
    SHARDSIM_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        h, op_b, op_a, Int(n), Int(m), Int(k), &alpha, b.p, b.type, Int(b.ld), b.stride, a.p,
        a.type, Int(a.ld), a.stride, &beta, c.p, c.type, Int(c.ld), c.stride, Int(batch),
        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
}

}  // namespace shardsim::runtime::cuda_gemm

namespace shardsim::runtime::cuda_gemm {

Gemm::Path Gemm::DefaultPath() {
  const char* env = std::getenv("SHARDSIM_CUBLASLT");
  return env != nullptr && std::strcmp(env, "0") == 0 ? Path::kCublas : Path::kLt;
}

Gemm::Gemm(cudaStream_t stream, cublasHandle_t cublas, Path path)
    : stream_(stream), cublas_(cublas), path_(path) {
  if (path_ != Path::kLt) return;
  SHARDSIM_CUBLAS_CHECK(cublasLtCreate(&lt_));
  int device = 0, major = 0;
  SHARDSIM_CUDA_CHECK(cudaGetDevice(&device));
  SHARDSIM_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  workspace_bytes_ = (major >= 9 ? 32 : 4) * (int64_t{1} << 20);  // cublasSetWorkspace's advice
  SHARDSIM_CUDA_CHECK(cudaMallocAsync(&workspace_, static_cast<size_t>(workspace_bytes_), stream_));
}

Gemm::~Gemm() {
  for (auto& [key, plan] : plans_) {
    if (plan.op != nullptr) (void)cublasLtMatmulDescDestroy(plan.op);
    for (cublasLtMatrixLayout_t l : {plan.a, plan.b, plan.c}) {
      if (l != nullptr) (void)cublasLtMatrixLayoutDestroy(l);
    }
  }
  // In stream order, after any GEMM still using the workspace (errors ignored: the process is
  // ending or the device is lost).
  if (workspace_ != nullptr) (void)cudaFreeAsync(workspace_, stream_);
  if (lt_ != nullptr) (void)cublasLtDestroy(lt_);
}

Gemm::Plan& Gemm::PlanFor(const Key& key, int64_t m, int64_t n, int64_t k, const Operand& a,
                          const Operand& b, const Output& c) {
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  Plan& plan = plans_[key];
  const bool fp32 = a.type == CUDA_R_32F && b.type == CUDA_R_32F && c.type == CUDA_R_32F;
  const bool bf16 = a.type == CUDA_R_16BF && b.type == CUDA_R_16BF &&
                    (c.type == CUDA_R_16BF || c.type == CUDA_R_32F);
  if (!fp32 && !bf16) return plan;  // RunCublas CHECK-fails with the types
  // The column-major product C^T (n, m) = op(B)^T (n, k) op(A)^T (k, m): cuBLASLt's "A" is our
  // B and its "B" our A (cuda_gemm.h). A stored operand's column-major shape is its op's
  // (rows, cols) swapped when transposed.
  const cublasOperation_t op_b = b.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = a.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  SHARDSIM_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  SHARDSIM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSA,
                                                       &op_b, sizeof(op_b)));
  SHARDSIM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSB,
                                                       &op_a, sizeof(op_a)));
  plan.a = b.trans ? Layout(b.type, k, n, b.ld) : Layout(b.type, n, k, b.ld);
  plan.b = a.trans ? Layout(a.type, m, k, a.ld) : Layout(a.type, k, m, a.ld);
  plan.c = Layout(c.type, n, m, c.ld);

  cublasLtMatmulPreference_t pref = nullptr;
  SHARDSIM_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  SetPreference(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                static_cast<uint64_t>(workspace_bytes_));
  SetPreference(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE));
  SetPreference(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, static_cast<uint32_t>(key[12]));
  SetPreference(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, static_cast<uint32_t>(key[11]));
  SetPreference(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, static_cast<uint32_t>(key[13]));
  SetPreference(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, static_cast<uint32_t>(key[13]));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      lt_, plan.op, plan.a, plan.b, plan.c, plan.c, pref, 1, &result, &found);
  (void)cublasLtMatmulPreferenceDestroy(pref);
  if (status == CUBLAS_STATUS_SUCCESS && found > 0 && result.state == CUBLAS_STATUS_SUCCESS) {
    plan.algo = result.algo;
    plan.lt = true;
  }
  return plan;
}

void Gemm::RunCublas(int64_t m, int64_t n, int64_t k, float alpha, const Operand& a,
                     const Operand& b, float beta, const Output& c, int64_t batch) {
  ++cublas_calls_;
  RowMajorGemm(cublas_, m, n, k, alpha, a, b, beta, c, batch);
}

void Gemm::Run(int64_t m, int64_t n, int64_t k, float alpha, const Operand& a, const Operand& b,
               float beta, const Output& c, int64_t batch) {
  if (path_ != Path::kLt || batch != 1 || m == 0 || n == 0 || k == 0) {
    RunCublas(m, n, k, alpha, a, b, beta, c, batch);
    return;
  }
  const Key key = {m,    n,    k,    a.type, b.type, c.type, a.trans, b.trans, a.ld, b.ld, c.ld,
                   AlignmentBytes(a.p), AlignmentBytes(b.p), AlignmentBytes(c.p)};
  Plan& plan = PlanFor(key, m, n, k, a, b, c);
  if (plan.lt) {
    // D = C in place (same layout): alpha op(B)^T op(A)^T + beta C^T, column-major.
    const cublasStatus_t s = cublasLtMatmul(lt_, plan.op, &alpha, b.p, plan.a, a.p, plan.b, &beta,
                                            c.p, plan.c, c.p, plan.c, &plan.algo, workspace_,
                                            static_cast<size_t>(workspace_bytes_), stream_);
    if (s == CUBLAS_STATUS_SUCCESS) {
      ++lt_calls_;
      return;
    }
    CHECK(s == CUBLAS_STATUS_NOT_SUPPORTED)
        << "cublasLtMatmul: " << cublasGetStatusName(s) << " (" << cublasGetStatusString(s) << ")";
    plan.lt = false;  // this key goes to cuBLAS from now on
  }
  RunCublas(m, n, k, alpha, a, b, beta, c, batch);
}

}  // namespace shardsim::runtime::cuda_gemm
