// fp8 in the runtime: the E4M3 / E5M2 conversions (runtime/backend/fp8.h, after Micikevicius et
// al. 2022, Table 1), the CPU's fp8 kernels, and te_gemm.h's Transformer Engine modules (one
// scale over a module's fused projections). Expected values are worked out by hand in the
// comments: a format's value is 2^(field - bias) x (1 + mantissa / 2^m), subnormals
// mantissa x 2^(1 - bias - m).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/backend/bf16.h"
#include "runtime/backend/fp8.h"
#include "runtime/backend/local_collectives.h"
#include "runtime/cpu/cpu_backend.h"
#include "runtime/exec/te_gemm.h"

namespace shardsim::runtime {
namespace {

constexpr Fp8Format kE4M3 = Fp8Format::kE4M3;
constexpr Fp8Format kE5M2 = Fp8Format::kE5M2;

TEST(Fp8Codec, OneAndItsNeighbours) {
  // 1.0: field = 0 + bias -> E4M3 7 << 3 = 0x38; E5M2 15 << 2 = 0x3C.
  EXPECT_EQ(ToFp8(1.0f, kE4M3), 0x38);
  EXPECT_EQ(ToFp8(1.0f, kE5M2), 0x3C);
  EXPECT_EQ(ToFp8(-1.0f, kE4M3), 0xB8);
  EXPECT_EQ(FromFp8(0x38, kE4M3), 1.0f);
  EXPECT_EQ(FromFp8(0x3C, kE5M2), 1.0f);
  // 0.3 = 1.2 x 2^-2: E4M3 steps of 1/8 put 1.2 between 1.125 and 1.25, nearer 1.25 (0.05
  // against 0.075): 0.3125, field 5, mantissa 2: (5 << 3) | 2 = 42.
  EXPECT_EQ(ToFp8(0.3f, kE4M3), 42);
  EXPECT_EQ(FromFp8(42, kE4M3), 0.3125f);
  // E5M2 steps of 1/4: 1.2 between 1.0 and 1.25, nearer 1.25: 0.3125 again, field 13,
  // mantissa 1: (13 << 2) | 1 = 53.
  EXPECT_EQ(ToFp8(0.3f, kE5M2), 53);
}

TEST(Fp8Codec, TiesGoToEven) {
  // 1.0625 is halfway between 1.0 (mantissa 0) and 1.125 (mantissa 1): the even one, 1.0.
  EXPECT_EQ(ToFp8(1.0625f, kE4M3), 0x38);
  // 1.1875 is halfway between 1.125 (1) and 1.25 (2): 1.25, 0x3A.
  EXPECT_EQ(ToFp8(1.1875f, kE4M3), 0x3A);
  // 336 = 1.3125 x 2^8, halfway between 320 (mantissa 2) and 352 (3): 320.
  EXPECT_EQ(FromFp8(ToFp8(336.0f, kE4M3), kE4M3), 320.0f);
}

TEST(Fp8Codec, SaturatesToTheLargestFinite) {
  // E4M3's largest finite value 448 = 1.75 x 2^8: field 15, mantissa 6: 0x7E (0x7F is NaN).
  // 470 rounds to 480 (2^8 x 1.875, the NaN pattern), so saturates; so do 500 and infinity.
  EXPECT_EQ(Fp8Max(kE4M3), 448.0f);
  EXPECT_EQ(ToFp8(448.0f, kE4M3), 0x7E);
  EXPECT_EQ(ToFp8(470.0f, kE4M3), 0x7E);
  EXPECT_EQ(ToFp8(500.0f, kE4M3), 0x7E);
  EXPECT_EQ(ToFp8(INFINITY, kE4M3), 0x7E);
  EXPECT_EQ(ToFp8(-INFINITY, kE4M3), 0xFE);
  EXPECT_TRUE(std::isnan(FromFp8(0x7F, kE4M3)));
  EXPECT_TRUE(std::isnan(FromFp8(ToFp8(NAN, kE4M3), kE4M3)));
  // E5M2's 57344 = 1.75 x 2^15: field 30, mantissa 3: 0x7B; 31 holds infinity and NaNs.
  EXPECT_EQ(Fp8Max(kE5M2), 57344.0f);
  EXPECT_EQ(ToFp8(57344.0f, kE5M2), 0x7B);
  EXPECT_EQ(ToFp8(1e6f, kE5M2), 0x7B);
  EXPECT_EQ(FromFp8(0x7C, kE5M2), INFINITY);
}

TEST(Fp8Codec, Subnormals) {
  // E4M3's subnormals are mantissa x 2^-9 (2^(1 - 7 - 3)): 0.001 = 0.512 x 2^-9 rounds to
  // 1 x 2^-9 (code 1); 0.0009 = 0.4608 x 2^-9 to 0. The smallest normal, 2^-6, is 0x08.
  EXPECT_EQ(ToFp8(0.001f, kE4M3), 0x01);
  EXPECT_EQ(FromFp8(0x01, kE4M3), std::ldexp(1.0f, -9));
  EXPECT_EQ(ToFp8(0.0009f, kE4M3), 0x00);
  EXPECT_EQ(ToFp8(std::ldexp(1.0f, -6), kE4M3), 0x08);
  EXPECT_EQ(FromFp8(0x07, kE4M3), 7 * std::ldexp(1.0f, -9));
  // E5M2's: mantissa x 2^-16.
  EXPECT_EQ(FromFp8(0x03, kE5M2), 3 * std::ldexp(1.0f, -16));
}

// Every finite code decodes to a value that encodes back to the same code.
TEST(Fp8Codec, EveryFiniteCodeRoundTrips) {
  for (int c = 0; c < 256; ++c) {
    const uint8_t code = static_cast<uint8_t>(c);
    if ((code & 0x7F) != 0x7F) {
      EXPECT_EQ(ToFp8(FromFp8(code, kE4M3), kE4M3), code) << c;
    }
    if ((code & 0x7C) != 0x7C) {
      EXPECT_EQ(ToFp8(FromFp8(code, kE5M2), kE5M2), code) << c;
    }
  }
}

TEST(Fp8Codec, CurrentScaling) {
  // scale = fp8_max / amax: 448 / 2 = 224; 57344 / 4 = 14336; 1 for an all-zero tensor.
  EXPECT_EQ(Fp8Scale(2.0f, kE4M3), 224.0f);
  EXPECT_EQ(Fp8Scale(4.0f, kE5M2), 14336.0f);
  EXPECT_EQ(Fp8Scale(0.0f, kE4M3), 1.0f);
  EXPECT_EQ(Fp8Scale(INFINITY, kE4M3), 1.0f);
}

std::vector<Bf16> Bf16s(const std::vector<float>& v) {
  std::vector<Bf16> out;
  for (float x : v) out.push_back(ToBf16(x));
  return out;
}

std::vector<float> Floats(const std::vector<Bf16>& v) {
  std::vector<float> out;
  for (Bf16 x : v) out.push_back(ToFloat(x));
  return out;
}

// x = [[1, -2, 4], [0.5, 3, -1]]: amax 4, scale 112; x scale = [112, -224, 448; 56, 336, -112],
// all E4M3 values but 336, which goes to 320 (the tie above): x's second row reads
// [0.5, 320/112, -1]. w = [[1, 0, 0], [0, 1, 1]] (scale 448, exact). y = x w^T:
// [[1, -2 + 4], [0.5, 320/112 - 1 = 1.857142...]], the last rounded to bf16: 238/128 = 1.859375.
// The transposed codes are the codes' transpose.
TEST(Fp8Kernels, QuantizeAndGemm) {
  CpuBackend backend(std::make_unique<LocalCollectives>());
  Fp8Kernels& f8 = *backend.kernels().fp8();
  const std::vector<Bf16> x = Bf16s({1, -2, 4, 0.5, 3, -1}), w = Bf16s({1, 0, 0, 0, 1, 1});
  EXPECT_EQ(f8.Amax(x.data(), 6), 4.0f);
  std::vector<uint8_t> xc(6), xt(6), wc(6);
  f8.Quantize(x.data(), 2, 3, kE4M3, Fp8Scale(4.0f, kE4M3), xc.data(), xt.data());
  f8.Quantize(w.data(), 2, 3, kE4M3, Fp8Scale(1.0f, kE4M3), wc.data(), nullptr);
  EXPECT_EQ(FromFp8(xc[4], kE4M3), 320.0f);
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) EXPECT_EQ(xt[j * 2 + i], xc[i * 3 + j]);
  }
  std::vector<Bf16> y(4);
  f8.Gemm({{{xc.data(), 1.0f / 112, kE4M3}, {wc.data(), 1.0f / 448, kE4M3}, 3}}, 2, 2, y.data(), false, nullptr,
          nullptr);
  EXPECT_EQ(Floats(y), (std::vector<float>{1, 2, 0.5, 1.859375}));
  // Accumulating adds what is there before the one rounding; fp32 output adds unrounded.
  f8.Gemm({{{xc.data(), 1.0f / 112, kE4M3}, {wc.data(), 1.0f / 448, kE4M3}, 3}}, 2, 2, y.data(), true, nullptr,
          nullptr);
  EXPECT_EQ(ToFloat(y[3]), 3.71875f);  // 1.859375 + 1.857142 = 3.716517 -> bf16 476/128
  std::vector<float> acc = {10, 0, 0, 0};
  f8.Gemm({{{xc.data(), 1.0f / 112, kE4M3}, {wc.data(), 1.0f / 448, kE4M3}, 3}}, 2, 2, nullptr, false, acc.data(),
          nullptr);
  EXPECT_EQ(acc[0], 11.0f);
  EXPECT_NEAR(acc[3], 13.0f / 7, 1e-6);  // 208 / 112 in fp32
}

