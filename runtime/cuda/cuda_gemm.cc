// See cuda_gemm.h.
#include "runtime/cuda/cuda_gemm.h"

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
