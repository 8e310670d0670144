// flash_fused (the bf16 tensor-core FlashAttention-2 kernels) against CpuKernels' bf16 flash
// attention, on shapes with partial tiles, GQA groups of 4 and 2 and 1, and d = 16, 64, 128;
// plus host-only checks of Supported and BackwardWorkspaceBytes that run without a GPU.
//
// Tolerances, |gpu - cpu| <= tol (1 + |cpu|):
//   lse      1e-3  fp32 on both sides from the same bf16 inputs; the GPU's S comes from tensor
//                  cores (exact bf16 products, fp32 sums in another order, ~1e-6 relative on
//                  |S| of a few units) and its running max and sum from the online softmax:
//                  rounding differences of order 1e-6, far inside 1e-3;
//   out, dq, dk, dv 1e-2: one bf16 rounding of the output on each side (2^-8 relative at most,
//                  and the fp32 values may straddle a rounding boundary: one step), plus the
//                  GPU's bf16 rounding of P (out = P V, dv = P^T dO) and of dS (dq, dk): 2^-9
//                  relative per term, at most 2^-9 sum |P||V| <= 2e-3 for out (sum P = 1,
//                  |V| <= 1) and a random-signed sum for the gradients, the same budget as
//                  CudaBf16KernelsTest.FlashAttention's comment (cuda_bf16_kernels_test.cc).
// Each output buffer has a guard tail past its last element, which must come back unchanged:
// no write outside the tensors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/cuda/flash_fused.h"
#include "tests/cuda/cuda_kernels_test_util.h"