// te_gemm.h: a module's projections share one weight scale and one output-gradient scale.
// n = k = 1, in = [[1]], w1 = [[1]], w2 = [[0.6]] (bf16 0.6015625): joint amax 1, scale 448;
// w2 x 448 = 269.5 -> 256 (steps of 32 in [256, 512)): w2 reads 256/448 = 0.571428..., bf16
// 146/256 = 0.5703125. Alone, w2 would have scale 448 / 0.6015625 and read back exactly.
TEST(TeGemm, OneWeightScalePerModule) {
  CpuBackend backend(std::make_unique<LocalCollectives>());
  ExecContext ctx(&backend, 1, false, nullptr);
  ctx.set_fp8(true);
  const std::vector<Bf16> in = Bf16s({1}), w1 = Bf16s({1}), w2 = Bf16s({0.6f});
  std::vector<Bf16> y1(1), y2(1);
  ASSERT_TRUE(TeForward<Bf16>(ctx, kTeQkv, in.data(), 1, 1,
                              {{w1.data(), nullptr, y1.data(), 1}, {w2.data(), nullptr, y2.data(), 1}})
                  .ok());
  EXPECT_EQ(ToFloat(y1[0]), 1.0f);
  EXPECT_EQ(ToFloat(y2[0]), 0.5703125f);
  ASSERT_TRUE(TeForward<Bf16>(ctx, kTeProj, in.data(), 1, 1, {{w2.data(), nullptr, y2.data(), 1}}).ok());
  EXPECT_EQ(ToFloat(y2[0]), 0.6015625f);
  // Without fp8 the same call is the bf16 GEMM: 0.6015625 as well.
  ctx.set_fp8(false);
  ASSERT_TRUE(TeForward<Bf16>(ctx, kTeFc1, in.data(), 1, 1, {{w2.data(), nullptr, y2.data(), 1}}).ok());
  EXPECT_EQ(ToFloat(y2[0]), 0.6015625f);
}

