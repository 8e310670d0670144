// The measured GEMM table (src/cost/gemm_table.h) and the op times it gives. Expected values
// are the numbers in hardware/gemm/sm90-bf16.yaml (TFLOP/s) worked through by hand, with the
// dgx-h100 description's figures: 132 SMs, 128 x 256 output tiles, 3.35 TB/s x 0.9, 5 us
// kernel latency, fp8 1979 TFLOP/s x 0.709.
#include <gtest/gtest.h>

#include <cmath>

#include "src/cost/gemm_table.h"
#include "src/cost/op_time.h"
#include "src/hardware/hardware_spec.h"
#include "tests/contains.h"
#include "tests/test_hardware.h"

namespace shardsim {
namespace {

using testing::Contains;

constexpr double kT = 1e12;  // TFLOP/s

const HardwareSpec& H100() {
  static const HardwareSpec hw = [] {
    StatusOr<HardwareSpec> h = LoadHardware("dgx-h100");
    CHECK(h.ok()) << h.status().message();
    return *h;
  }();
  return hw;
}

const GemmTable& Table() {
  CHECK(H100().gpu.efficiency.matmul_table != nullptr) << "dgx-h100 names no matmul_table";
  return *H100().gpu.efficiency.matmul_table;
}

// The whole sm_90 grid is there, and a grid point reads back exactly:
//   {b: 1, m: 4096, n: 4096, k: 4096, tflops: 780.193877565849}.
// Inside the grid the wave ratio is 1, so GemmTableFlops returns the same rate.
TEST(GemmTableTest, GridPointsReadBack) {
  const GemmTable& t = Table();
  EXPECT_EQ(t.arch(), "sm_90");
  EXPECT_EQ(t.batches(), (std::vector<int64_t>{1, 2, 4}));
  EXPECT_EQ(t.ks(), (std::vector<int64_t>{256, 512, 1024, 2048, 4096}));
  EXPECT_DOUBLE_EQ(*t.Measured(1, 4096, 4096, 4096), 780.193877565849 * kT);
  EXPECT_DOUBLE_EQ(*t.Measured(1, 256, 256, 256), 6.721641025641 * kT);
  EXPECT_FALSE(t.Measured(3, 4096, 4096, 4096).has_value());
  EXPECT_DOUBLE_EQ(t.Interpolate(1, 4096, 4096, 4096), 780.193877565849 * kT);
  EXPECT_DOUBLE_EQ(GemmTableFlops(H100().gpu, t, 4096, 4096, 4096), 780.193877565849 * kT);
  // The saturated rate is the table's largest: {b: 4, m: 4096, n: 2048, k: 4096} 804.715...
  EXPECT_DOUBLE_EQ(t.saturated_flops(), 804.715405124361 * kT);
}

// Interpolation is linear in log2 of each size. m = 1024 sqrt(2) is the log2 midpoint of 1024
// and 2048, so at n = k = 2048 the rate is the mean of
//   {b: 1, m: 1024, n: 2048, k: 2048} 529.458493096646 and
//   {b: 1, m: 2048, n: 2048, k: 2048} 641.039894925373: 585.249194011009.
// With k = 2048 sqrt(2) as well (log2 midpoint of 2048 and 4096) it is the mean of four
// corners, adding {1, 1024, 2048, 4096} 665.679990080595 and {1, 2048, 2048, 4096}
// 752.18341436077: (529.4585 + 641.0399 + 665.6800 + 752.1834) / 4 = 647.090448115846.
TEST(GemmTableTest, InterpolatesLinearlyInLog2) {
  const GemmTable& t = Table();
  EXPECT_NEAR(t.Interpolate(1, 1024 * std::sqrt(2.0), 2048, 2048), 585.249194011009 * kT, 1e-9 * kT);
  EXPECT_NEAR(t.Interpolate(1, 1024 * std::sqrt(2.0), 2048, 2048 * std::sqrt(2.0)),
              647.090448115846 * kT, 1e-9 * kT);
}

// Below the grid the smallest point's rate is used, with no wave factor: a 100 x 200 x 64 GEMM
// reads {b: 1, m: 256, n: 256, k: 256} 6.721641025641.
TEST(GemmTableTest, ClampsBelowTheGrid) {
  EXPECT_DOUBLE_EQ(GemmTableFlops(H100().gpu, Table(), 100, 200, 64), 6.721641025641 * kT);
}

// Above the grid the edge value times wave(actual) / wave(edge). 4096 x 4352 x 4096: n is
// clamped to 4096, so the rate read is {1, 4096, 4096, 4096} 780.193877565849. In 128 x 256
// tiles on 132 SMs:
//   actual 4096 x 4352: 32 x 17 = 544 tiles, ceil(544 / 132) = 5 waves, 544 / 660;
//   edge   4096 x 4096: 32 x 16 = 512 tiles, ceil(512 / 132) = 4 waves, 512 / 528;
//   ratio (544 x 528) / (660 x 512) = 287232 / 337920 = 0.85, so 663.164795930972.
// A k beyond the grid changes no tiles: 4096 x 4096 x 16384 reads the same 780.19.
TEST(GemmTableTest, ClampsAboveTheGridWithTheWaveFactor) {
  const GpuSpec& gpu = H100().gpu;
  EXPECT_NEAR(GemmTableFlops(gpu, Table(), 4096, 4352, 4096), 663.164795930972 * kT, 1e-9 * kT);
  EXPECT_DOUBLE_EQ(GemmTableFlops(gpu, Table(), 4096, 4096, 16384), 780.193877565849 * kT);
}

// Rows beyond 4096 read a batch: b = the smallest table batch >= ceil(M / 4096), m = M / b.
//   M = 4096: b 1, m 4096;  M = 4097: ceil 2 -> b 2, m 2048.5;  M = 6000: b 2, m 3000;
//   M = 10000: ceil 3 -> b 4 (no batch 3), m 2500;  M = 20000: ceil 5 -> b 4, m 5000.
// M = 8192 x 4096 x 4096 reads {b: 2, m: 4096, n: 4096, k: 4096} 804.185691260323 exactly
// (m = 4096 is on the grid: no wave factor). M = 32768 reads b 4 with m 8192 clamped to 4096:
// {4, 4096, 4096, 4096} 788.699393418751 x wave(32768, 4096) / wave(4 x 4096, 4096), tiles
// 256 x 16 = 4096 in 32 waves (4096 / 4224) against 128 x 16 = 2048 in 16 (2048 / 2112): both
// 0.969697, so the ratio is 1.
TEST(GemmTableTest, LargeRowCountsMapToBatches) {
  const GemmTable& t = Table();
  const auto expect = [&](int64_t rows, int64_t b, double m) {
    const GemmTableRows at = MapGemmRows(t, rows);
    EXPECT_EQ(at.b, b) << rows;
    EXPECT_DOUBLE_EQ(at.m, m) << rows;
  };
  expect(4096, 1, 4096);
  expect(4097, 2, 2048.5);
  expect(6000, 2, 3000);
  expect(10000, 4, 2500);
  expect(20000, 4, 5000);
  EXPECT_DOUBLE_EQ(GemmTableFlops(H100().gpu, t, 8192, 4096, 4096), 804.185691260323 * kT);
  EXPECT_NEAR(GemmTableFlops(H100().gpu, t, 32768, 4096, 4096), 788.699393418751 * kT, 1e-9 * kT);
}

// A table with a hole, a bad value, an unknown key or a repeated shape is rejected with the
// file, the row and what is wrong.
TEST(GemmTableTest, MalformedTablesAreRejected) {
  const std::string head = "arch: sm_90\ndtype: bf16\nrates:\n";
  // Axes b {1}, m {256, 512}, n {256}, k {256, 512}: 4 shapes needed, 3 given.
  StatusOr<std::shared_ptr<const GemmTable>> t = GemmTable::Parse(
      head + "  - {b: 1, m: 256, n: 256, k: 256, tflops: 1}\n"
             "  - {b: 1, m: 256, n: 256, k: 512, tflops: 2}\n"
             "  - {b: 1, m: 512, n: 256, k: 256, tflops: 3}\n",
      "hole.yaml");
  ASSERT_FALSE(t.ok());
  EXPECT_TRUE(Contains(t.status().message(), "hole.yaml:"));
  EXPECT_TRUE(Contains(t.status().message(), "the grid is incomplete: no rate for b x m x n x k = 1x512x256x512"));

  t = GemmTable::Parse(head + "  - {b: 1, m: 256, n: 256, k: 256, tflops: -3}\n", "negative.yaml");
  ASSERT_FALSE(t.ok());
  EXPECT_TRUE(Contains(t.status().message(), "negative.yaml:4:"));
  EXPECT_TRUE(Contains(t.status().message(), "field 'rates[0].tflops': expected a number in"));

  t = GemmTable::Parse(head + "  - {b: 1, m: 256, n: 256, k: 256, tflop: 3}\n", "typo.yaml");
  ASSERT_FALSE(t.ok());
  EXPECT_TRUE(Contains(t.status().message(), "field 'rates[0].tflops'"));
  EXPECT_TRUE(Contains(t.status().message(), "did you mean 'tflops'?"));

  t = GemmTable::Parse(head + "  - {b: 1, m: 256, n: 256, k: 256, tflops: 3}\n"
                              "  - {b: 1, m: 256, n: 256, k: 256, tflops: 4}\n",
                       "twice.yaml");
  ASSERT_FALSE(t.ok());
  EXPECT_TRUE(Contains(t.status().message(), "twice.yaml:5:"));
  EXPECT_TRUE(Contains(t.status().message(), "1x256x256x256 appears twice (first as rates[0])"));

  t = GemmTable::Parse("arch: sm_90\ndtype: fp8\nrates:\n  - {b: 1, m: 1, n: 1, k: 1, tflops: 1}\n",
                       "fp8.yaml");
  ASSERT_FALSE(t.ok());
  EXPECT_TRUE(Contains(t.status().message(), "field 'dtype': expected one of bf16, found 'fp8'"));
}

// The field is optional: the string-built test node has none; with it, a relative path is
// found in the bundled hardware/ folder (the description has no folder of its own); a table
// that cannot be loaded is an error at the field.
TEST(GemmTableTest, HardwareFieldIsOptionalAndResolved) {
  const std::string yaml = testing::TwoGpuNodeYaml("100 GB/s");
  StatusOr<HardwareSpec> hw = ParseHardwareYaml(yaml, "two");
  ASSERT_TRUE(hw.ok()) << hw.status().message();
  EXPECT_EQ(hw->gpu.efficiency.matmul_table, nullptr);

  const std::string latency = "kernel_latency: \"0 us\"";
  std::string with = yaml;
  with.replace(with.find(latency), latency.size(), latency + ", matmul_table: gemm/sm90-bf16.yaml");
  hw = ParseHardwareYaml(with, "two");
  ASSERT_TRUE(hw.ok()) << hw.status().message();
  ASSERT_NE(hw->gpu.efficiency.matmul_table, nullptr);
  EXPECT_EQ(hw->gpu.efficiency.matmul_table_path, "gemm/sm90-bf16.yaml");
  // A bundled description names its table as written (what a plan file should carry).
  EXPECT_EQ(H100().gpu.efficiency.matmul_table_path, "gemm/sm90-bf16.yaml");
  // Loaded once: the bundled H100 description shares the same table.
  EXPECT_EQ(hw->gpu.efficiency.matmul_table.get(), &Table());

  std::string missing = yaml;
  missing.replace(missing.find(latency), latency.size(), latency + ", matmul_table: gemm/sm42-bf16.yaml");
  hw = ParseHardwareYaml(missing, "two");
  ASSERT_FALSE(hw.ok());
  EXPECT_TRUE(Contains(hw.status().message(), "field 'gpu.efficiency.matmul_table': cannot load the GEMM table 'gemm/sm42-bf16.yaml'"));
}

// A bf16 GEMM op on dgx-h100, 4096 x 3072 x 4096 (inside the grid, n off it). n = 3072 sits at
// log2(3072 / 2048) = log2 1.5 = 0.5849625 between
//   {b: 1, m: 4096, n: 2048, k: 4096} 759.364797736916 and {1, 4096, 4096, 4096} 780.193877565849:
//   759.364797736916 + 0.5849625 x 20.829079828933 = 771.549028361369 TFLOP/s.
// The table gives the shape factor s = 771.549028 / 804.715405 (the saturated rate) = 0.958785;
// the best-shape rate is the description's, bf16 989 x 0.803 (MAMF), so the GEMM runs at
// 989e12 x 0.803 x 0.958785 = 761.435376 TFLOP/s. FLOPs 2 x 4096 x 3072 x 4096 =
// 103,079,215,104 take 135.374870 us; its bytes, 2 x (4096^2 + 2 x 4096 x 3072) = 83,886,080 at
// 3.35 TB/s x 0.9, take 27.8 us: compute-bound. With the 5 us kernel latency the op takes
// 140.374870 us; backward, twice the work in two kernels, 280.749740 us.
// fp8 (a Transformer Engine GEMM): 1979 x 0.709 TFLOP/s x s = 1345.307e12, so
// 5 us + 103.079e9 / 1345.307e12 = 5 + 76.622772 = 81.622772 us.
TEST(GemmTableTest, OpTimeOnH100ComesFromTheTable) {
  const GpuSpec& gpu = H100().gpu;
  Op op;
  op.kind = OpKind::kMatmul;
  op.m = 4096;
  op.n = 3072;
  op.k = 4096;
  op.flops = op.executed_flops = 103079215104.0;
  op.bytes = 83886080.0;
  EXPECT_NEAR(OpForwardTime(gpu, DType::kBf16, op), 140.374870e-6, 1e-12);
  EXPECT_NEAR(OpBackwardTime(gpu, DType::kBf16, op), 280.749740e-6, 1e-12);
  EXPECT_NEAR(OpForwardTime(gpu, DType::kFp8, op), 81.622772e-6, 1e-12);
  // Without the table (A100 has none) the scalar model stays: a grid-sized GEMM there is
  // latency + flops / (312e12 x 0.869 x wave), not a table time.
  StatusOr<HardwareSpec> a100 = LoadHardware("dgx-a100-80gb");
  ASSERT_TRUE(a100.ok()) << a100.status().message();
  EXPECT_EQ(a100->gpu.efficiency.matmul_table, nullptr);
}

}  // namespace
}  // namespace shardsim
