// cuda_gemm::Gemm (cuda_gemm.h) on both paths, cuBLASLt and cuBLAS, against a double-precision
// host product: every transpose combination, padded leading dimensions, beta 0 and 1, and
// operands at odd offsets (alignment down to one element), for fp32 and bf16 (bf16 or fp32 C).
// Skips without a GPU, as the other CUDA kernel tests.
#include <gtest/gtest.h>

#include <cublas_v2.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "runtime/cuda/cuda_gemm.h"
#include "tests/cuda/cuda_kernels_test_util.h"

namespace shardsim::runtime::cuda_test {
namespace {

using cuda_gemm::Gemm;

// One row-major GEMM case: C (m, n) = alpha op(A) op(B) + beta C, each matrix stored with
// `pad` extra columns (ld = width + pad) and starting `offset` elements into its buffer.
struct Case {
  int64_t m, n, k;
  bool ta, tb;
  int64_t pad, offset;
  float beta;
  std::string Name() const {
    return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) +
           (ta ? " At" : " A") + (tb ? " Bt" : " B") + " pad " + std::to_string(pad) +
           " offset " + std::to_string(offset) + " beta " + std::to_string(beta);
  }
};

std::vector<Case> Cases() {
  std::vector<Case> cases;
  for (int t = 0; t < 4; ++t) {
    const bool ta = (t & 1) != 0, tb = (t & 2) != 0;
    cases.push_back({64, 48, 96, ta, tb, 0, 0, 0.0f});  // aligned, as whole allocations are
    cases.push_back({37, 29, 53, ta, tb, 3, 1, 1.0f});  // odd sizes, padding, misaligned, += C
  }
  return cases;
}

// Stored (rows, cols) of an operand that enters the product as (r, c), transposed or not.
int64_t StoredRows(int64_t r, int64_t c, bool trans) { return trans ? c : r; }
int64_t StoredCols(int64_t r, int64_t c, bool trans) { return trans ? r : c; }

// The expected C in double from the (already rounded) inputs as floats.
std::vector<float> Reference(const Case& x, const std::vector<float>& a, int64_t lda,
                             const std::vector<float>& b, int64_t ldb, const std::vector<float>& c,
                             int64_t ldc, float alpha) {
  std::vector<float> out = c;
  for (int64_t i = 0; i < x.m; ++i) {
    for (int64_t j = 0; j < x.n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < x.k; ++p) {
        const double av = x.ta ? a[x.offset + p * lda + i] : a[x.offset + i * lda + p];
        const double bv = x.tb ? b[x.offset + j * ldb + p] : b[x.offset + p * ldb + j];
        s += av * bv;
      }
      float& o = out[x.offset + i * ldc + j];
      o = static_cast<float>(alpha * s + x.beta * static_cast<double>(o));
    }
  }
  return out;
}

class CudaGemmTest : public CudaKernelsTest {
 protected:
  // Runs every case through `gemm` with operands of type TA and C of type TC, comparing C (its
  // m x n window) with Reference at `tol` (ExpectClose). Returns the number of cases run with
  // 256-byte-aligned operands.
  template <typename TA, typename TC>
  int RunCases(Gemm& gemm, float tol, const std::string& what) {
    int aligned = 0;
    uint64_t seed = 7;
    for (const Case& x : Cases()) {
      const int64_t ar = StoredRows(x.m, x.k, x.ta), ac = StoredCols(x.m, x.k, x.ta);
      const int64_t br = StoredRows(x.k, x.n, x.tb), bc = StoredCols(x.k, x.n, x.tb);
      const int64_t lda = ac + x.pad, ldb = bc + x.pad, ldc = x.n + x.pad;
      std::vector<float> a = Random(x.offset + ar * lda, seed++);
      std::vector<float> b = Random(x.offset + br * ldb, seed++);
      std::vector<float> c = Random(x.offset + x.m * ldc, seed++);
      const float alpha = 0.5f;
      auto as_type = [](std::vector<float>& v) {  // rounded in place when T is bf16
        if constexpr (std::is_same_v<TA, Bf16>) v = Widen(RoundToBf16(v));
      };
      as_type(a);
      as_type(b);
      if constexpr (std::is_same_v<TC, Bf16>) c = Widen(RoundToBf16(c));
      const std::vector<float> want = Reference(x, a, lda, b, ldb, c, ldc, alpha);
      const TA* da = Stored<TA>(a);
      const TA* db = Stored<TA>(b);
      TC* dc = const_cast<TC*>(Stored<TC>(c));
      gemm.Run(x.m, x.n, x.k, alpha, cuda_gemm::In(da + x.offset, lda, x.ta),
               cuda_gemm::In(db + x.offset, ldb, x.tb), x.beta, cuda_gemm::Out(dc + x.offset, ldc));
      std::vector<float> got = Down(dc, static_cast<int64_t>(c.size()));
      std::vector<float> got_window, want_window;
      for (int64_t i = 0; i < x.m; ++i) {
        for (int64_t j = 0; j < x.n; ++j) {
          got_window.push_back(got[x.offset + i * ldc + j]);
          want_window.push_back(want[x.offset + i * ldc + j]);
        }
      }
      ExpectClose(got_window, want_window, tol, what + " " + x.Name());
      if (x.offset == 0 && x.pad == 0) ++aligned;
    }
    return aligned;
  }