// The backward of that module with dout1 = [[1]], dout2 = [[0.6]] (bf16 0.6015625): joint
// E5M2 scale 57344; dout2 x 57344 = 34496 -> 32768 (steps of 8192 in [32768, 65536)): reads
// 0.571428.... din = 1 x 1 + 0.571428 x 0.571428 = 1.326531, rounded once to bf16: 170/128 =
// 1.328125 (two roundings, 1 then 1 + 0.3265 = 1.3265 -> 1.328125, agree here; the fp32 sum is
// what TE's one GEMM makes). dw1 = 1 x 1 = 1; dw2 = 0.571428 x 1; db2 = the bf16 dout2's sum,
// 0.6015625, unquantized.
TEST(TeGemm, BackwardSharesTheOutputGradientScale) {
  CpuBackend backend(std::make_unique<LocalCollectives>());
  ExecContext ctx(&backend, 1, false, nullptr);
  ctx.set_fp8(true);
  const std::vector<Bf16> in = Bf16s({1}), w1 = Bf16s({1}), w2 = Bf16s({0.6f});
  const std::vector<Bf16> d1 = Bf16s({1}), d2 = Bf16s({0.6f});
  std::vector<Bf16> din = Bf16s({0});
  float dw1 = 0, dw2 = 0, db2 = 0;
  ASSERT_TRUE(TeBackward<Bf16>(ctx, kTeQkv, {{d1.data(), w1.data(), &dw1, nullptr, 1}, {d2.data(), w2.data(), &dw2, &db2, 1}},
                               in.data(), din.data(), 1, 1)
                  .ok());
  EXPECT_EQ(ToFloat(din[0]), 1.328125f);
  // fp32 sums times the fp32 product of the two factors (1/57344 x 1/448), which rounds.
  EXPECT_NEAR(dw1, 1.0f, 1e-6);
  EXPECT_NEAR(dw2, 4.0f / 7, 1e-6);
  EXPECT_EQ(db2, 0.6015625f);
  // The transient codes, 1 byte an element, are freed; the module's cached weights stay:
  // codes and transpose of both, 4 bytes. At the widest moment, the weight gradients, also
  // both output gradients' codes and transposes (4 bytes) and the input's transpose (1).
  EXPECT_EQ(backend.memory().current().total(), 4);
  EXPECT_EQ(backend.memory().peak_bytes(), 9);
}

