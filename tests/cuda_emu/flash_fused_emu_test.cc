// runtime/cuda's fused bf16 FlashAttention-2 kernels (flash_fused.cu, flash_fused_backward.cu,
// rewritten by cuda_to_cc.cmake and run by the CPU emulator of this folder, no GPU) against
// CpuKernels' bf16 flash attention, on the shapes of tests/cuda/cuda_flash_fused_test.cc and a
// sequence shorter than one tile. Besides the values, the emulator checks every tensor-core tile
// access (alignment, leading dimension, inside the block's shared memory), the launches (shared
// memory within the attribute and sm_90's 232,448 bytes, block and grid sizes) and each block's
// barrier counts, aborting on the first violation.
//
// Tolerances, |emulated - cpu| <= tol (1 + |cpu|), as in cuda_flash_fused_test.cc:
//   lse      1e-3  fp32 on both sides from the same bf16 inputs; the emulated S sums exact bf16
//                  products in double, rounded to fp32 per 16-step tile, and its running max and
//                  sum come from the online softmax: rounding differences of order 1e-6;
//   out, dq, dk, dv 1e-2: one bf16 rounding of each output on both sides (2^-8 relative at
//                  most, one step if the fp32 values straddle a rounding boundary), plus the
//                  kernels' bf16 rounding of P (out = P V, dv = P^T dO) and of dS (dq, dk),
//                  2^-9 relative per term: at most 2^-9 sum |P||V| <= 2e-3 for out (sum P = 1,
//                  |V| <= 1), a random-signed sum for the gradients. The review that first ran
//                  these kernels emulated saw at most 4.3e-3 against a double reference.
//   delta    (the workspace's first B*H*T floats, dO_i . O_i summed in fp32 by one warp): the
//                  fp32 sum of d products is within d 2^-24 sum |dO O| of the exact one.
// Every buffer has 256 guard bytes on each side, which must come back unchanged, inputs
// included; and a second run with the blocks in reverse order must give bitwise the same
// outputs (each output element is owned by one block and summed in a fixed order).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "runtime/backend/bf16.h"
#include "runtime/cpu/cpu_kernels.h"
#include "runtime/cuda/flash_fused.h"
#include "tests/cuda_emu/emu_launch.h"

namespace shardsim::runtime {
namespace {

constexpr float kLse = 1e-3f;
constexpr float kBf16 = 1e-2f;
constexpr size_t kGuardBytes = 256;  // keeps the body 256-byte aligned, as cudaMalloc's
constexpr unsigned char kGuardByte = 0xa5;

// n elements of T between two guards of kGuardBytes, the first element 256-byte aligned plus
// `shift` elements (device memory as the kernels get it; shift 1 = 2 bytes off for bf16).
template <typename T>
class Guarded {
 public:
  explicit Guarded(const std::vector<T>& body, int shift = 0)
      : n_(body.size()), shift_bytes_(shift * sizeof(T)),
        raw_(2 * kGuardBytes + shift_bytes_ + n_ * sizeof(T) + 256, kGuardByte) {
    std::memcpy(data(), body.data(), n_ * sizeof(T));
  }
  T* data() { return reinterpret_cast<T*>(Start() + kGuardBytes + shift_bytes_); }
  std::vector<T> Body() {
    std::vector<T> b(n_);
    std::memcpy(b.data(), data(), n_ * sizeof(T));
    return b;
  }
  // The bytes from the front guard through the back guard.
  std::vector<unsigned char> Bytes() {
    return {Start(), Start() + 2 * kGuardBytes + shift_bytes_ + n_ * sizeof(T)};
  }
  bool GuardsIntact() {
    const unsigned char* s = Start();
    const unsigned char* back = s + kGuardBytes + shift_bytes_ + n_ * sizeof(T);
    for (size_t i = 0; i < kGuardBytes; ++i) {
      if (s[i] != kGuardByte || back[i] != kGuardByte) return false;
    }
    return true;
  }