  // A device copy of `host` as T (bf16: rounded; exact when already rounded).
  template <typename T>
  const T* Stored(const std::vector<float>& host) {
    if constexpr (std::is_same_v<T, Bf16>) {
      return Up(RoundToBf16(host));
    } else {
      return Up(host);
    }
  }

  // Every case on cuBLASLt, then on cuBLAS. The aligned cases must have run through cuBLASLt
  // itself (no fallback); the cuBLAS path never touches it.
  template <typename TA, typename TC>
  void BothPaths(float tol, const std::string& what) {
    Gemm lt(backend_->stream(), Cublas(), Gemm::Path::kLt);
    const int aligned = RunCases<TA, TC>(lt, tol, "lt " + what);
    EXPECT_GE(lt.lt_calls(), aligned);
    Gemm plain(backend_->stream(), Cublas(), Gemm::Path::kCublas);
    RunCases<TA, TC>(plain, tol, "cublas " + what);
    EXPECT_EQ(plain.lt_calls(), 0);
    EXPECT_EQ(plain.cublas_calls(), static_cast<int64_t>(Cases().size()));
  }

  cublasHandle_t Cublas() {
    if (cublas_ == nullptr) {
      CHECK(cublasCreate(&cublas_) == CUBLAS_STATUS_SUCCESS);
      CHECK(cublasSetStream(cublas_, backend_->stream()) == CUBLAS_STATUS_SUCCESS);
      CHECK(cublasSetMathMode(cublas_, CUBLAS_PEDANTIC_MATH) == CUBLAS_STATUS_SUCCESS);
    }
    return cublas_;
  }
  void TearDown() override {
    if (cublas_ != nullptr) {
      (void)cudaStreamSynchronize(backend_->stream());
      (void)cublasDestroy(cublas_);
    }
  }

  cublasHandle_t cublas_ = nullptr;
};

// Tolerances |got - want| <= tol (1 + |want|), k <= 96 products of values in [-1, 1):
//   fp32: the fp32 bound 1e-4 (fp32 accumulation of <= 96 terms errs ~1e-6);
//   bf16 operands, fp32 C: the products of bf16 inputs are exact in fp32, so again fp32
//     accumulation: 1e-4;
//   bf16 C: one rounding to bf16, relative 2^-8 = 3.9e-3: the bf16 bound 1e-2.
TEST_F(CudaGemmTest, Fp32MatchesTheHostProductOnBothPaths) {
  BothPaths<float, float>(1e-4f, "fp32");
}
TEST_F(CudaGemmTest, Bf16MatchesTheHostProductOnBothPaths) {
  BothPaths<Bf16, Bf16>(1e-2f, "bf16");
}
TEST_F(CudaGemmTest, Bf16OperandsIntoFp32OnBothPaths) {
  BothPaths<Bf16, float>(1e-4f, "bf16->fp32");
}

// The same key twice gives bitwise the same C (one cached algorithm, no atomics).
TEST_F(CudaGemmTest, LtRepeatsBitwise) {
  Gemm lt(backend_->stream(), Cublas(), Gemm::Path::kLt);
  const int64_t m = 256, n = 192, k = 1024;
  const Bf16* a = Up(RoundToBf16(Random(m * k, 1)));
  const Bf16* b = Up(RoundToBf16(Random(k * n, 2)));
  const std::vector<float> c0 = Random(m * n, 3);
  float* c1 = Up(c0);
  float* c2 = Up(c0);
  lt.Run(m, n, k, 1.0f, cuda_gemm::In(a, k, false), cuda_gemm::In(b, n, false), 1.0f,
         cuda_gemm::Out(c1, n));
  lt.Run(m, n, k, 1.0f, cuda_gemm::In(a, k, false), cuda_gemm::In(b, n, false), 1.0f,
         cuda_gemm::Out(c2, n));
  EXPECT_EQ(Down(c1, m * n), Down(c2, m * n));
  EXPECT_EQ(lt.lt_calls(), 2);
}

}  // namespace
}  // namespace shardsim::runtime::cuda_test