// Projections given in another order than the forward's name their place (TeGrad::slot): the
// cached weight each output gradient multiplies is its own. The module above, forward first
// (w1, w2), then the backward listing w2's gradient first: din = 1.328125 as above. Read in
// the listed order instead, d2 would meet w1 and d1 w2: 0.5714 + 0.5714 = 1.1428.
TEST(TeGemm, BackwardReadsTheForwardsOrder) {
  CpuBackend backend(std::make_unique<LocalCollectives>());
  ExecContext ctx(&backend, 1, false, nullptr);
  ctx.set_fp8(true);
  const std::vector<Bf16> in = Bf16s({1}), w1 = Bf16s({1}), w2 = Bf16s({0.6f});
  std::vector<Bf16> y1(1), y2(1);
  ASSERT_TRUE(TeForward<Bf16>(ctx, kTeFc1, in.data(), 1, 1,
                              {{w1.data(), nullptr, y1.data(), 1}, {w2.data(), nullptr, y2.data(), 1}})
                  .ok());
  const std::vector<Bf16> d1 = Bf16s({1}), d2 = Bf16s({0.6f});
  std::vector<Bf16> din = Bf16s({0});
  ASSERT_TRUE(TeBackward<Bf16>(ctx, kTeFc1,
                               {{d2.data(), w2.data(), nullptr, nullptr, 1, 1}, {d1.data(), w1.data(), nullptr, nullptr, 1, 0}},
                               static_cast<const Bf16*>(nullptr), din.data(), 1, 1)
                  .ok());
  EXPECT_EQ(ToFloat(din[0]), 1.328125f);
}