namespace shardsim::runtime {
namespace {

using cuda_test::CudaKernelsTest;
using cuda_test::ExpectClose;
using cuda_test::Random;
using cuda_test::RoundToBf16;
using cuda_test::Widen;

constexpr float kLse = 1e-3f;
constexpr float kBf16 = 1e-2f;
constexpr int64_t kGuard = 64;          // elements past each output tensor
constexpr float kGuardValue = 1234.0f;  // bf16- and fp32-exact

const __nv_bfloat16* Dev(const Bf16* p) { return reinterpret_cast<const __nv_bfloat16*>(p); }
__nv_bfloat16* Dev(Bf16* p) { return reinterpret_cast<__nv_bfloat16*>(p); }

// x followed by kGuard guard values.
std::vector<float> Guarded(std::vector<float> x) {
  x.insert(x.end(), kGuard, kGuardValue);
  return x;
}

// The first n elements, and a check that the guard after them is intact.
std::vector<float> Body(const std::vector<float>& x, int64_t n, const std::string& what) {
  EXPECT_EQ(static_cast<int64_t>(x.size()), n + kGuard) << what;
  for (int64_t i = n; i < static_cast<int64_t>(x.size()); ++i) {
    EXPECT_EQ(x[i], kGuardValue) << what << ": guard element " << i - n << " overwritten";
  }
  return std::vector<float>(x.begin(), x.begin() + n);
}

TEST(FlashFusedHostTest, SupportedDims) {
  const AttentionDims ok{.batch = 2, .seq = 100, .heads = 8, .kv_heads = 2, .head_dim = 64};
  EXPECT_TRUE(flash_fused::Supported(ok));
  AttentionDims d = ok;
  for (const int64_t head_dim : {16, 32, 48, 80, 128}) {
    d.head_dim = head_dim;
    EXPECT_TRUE(flash_fused::Supported(d)) << head_dim;
  }
  for (const int64_t head_dim : {0, 8, 24, 100, 144, 256}) {  // not whole 16s, or past 128
    d.head_dim = head_dim;
    EXPECT_FALSE(flash_fused::Supported(d)) << head_dim;
  }
  d = ok;
  d.kv_heads = 3;  // 8 % 3 != 0
  EXPECT_FALSE(flash_fused::Supported(d));
  d = ok;
  d.seq = 1;  // a single row: one partial tile
  EXPECT_TRUE(flash_fused::Supported(d));
  d.seq = 0;
  EXPECT_FALSE(flash_fused::Supported(d));
  d.seq = 65535 * 64;  // the grid's y limit of 64-row tiles
  EXPECT_TRUE(flash_fused::Supported(d));
  d.seq += 1;
  EXPECT_FALSE(flash_fused::Supported(d));
}

// delta, B*H*T floats: 2 * 8 * 100 = 1600 (a multiple of 64), 6400 bytes; under GQA (8 heads
// on 2 KV heads) the dK and dV partials, 2 * (2 * 100 * 8 * 64) floats = 819,200 bytes more.
// Without GQA no partials, and delta rounded up to 64 floats: 1 * 4 * 130 = 520 -> 576 floats,
// 2304 bytes.
TEST(FlashFusedHostTest, BackwardWorkspaceBytes) {
  const AttentionDims dims{.batch = 2, .seq = 100, .heads = 8, .kv_heads = 2, .head_dim = 64};
  EXPECT_EQ(flash_fused::BackwardWorkspaceBytes(dims), 6400 + 819200);
  const AttentionDims mha{.batch = 1, .seq = 130, .heads = 4, .kv_heads = 4, .head_dim = 128};
  EXPECT_EQ(flash_fused::BackwardWorkspaceBytes(mha), 2304);
}

// Shared memory per block (flash_fused.cu's and flash_fused_backward.cu's layout comments): at
// d = 128 the forward 113,152 B and the larger backward kernel (dQ) 147,968 B, both above the
// 101,376 B that sm_86/sm_89 allow (FitsDevice then sends the call to the cuBLAS path) and
// below Hopper's 232,448 B; at d = 64 the forward 640 x 64 + 31,232 = 72,192 B.
TEST(FlashFusedHostTest, SharedBytes) {
  EXPECT_EQ(flash_fused::ForwardSharedBytes(128), 113152);
  EXPECT_EQ(flash_fused::BackwardSharedBytes(128), 147968);
  EXPECT_EQ(flash_fused::ForwardSharedBytes(64), 72192);
}

class FlashFusedTest : public CudaKernelsTest {
 protected:
  // Forward and backward on random bf16 inputs (q, k in [-2, 2); v, dout and the accumulated
  // dq, dk, dv's start values in [-1, 1)), each compared with the CPU's. The backward takes the
  // CPU's out and lse, so its check does not depend on the forward's. `misaligned`: the inputs
  // start one element (2 bytes) past an allocation, so the kernels take their scalar loads
  // instead of 16-byte ones.
  void Check(const AttentionDims& dims, uint64_t seed, bool misaligned = false) {
    const std::string name = "B " + std::to_string(dims.batch) + " T " + std::to_string(dims.seq) +
                             " H " + std::to_string(dims.heads) + " KV " +
                             std::to_string(dims.kv_heads) + " d " + std::to_string(dims.head_dim) +
                             ": ";
    ASSERT_TRUE(flash_fused::Supported(dims)) << name;
    const int64_t nq = dims.batch * dims.seq * dims.heads * dims.head_dim;
    const int64_t nk = dims.batch * dims.seq * dims.kv_heads * dims.head_dim;
    const int64_t nl = dims.batch * dims.heads * dims.seq;
    const auto q = RoundToBf16(Random(nq, seed, -2, 2)),
               k = RoundToBf16(Random(nk, seed + 1, -2, 2));
    const auto v = RoundToBf16(Random(nk, seed + 2)), dout = RoundToBf16(Random(nq, seed + 3));
    const auto dq0 = RoundToBf16(Random(nq, seed + 4)), dk0 = RoundToBf16(Random(nk, seed + 5));
    const auto dv0 = RoundToBf16(Random(nk, seed + 6));
    auto up_input = [&](const std::vector<Bf16>& x) -> const Bf16* {
      if (!misaligned) return Up(x);
      std::vector<Bf16> shifted(x.size() + 1);
      std::copy(x.begin(), x.end(), shifted.begin() + 1);
      return Up(shifted) + 1;
    };
    const Bf16 *q_d = up_input(q), *k_d = up_input(k), *v_d = up_input(v);
    const Bf16* dout_d = up_input(dout);
    cudaStream_t stream = backend_->stream();

    std::vector<float> lse(nl);
    std::vector<Bf16> out(nq);
    cpu_.bf16().FlashAttentionForward(q.data(), k.data(), v.data(), lse.data(), out.data(), dims);
    float* lse_d = Up(Guarded(std::vector<float>(nl)));
    Bf16* out_d = Up(RoundToBf16(Guarded(std::vector<float>(nq))));
    flash_fused::Forward(stream, Dev(q_d), Dev(k_d), Dev(v_d), lse_d, Dev(out_d), dims);
    ExpectClose(Body(Down(lse_d, nl + kGuard), nl, name + "lse"), lse, kLse, name + "lse");
    ExpectClose(Body(Down(out_d, nq + kGuard), nq, name + "out"), Widen(out), kBf16, name + "out");

    std::vector<Bf16> dq = dq0, dk = dk0, dv = dv0;
    cpu_.bf16().FlashAttentionBackward(dout.data(), q.data(), k.data(), v.data(), out.data(),
                                       lse.data(), dq.data(), dk.data(), dv.data(), dims);
    Bf16* dq_d = Up(RoundToBf16(Guarded(Widen(dq0))));
    Bf16* dk_d = Up(RoundToBf16(Guarded(Widen(dk0))));
    Bf16* dv_d = Up(RoundToBf16(Guarded(Widen(dv0))));
    // Workspace (delta) filled with NaN: Backward must fill it itself.
    const int64_t ws = flash_fused::BackwardWorkspaceBytes(dims) / 4;
    float* ws_d = Up(std::vector<float>(ws, std::nanf("")));
    const Bf16* out_d_cpu = Up(out);
    const float* lse_d_cpu = Up(lse);
    flash_fused::Backward(stream, Dev(dout_d), Dev(q_d), Dev(k_d), Dev(v_d), Dev(out_d_cpu),
                          lse_d_cpu, Dev(dq_d), Dev(dk_d), Dev(dv_d), dims, ws_d);
    const auto dq_gpu = Down(dq_d, nq + kGuard), dk_gpu = Down(dk_d, nk + kGuard);
    const auto dv_gpu = Down(dv_d, nk + kGuard);
    ExpectClose(Body(dq_gpu, nq, name + "dq"), Widen(dq), kBf16, name + "dq");
    ExpectClose(Body(dk_gpu, nk, name + "dk"), Widen(dk), kBf16, name + "dk");
    ExpectClose(Body(dv_gpu, nk, name + "dv"), Widen(dv), kBf16, name + "dv");

    // Run to run: every sum has a fixed order (no atomics), so a second backward from the same
    // start values is bitwise the first.
    Bf16* dq2_d = Up(RoundToBf16(Guarded(Widen(dq0))));
    Bf16* dk2_d = Up(RoundToBf16(Guarded(Widen(dk0))));
    Bf16* dv2_d = Up(RoundToBf16(Guarded(Widen(dv0))));
    flash_fused::Backward(stream, Dev(dout_d), Dev(q_d), Dev(k_d), Dev(v_d), Dev(out_d_cpu),
                          lse_d_cpu, Dev(dq2_d), Dev(dk2_d), Dev(dv2_d), dims, ws_d);
    EXPECT_EQ(Down(dq2_d, nq + kGuard), dq_gpu) << name << "dq differs between runs";
    EXPECT_EQ(Down(dk2_d, nk + kGuard), dk_gpu) << name << "dk differs between runs";
    EXPECT_EQ(Down(dv2_d, nk + kGuard), dv_gpu) << name << "dv differs between runs";
  }
};

// T = 100: a full and a partial (36-row) query tile, two key tiles; groups of 4 query heads.
TEST_F(FlashFusedTest, PartialTilesGqa4) {
  Check({.batch = 2, .seq = 100, .heads = 8, .kv_heads = 2, .head_dim = 64}, 100);
}

// T = 130: three tiles, the last of 2 rows; no grouping; the largest head (d = 128).
TEST_F(FlashFusedTest, HeadDim128) {
  Check({.batch = 1, .seq = 130, .heads = 4, .kv_heads = 4, .head_dim = 128}, 200);
}

// The inputs 2 bytes off their 16-byte alignment: the scalar load path, same results.
TEST_F(FlashFusedTest, MisalignedInputs) {
  Check({.batch = 1, .seq = 70, .heads = 4, .kv_heads = 2, .head_dim = 32}, 400, /*misaligned=*/true);
}

// T = 64: exactly one tile; the smallest head (d = 16, one tensor-core step); one KV head.
TEST_F(FlashFusedTest, OneTileHeadDim16) {
  Check({.batch = 1, .seq = 64, .heads = 2, .kv_heads = 1, .head_dim = 16}, 300);
}

}  // namespace
}  // namespace shardsim::runtime