 private:
  unsigned char* Start() {
    const auto p = reinterpret_cast<uintptr_t>(raw_.data());
    return raw_.data() + ((256 - p % 256) % 256);
  }
  size_t n_, shift_bytes_;
  std::vector<unsigned char> raw_;
};

std::vector<Bf16> RandomBf16(int64_t n, uint64_t seed, float lo, float hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<Bf16> v(static_cast<size_t>(n));
  for (Bf16& x : v) x = ToBf16(u(rng));
  return v;
}

__nv_bfloat16* Dev(Bf16* p) { return reinterpret_cast<__nv_bfloat16*>(p); }

// |got - want| <= tol (1 + |want|) everywhere; returns the largest |got - want| / (1 + |want|).
template <typename T>
double ExpectClose(const std::vector<T>& got, const std::vector<T>& want, float tol,
                   const std::string& what) {
  auto f = [](T x) {
    if constexpr (std::is_same_v<T, Bf16>) return ToFloat(x); else return x;
  };
  EXPECT_EQ(got.size(), want.size()) << what;
  double worst = 0;
  int reported = 0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    const double err = std::fabs(f(got[i]) - f(want[i])) / (1.0 + std::fabs(f(want[i])));
    if (!(err <= tol) && reported++ < 5) {
      ADD_FAILURE() << what << "[" << i << "]: emulated " << f(got[i]) << ", cpu " << f(want[i]);
    }
    if (!(err <= worst)) worst = err;  // NaN sticks
  }
  return worst;
}

void Check(const AttentionDims& dims, uint64_t seed, bool misaligned = false) {
  const std::string name = "B " + std::to_string(dims.batch) + " T " + std::to_string(dims.seq) +
                           " H " + std::to_string(dims.heads) + " KV " +
                           std::to_string(dims.kv_heads) + " d " + std::to_string(dims.head_dim);
  SCOPED_TRACE(name);
  ASSERT_TRUE(flash_fused::Supported(dims));
  ASSERT_TRUE(flash_fused::FitsDevice(dims));  // the emulated device is an H100/H200
  const int64_t nq = dims.batch * dims.seq * dims.heads * dims.head_dim;
  const int64_t nk = dims.batch * dims.seq * dims.kv_heads * dims.head_dim;
  const int64_t nl = dims.batch * dims.heads * dims.seq;
  const auto q = RandomBf16(nq, seed, -2, 2), k = RandomBf16(nk, seed + 1, -2, 2);
  const auto v = RandomBf16(nk, seed + 2, -1, 1), dout = RandomBf16(nq, seed + 3, -1, 1);
  const auto dq0 = RandomBf16(nq, seed + 4, -1, 1), dk0 = RandomBf16(nk, seed + 5, -1, 1);
  const auto dv0 = RandomBf16(nk, seed + 6, -1, 1);
  const int shift = misaligned ? 1 : 0;
  Guarded<Bf16> q_d(q, shift), k_d(k, shift), v_d(v, shift), dout_d(dout, shift);
  ASSERT_EQ(reinterpret_cast<uintptr_t>(q_d.data()) % 16, misaligned ? 2u : 0u);
  const int64_t launches = cuda_emu::Launches();

  CpuKernels cpu;
  std::vector<float> lse(nl);
  std::vector<Bf16> out(nq);
  cpu.bf16().FlashAttentionForward(q.data(), k.data(), v.data(), lse.data(), out.data(), dims);
  auto forward = [&](cuda_emu::BlockOrder order, Guarded<float>& lse_d, Guarded<Bf16>& out_d) {
    cuda_emu::SetBlockOrder(order);
    flash_fused::Forward(nullptr, Dev(q_d.data()), Dev(k_d.data()), Dev(v_d.data()), lse_d.data(),
                         Dev(out_d.data()), dims);
  };
  Guarded<float> lse_d{std::vector<float>(nl)}, lse2_d{std::vector<float>(nl)};
  Guarded<Bf16> out_d{std::vector<Bf16>(nq)}, out2_d{std::vector<Bf16>(nq)};
  forward(cuda_emu::BlockOrder::kForward, lse_d, out_d);
  forward(cuda_emu::BlockOrder::kReverse, lse2_d, out2_d);
  const double lse_err = ExpectClose(lse_d.Body(), lse, kLse, "lse");
  const double out_err = ExpectClose(out_d.Body(), out, kBf16, "out");
  EXPECT_TRUE(lse_d.GuardsIntact() && out_d.GuardsIntact()) << "forward wrote outside its outputs";
  EXPECT_EQ(lse2_d.Bytes(), lse_d.Bytes()) << "lse depends on the block order";
  EXPECT_EQ(out2_d.Bytes(), out_d.Bytes()) << "out depends on the block order";

  // The backward from the CPU's out and lse, so its check does not depend on the forward's.
  std::vector<Bf16> dq = dq0, dk = dk0, dv = dv0;
  cpu.bf16().FlashAttentionBackward(dout.data(), q.data(), k.data(), v.data(), out.data(),
                                    lse.data(), dq.data(), dk.data(), dv.data(), dims);
  Guarded<Bf16> out_cpu_d{out};
  Guarded<float> lse_cpu_d{lse};
  const size_t ws = static_cast<size_t>(flash_fused::BackwardWorkspaceBytes(dims)) / 4;
  ASSERT_GE(ws, static_cast<size_t>(nl));
  struct Grads {
    Guarded<Bf16> dq, dk, dv;
    Guarded<float> ws;
  };
  auto backward = [&](cuda_emu::BlockOrder order, Grads& g) {
    cuda_emu::SetBlockOrder(order);
    flash_fused::Backward(nullptr, Dev(dout_d.data()), Dev(q_d.data()), Dev(k_d.data()),
                          Dev(v_d.data()), Dev(out_cpu_d.data()), lse_cpu_d.data(),
                          Dev(g.dq.data()), Dev(g.dk.data()), Dev(g.dv.data()), dims, g.ws.data());
  };
  // Workspace filled with NaN: Backward must fill in what it reads.
  const std::vector<float> nan_ws(ws, std::nanf(""));
  Grads g1{Guarded<Bf16>{dq0}, Guarded<Bf16>{dk0}, Guarded<Bf16>{dv0}, Guarded<float>{nan_ws}};
  Grads g2{Guarded<Bf16>{dq0}, Guarded<Bf16>{dk0}, Guarded<Bf16>{dv0}, Guarded<float>{nan_ws}};
  backward(cuda_emu::BlockOrder::kForward, g1);
  backward(cuda_emu::BlockOrder::kReverse, g2);
  cuda_emu::SetBlockOrder(cuda_emu::BlockOrder::kForward);
  const double dq_err = ExpectClose(g1.dq.Body(), dq, kBf16, "dq");
  const double dk_err = ExpectClose(g1.dk.Body(), dk, kBf16, "dk");
  const double dv_err = ExpectClose(g1.dv.Body(), dv, kBf16, "dv");
  EXPECT_TRUE(g1.dq.GuardsIntact() && g1.dk.GuardsIntact() && g1.dv.GuardsIntact() &&
              g1.ws.GuardsIntact())
      << "backward wrote outside its outputs";
  EXPECT_EQ(g2.dq.Bytes(), g1.dq.Bytes()) << "dq depends on the block order";
  EXPECT_EQ(g2.dk.Bytes(), g1.dk.Bytes()) << "dk depends on the block order";
  EXPECT_EQ(g2.dv.Bytes(), g1.dv.Bytes()) << "dv depends on the block order";

  // delta (B, H, T), the workspace's first B*H*T floats: every one written, dO_i . O_i.
  const std::vector<float> ws1 = g1.ws.Body();
  const int64_t d = dims.head_dim, heads = dims.heads, t = dims.seq;
  int bad_delta = 0;
  for (int64_t row = 0; row < dims.batch * t * heads; ++row) {  // (token, head) rows
    double exact = 0, magnitude = 0;
    for (int64_t x = 0; x < d; ++x) {
      const double p = double{ToFloat(dout[row * d + x])} * ToFloat(out[row * d + x]);
      exact += p;
      magnitude += std::fabs(p);
    }
    const int64_t token = row / heads, h = row % heads;
    const float got = ws1[((token / t) * heads + h) * t + token % t];
    if (!(std::fabs(got - exact) <= d * 0x1p-24 * magnitude + 1e-30) && bad_delta++ < 5) {
      ADD_FAILURE() << "delta of row " << row << ": " << got << ", exact " << exact;
    }
  }
  EXPECT_GE(cuda_emu::Launches() - launches, 2 + 2 * 3) << "kernels not launched";
  std::printf("[ emulated ] %s%s: worst |emu - cpu| / (1 + |cpu|): lse %.1e out %.1e dq %.1e "
              "dk %.1e dv %.1e\n", name.c_str(), misaligned ? " (misaligned)" : "", lse_err,
              out_err, dq_err, dk_err, dv_err);
}

// T = 100: a full and a partial (36-row) query tile, two key tiles; groups of 4 query heads.
TEST(FlashFusedEmuTest, PartialTilesGqa4) {
  Check({.batch = 2, .seq = 100, .heads = 8, .kv_heads = 2, .head_dim = 64}, 100);
}

// T = 130: three tiles, the last of 2 rows; no grouping; the largest head (d = 128), whose
// backward kernels need 146,688 and 147,968 bytes of shared memory.
TEST(FlashFusedEmuTest, HeadDim128) {
  Check({.batch = 1, .seq = 130, .heads = 4, .kv_heads = 4, .head_dim = 128}, 200);
}

// T = 64: exactly one tile; the smallest head (d = 16, one tensor-core step); one KV head.
TEST(FlashFusedEmuTest, OneTileHeadDim16) {
  Check({.batch = 1, .seq = 64, .heads = 2, .kv_heads = 1, .head_dim = 16}, 300);
}

// The inputs 2 bytes off their 16-byte alignment: the scalar load path, same results.
TEST(FlashFusedEmuTest, MisalignedInputs) {
  Check({.batch = 1, .seq = 70, .heads = 4, .kv_heads = 2, .head_dim = 32}, 400,
        /*misaligned=*/true);
}

// T = 9: one partial tile of 9 rows (55 padding rows that must stay masked), two batches.
TEST(FlashFusedEmuTest, ShorterThanATile) {
  Check({.batch = 2, .seq = 9, .heads = 8, .kv_heads = 2, .head_dim = 16}, 500);
}

}  // namespace
}  // namespace shardsim::runtime