// The weights are quantized at a module's first use in a step and reused after (TE's
// is_first_microbatch): a weight changed within the step is not seen until the next. in = [[1]],
// w = [[1]] -> y = 1; w set to 0.5 -> y still 1 (the cached codes); NewStep -> 0.5.
TEST(TeGemm, WeightsQuantizedOncePerStep) {
  CpuBackend backend(std::make_unique<LocalCollectives>());
  ExecContext ctx(&backend, 1, false, nullptr);
  ctx.set_fp8(true);
  ctx.SetLayer(3, SpanLabel::kMlp);
  const std::vector<Bf16> in = Bf16s({1});
  std::vector<Bf16> w = Bf16s({1}), y(1);
  ASSERT_TRUE(TeForward<Bf16>(ctx, kTeFc2, in.data(), 1, 1, {{w.data(), nullptr, y.data(), 1}}).ok());
  EXPECT_EQ(ToFloat(y[0]), 1.0f);
  w[0] = ToBf16(0.5f);
  ASSERT_TRUE(TeForward<Bf16>(ctx, kTeFc2, in.data(), 1, 1, {{w.data(), nullptr, y.data(), 1}}).ok());
  EXPECT_EQ(ToFloat(y[0]), 1.0f);
  ctx.fp8_weights().NewStep();
  ASSERT_TRUE(TeForward<Bf16>(ctx, kTeFc2, in.data(), 1, 1, {{w.data(), nullptr, y.data(), 1}}).ok());
  EXPECT_EQ(ToFloat(y[0]), 0.5f);
  // Another layer's module of the same place is another cache entry.
  ctx.SetLayer(4, SpanLabel::kMlp);
  w[0] = ToBf16(2.0f);
  ASSERT_TRUE(TeForward<Bf16>(ctx, kTeFc2, in.data(), 1, 1, {{w.data(), nullptr, y.data(), 1}}).ok());
  EXPECT_EQ(ToFloat(y[0]), 2.0f);
}

// A saved input's codes give the weight gradient the bf16 input gives (the same tensor, the
// same scale). in (2, 2) = [[1, -3], [0.25, 2]]: amax 3, scale 448/3; kept rows [1, 2): 0.25
// and 2 quantized: 2 x 448/3 = 298.67 -> 288 (steps of 32), 0.25 x 448/3 = 37.33 -> 36 (steps of
// 4): 1 x 2 = 2 codes, scale_inv 3/448. All rows kept: both ways of the weight gradient agree
// bitwise.
TEST(TeGemm, SavedCodesAreTheInputsQuantization) {
  CpuBackend backend(std::make_unique<LocalCollectives>());
  ExecContext ctx(&backend, 1, false, nullptr);
  ctx.set_fp8(true);
  const std::vector<Bf16> in = Bf16s({1, -3, 0.25f, 2}), w = Bf16s({1, 1});
  std::vector<Bf16> y(2);
  Fp8Saved row1, all;
  ASSERT_TRUE(TeForward<Bf16>(ctx, kTeQkv, in.data(), 2, 2, {{w.data(), nullptr, y.data(), 1}}, {&row1, 1, 1}).ok());
  ASSERT_EQ(row1.codes.bytes(), 2);
  EXPECT_EQ(FromFp8(row1.codes.as<uint8_t>()[0], kE4M3), 36.0f);
  EXPECT_EQ(FromFp8(row1.codes.as<uint8_t>()[1], kE4M3), 288.0f);
  EXPECT_EQ(row1.scale_inv, 1.0f / (448.0f / 3.0f));
  ASSERT_TRUE(TeForward<Bf16>(ctx, kTeQkv, in.data(), 2, 2, {{w.data(), nullptr, y.data(), 1}}, {&all, 0, 2}).ok());
  const std::vector<Bf16> dout = Bf16s({0.5f, -1});
  std::vector<float> dw_codes(2, 0), dw_values(2, 0);
  ASSERT_TRUE(TeBackward<Bf16>(ctx, kTeQkv, {{dout.data(), w.data(), dw_codes.data(), nullptr, 1}},
                               TeIn<Bf16>(all.codes.as<uint8_t>(), all.scale_inv), nullptr, 2, 2)
                  .ok());
  ASSERT_TRUE(
      TeBackward<Bf16>(ctx, kTeQkv, {{dout.data(), w.data(), dw_values.data(), nullptr, 1}}, in.data(), nullptr, 2, 2)
          .ok());
  EXPECT_EQ(dw_codes, dw_values);
  EXPECT_NE(dw_codes[0], 0.0f);
}

}  // namespace
}  // namespace shardsim::runtime
