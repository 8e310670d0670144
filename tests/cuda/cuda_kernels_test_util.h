// Shared by the CudaKernels tests (cuda_kernels_test.cc: fp32; cuda_bf16_kernels_test.cc: bf16
// and the cast): random inputs, the element-wise comparison, and a fixture that makes a
// CudaBackend on GPU 0 or skips the test when no GPU is visible.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/backend/bf16.h"
#include "runtime/cpu/cpu_kernels.h"
#include "runtime/cuda/cuda_backend.h"
#include "src/util/check.h"

namespace shardsim::runtime::cuda_test {

inline std::vector<float> Random(int64_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = u(rng);
  return v;
}

inline std::vector<int32_t> Tokens(int64_t n, int32_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> u(0, vocab - 1);
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int32_t& x : v) x = u(rng);
  return v;
}

// Each element rounded to bf16 (ToBf16), and back (exact).
inline std::vector<Bf16> RoundToBf16(const std::vector<float>& x) {
  std::vector<Bf16> b(x.size());
  for (size_t i = 0; i < x.size(); ++i) b[i] = ToBf16(x[i]);
  return b;
}
inline std::vector<float> Widen(const std::vector<Bf16>& b) {
  std::vector<float> x(b.size());
  for (size_t i = 0; i < b.size(); ++i) x[i] = ToFloat(b[i]);
  return x;
}

// |gpu - cpu| <= tol * (1 + |cpu|) element by element: relative for large values, absolute near
// zero. Reports the first five failures.
inline void ExpectClose(const std::vector<float>& gpu, const std::vector<float>& cpu, float tol,
                        const std::string& what) {
  ASSERT_EQ(gpu.size(), cpu.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    const float bound = tol * (1.0f + std::fabs(cpu[i]));
    if (!(std::fabs(gpu[i] - cpu[i]) <= bound) && reported++ < 5) {
      ADD_FAILURE() << what << "[" << i << "]: gpu " << gpu[i] << ", cpu " << cpu[i]
                    << ", tolerance " << bound;
    }
  }
}

// The attention tests' case (fp32 and bf16, unfused and flash): B = 2, T = 9, H = 8, d = 8 with
// `kv_heads` KV heads, and random inputs (q, k in [-2, 2), v, dout in [-1, 1)) with the start
// values of the accumulated dq, dk, dv; the bf16 tests round them (RoundToBf16).
struct AttentionCase {
  explicit AttentionCase(int64_t kv_heads)
      : dims{.batch = 2, .seq = 9, .heads = 8, .kv_heads = kv_heads, .head_dim = 8},
        nq(dims.batch * dims.seq * dims.heads * dims.head_dim),
        nk(dims.batch * dims.seq * kv_heads * dims.head_dim),
        q(Random(nq, 40, -2, 2)),
        k(Random(nk, 41, -2, 2)),
        v(Random(nk, 42)),
        dout(Random(nq, 43)),
        dq(Random(nq, 44)),
        dk(Random(nk, 45)),
        dv(Random(nk, 46)) {}
  std::string Name() const { return "kv_heads " + std::to_string(dims.kv_heads) + " "; }

  AttentionDims dims;
  int64_t nq, nk;  // elements of q, out, dout (B*T, H*d) and of k, v (B*T, KV*d)
  std::vector<float> q, k, v, dout, dq, dk, dv;
};

// lse (B, H, T) of causal GQA attention on q (B*T, H*d), k (B*T, KV*d): log sum_{j <= i}
// exp(q_i . k_j / sqrt(d)) for query head h over KV head h / (H / KV), in double (max + log of
// the shifted sum): an independent reference for FlashAttentionForward's lse.
inline std::vector<float> CausalLogSumExp(const std::vector<float>& q, const std::vector<float>& k,
                                          const AttentionDims& s) {
  const int64_t t = s.seq, d = s.head_dim, group = s.heads / s.kv_heads;
  std::vector<float> lse(static_cast<size_t>(s.batch * s.heads * t));
  std::vector<double> row(static_cast<size_t>(t));
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      for (int64_t i = 0; i < t; ++i) {
        double max = -INFINITY;
        for (int64_t j = 0; j <= i; ++j) {
          double dot = 0;
          for (int64_t c = 0; c < d; ++c) {
            dot += static_cast<double>(q[((b * t + i) * s.heads + h) * d + c]) *
                   k[((b * t + j) * s.kv_heads + h / group) * d + c];
          }
          row[j] = dot / std::sqrt(static_cast<double>(d));
          max = std::max(max, row[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j <= i; ++j) sum += std::exp(row[j] - max);
        lse[(b * s.heads + h) * t + i] = static_cast<float>(max + std::log(sum));
      }
    }
  }
  return lse;
}

class CudaKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaBackend::CudaDeviceCount() == 0) {
      GTEST_SKIP() << "no CUDA device: CudaKernels are compared with CpuKernels only on a GPU";
    }
    auto backend = CudaBackend::Create(0);
    ASSERT_TRUE(backend.ok()) << backend.status().message();
    backend_ = std::move(backend).value();
  }

  Kernels& gpu() { return backend_->kernels(); }

  // A device copy of `host`, freed with the test.
  template <typename T>
  T* Up(const std::vector<T>& host) {
    auto b = backend_->memory().Allocate(MemoryKind::kOther,
                                         static_cast<int64_t>(host.size() * sizeof(T)), "test");
    CHECK(b.ok()) << b.status().message();
    buffers_.push_back(std::move(b).value());
    backend_->memory().CopyToDevice(buffers_.back().data(), host.data(),
                                    static_cast<int64_t>(host.size() * sizeof(T)));
    return static_cast<T*>(buffers_.back().data());
  }
  template <typename T>
  std::vector<T> DownOf(const T* device, int64_t n) {
    std::vector<T> host(static_cast<size_t>(n));
    backend_->memory().CopyToHost(host.data(), device, n * static_cast<int64_t>(sizeof(T)));
    return host;
  }
  std::vector<float> Down(const float* device, int64_t n) { return DownOf(device, n); }
  // A bf16 device buffer, widened.
  std::vector<float> Down(const Bf16* device, int64_t n) { return Widen(DownOf(device, n)); }

  CpuKernels cpu_;
  std::unique_ptr<CudaBackend> backend_;
  std::vector<DeviceBuffer> buffers_;  // destroyed before backend_
};

}  // namespace shardsim::runtime::cuda_test
