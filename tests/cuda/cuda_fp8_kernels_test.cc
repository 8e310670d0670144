// CudaFp8Kernels (kernels().fp8()) against CpuFp8Kernels on the same inputs. Each test skips
// when no GPU is visible; all run in the CPU emulator (cuda_emu.CudaFp8KernelsTest.*).
//   Quantize, Transpose, Amax: exact. The codes follow backend/fp8.h's rounding, so every code
//     must equal the host's, byte for byte: zeros of both signs, NaN, infinities and values
//     past the largest finite (saturated), subnormals, every tie between neighbouring codes of
//     both formats (to the even code), and random values over 16 binades.
//   Gemm: fp32 out 1e-5 (1 + |cpu|): the products of decoded codes are exact in fp32 (4 + 4
//     significant bits at most), and the sums of k = 96 terms differ only in order (96 x 2^-24
//     relative to the sum of magnitudes, ~6e-6 of it, well inside); bf16 out 1e-2 (1 + |cpu|),
//     cuda_bf16_kernels_test.cc's kBf16 (one rounding of nearly equal fp32 values).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "runtime/backend/fp8.h"
#include "runtime/cpu/cpu_fp8_kernels.h"
#include "tests/cuda/cuda_kernels_test_util.h"

namespace shardsim::runtime {
namespace {

using cuda_test::CudaKernelsTest;
using cuda_test::ExpectClose;
using cuda_test::Random;
using cuda_test::RoundToBf16;
using cuda_test::Widen;

using CudaFp8KernelsTest = CudaKernelsTest;

// The inputs every quantization test uses, as bf16 (each value is one: bf16 has 8 significant
// bits, an fp8 tie needs at most 5).
std::vector<Bf16> Fp8Inputs(Fp8Format f) {
  std::vector<float> x = {0.0f, -0.0f, std::numeric_limits<float>::quiet_NaN(), INFINITY, -INFINITY,
                          1e30f, -1e30f, Fp8Max(f), 1.02f * Fp8Max(f), 1.2f * Fp8Max(f)};
  const int max_code = f == Fp8Format::kE4M3 ? 0x7E : 0x7B;
  for (int c = 0; c <= max_code; ++c) {
    const float v = FromFp8(static_cast<uint8_t>(c), f);
    x.push_back(v);
    x.push_back(-v);
    if (c < max_code) {
      const float tie = 0.5f * (v + FromFp8(static_cast<uint8_t>(c + 1), f));
      x.push_back(tie);
      x.push_back(-tie);
    }
  }
  for (int e = -12; e < 4; ++e) {  // random values over 16 binades
    for (float r : Random(24, 100 + static_cast<uint64_t>(e + 12), -1.0f, 1.0f)) x.push_back(std::ldexp(r, e));
  }
  while (x.size() % 7 != 0) x.push_back(0.25f);  // a 7-column matrix for the transpose
  return RoundToBf16(x);
}

TEST_F(CudaFp8KernelsTest, QuantizeMatchesTheHostCodesBitForBit) {
  CpuFp8Kernels cpu;
  for (const Fp8Format f : {Fp8Format::kE4M3, Fp8Format::kE5M2}) {
    for (const float scale : {1.0f, 3.0f, 0.0078125f}) {
      const std::vector<Bf16> x = Fp8Inputs(f);
      const int64_t cols = 7, rows = static_cast<int64_t>(x.size()) / cols;
      std::vector<uint8_t> want(x.size()), want_t(x.size());
      cpu.Quantize(x.data(), rows, cols, f, scale, want.data(), want_t.data());
      uint8_t* codes = Up(std::vector<uint8_t>(x.size(), 0xAA));
      uint8_t* transposed = Up(std::vector<uint8_t>(x.size(), 0xAA));
      gpu().fp8()->Quantize(Up(x), rows, cols, f, scale, codes, transposed);
      const std::vector<uint8_t> got = DownOf(codes, static_cast<int64_t>(x.size()));
      const std::vector<uint8_t> got_t = DownOf(transposed, static_cast<int64_t>(x.size()));
      for (size_t i = 0; i < x.size(); ++i) {
        EXPECT_EQ(static_cast<int>(got[i]), static_cast<int>(want[i]))
            << (f == Fp8Format::kE4M3 ? "E4M3" : "E5M2") << " scale " << scale << ": x = " << ToFloat(x[i]);
        EXPECT_EQ(got_t[i], want_t[i]) << "transposed " << i;
      }
      // Transpose of the codes: the cast-transpose's second output again.
      uint8_t* back = Up(std::vector<uint8_t>(x.size(), 0));
      gpu().fp8()->Transpose(codes, rows, cols, back);
      EXPECT_EQ(DownOf(back, static_cast<int64_t>(x.size())), want_t);
    }
  }
}

TEST_F(CudaFp8KernelsTest, AmaxIsTheLargestMagnitude) {
  CpuFp8Kernels cpu;
  std::vector<float> v = Random(5000, 3, -2.0f, 2.0f);
  v[4321] = -7.5f;  // the largest magnitude, negative
  const std::vector<Bf16> x = RoundToBf16(v);
  EXPECT_EQ(gpu().fp8()->Amax(Up(x), 5000), cpu.Amax(x.data(), 5000));
  EXPECT_EQ(gpu().fp8()->Amax(Up(x), 0), 0.0f);
}

// Two terms (a fused module's GEMM over two projections), n = 5, m = 6, k = 96 and 64, codes
// from random values quantized with their current-scaling factors.
TEST_F(CudaFp8KernelsTest, GemmSumsScaledProductsOfCodes) {
  CpuFp8Kernels cpu;
  const int64_t n = 5, m = 6;
  struct Operands {
    std::vector<uint8_t> a, b;
    int64_t k;
    float sa, sb;
  };
  std::vector<Operands> ops;
  for (const int64_t k : {96, 64}) {
    Operands o{std::vector<uint8_t>(static_cast<size_t>(n * k)), std::vector<uint8_t>(static_cast<size_t>(m * k)), k, 0, 0};
    const std::vector<Bf16> a = RoundToBf16(Random(n * k, 10 + static_cast<uint64_t>(k), -3.0f, 3.0f));
    const std::vector<Bf16> b = RoundToBf16(Random(m * k, 20 + static_cast<uint64_t>(k), -0.5f, 0.5f));
    o.sa = Fp8Scale(cpu.Amax(a.data(), n * k), Fp8Format::kE4M3);
    o.sb = Fp8Scale(cpu.Amax(b.data(), m * k), Fp8Format::kE5M2);
    cpu.Quantize(a.data(), n, k, Fp8Format::kE4M3, o.sa, o.a.data(), nullptr);
    cpu.Quantize(b.data(), m, k, Fp8Format::kE5M2, o.sb, o.b.data(), nullptr);
    ops.push_back(o);
  }
  auto terms = [&](bool device) {
    std::vector<Fp8Kernels::Product> t;
    for (const Operands& o : ops) {
      t.push_back({{device ? Up(o.a) : o.a.data(), 1.0f / o.sa, Fp8Format::kE4M3},
                   {device ? Up(o.b) : o.b.data(), 1.0f / o.sb, Fp8Format::kE5M2}, o.k});
    }
    return t;
  };
  // fp32: added into what is there.
  const std::vector<float> start = Random(n * m, 30);
  std::vector<float> want = start;
  cpu.Gemm(terms(false), n, m, nullptr, false, want.data(), nullptr);
  float* out = Up(start);
  gpu().fp8()->Gemm(terms(true), n, m, nullptr, false, out, nullptr);
  ExpectClose(Down(out, n * m), want, 1e-5f, "fp32 out");
  // bf16 with a bias, accumulating onto what is there.
  const std::vector<Bf16> bias = RoundToBf16(Random(m, 31)), start16 = RoundToBf16(Random(n * m, 32));
  std::vector<Bf16> want16 = start16;
  cpu.Gemm(terms(false), n, m, want16.data(), true, nullptr, bias.data());
  Bf16* out16 = Up(start16);
  gpu().fp8()->Gemm(terms(true), n, m, out16, true, nullptr, Up(bias));
  ExpectClose(Down(out16, n * m), Widen(want16), 1e-2f, "bf16 out");
}

}  // namespace
}  // namespace shardsim::runtime
