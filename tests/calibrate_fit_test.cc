// calibrate fits src/cost/op_time.h's own op time, so the description it writes prices every
// sample exactly as the fit did (issue 14, item 7): runtime/calibrate/calibrate.h, FitOpTimes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "runtime/calibrate/calibrate.h"
#include "src/cost/op_time.h"
#include "src/hardware/hardware_spec.h"

namespace shardsim::runtime {
namespace {

HardwareSpec CpuHost() {
  StatusOr<HardwareSpec> hw = LoadHardware("cpu-host");
  CHECK(hw.ok()) << hw.status().message();
  return *hw;
}

Op Gemm(int64_t rows, int64_t inner, int64_t cols) {
  Op op;
  op.kind = OpKind::kMatmul;
  op.m = rows;
  op.n = cols;
  op.k = inner;
  op.flops = op.executed_flops = 2.0 * rows * inner * cols;
  op.bytes = 4.0 * (rows * inner + inner * cols + rows * cols);
  return op;
}

Op Memory(double bytes, double transcendentals) {
  Op op;
  op.kind = OpKind::kMemory;
  op.bytes = bytes;
  op.transcendentals = transcendentals;
  return op;
}

// GEMMs, four of them memory-bound (inner 1 or 2: 2 FLOPs per 4-byte output element), streams
// and exp-bound element-wise ops.
std::vector<Op> Cases() {
  std::vector<Op> ops;
  for (int64_t n : {64, 256, 1024}) {
    for (int64_t k : {64, 512}) ops.push_back(Gemm(n, k, 256));
  }
  for (int64_t n : {1024, 4096}) {
    for (int64_t k : {1, 2}) ops.push_back(Gemm(n, k, n));
  }
  for (double bytes : {1e4, 1e6, 1e8}) ops.push_back(Memory(bytes, 0));
  for (double e : {1e4, 1e6}) ops.push_back(Memory(12 * e, e));
  return ops;
}

CalibrationResult Samples(const GpuSpec& truth, double noise) {
  CalibrationResult r;
  r.hardware = CpuHost();
  r.dtype = DType::kFp32;
  int i = 0;
  for (const Op& op : Cases()) {
    CalibrationSample s;
    s.what = "case " + std::to_string(i);
    s.op = op;
    // A fixed pattern of relative errors of +-noise (no randomness: the test is the same on
    // every run).
    s.time_s = OpForwardTime(truth, DType::kFp32, op) * (1 + noise * ((i * 7) % 5 - 2) / 2.0);
    r.samples.push_back(s);
    ++i;
  }
  return r;
}

// The truth: 3 us per kernel, 30 GFLOP/s (matmul efficiency 30e9 / peak), 15 GB/s for
// memory-bound ops, 0.5 G exp/s. Exact times: the fit recovers every figure and predicts every
// sample (R^2 1), the memory-bound GEMMs included (an additive fit, flops / R + bytes / B,
// cannot: it would charge them both terms).
TEST(CalibrateFit, RecoversTheOpTimeModelExactly) {
  GpuSpec truth = CpuHost().gpu;
  const double peak = *truth.Peak(DType::kFp32);
  truth.efficiency.matmul = 30e9 / peak;
  truth.efficiency.memory = 15e9 / truth.memory_bandwidth;
  truth.efficiency.kernel_latency_s = 3e-6;
  truth.transcendental_rate = 0.5e9;
  CalibrationResult r = Samples(truth, 0);
  ASSERT_TRUE(FitOpTimes(&r).ok());
  EXPECT_NEAR(r.compute.latency_s, 3e-6, 1e-12);
  EXPECT_NEAR(r.compute.flop_rate, 30e9, 30e9 * 1e-6);
  EXPECT_NEAR(r.compute.byte_rate, 15e9, 15e9 * 1e-6);
  EXPECT_NEAR(r.compute.transcendental_rate, 0.5e9, 0.5e9 * 1e-6);
  EXPECT_EQ(r.compute.byte_rate_source, "fitted");
  EXPECT_EQ(r.compute.transcendental_rate_source, "fitted");
  EXPECT_NEAR(r.compute.r2, 1.0, 1e-9);
  EXPECT_LT(r.compute.max_rel_error, 1e-6);
}

// With +-5 % errors, the description written and loaded back prices each sample exactly as
// the fit predicted it (the quoted worst error is that description's), and the worst error is
// about the noise's.
TEST(CalibrateFit, TheWrittenDescriptionReproducesItsFit) {
  GpuSpec truth = CpuHost().gpu;
  truth.efficiency.matmul = 30e9 / *truth.Peak(DType::kFp32);
  truth.efficiency.memory = 15e9 / truth.memory_bandwidth;
  truth.efficiency.kernel_latency_s = 3e-6;
  truth.transcendental_rate = 0.5e9;
  CalibrationResult r = Samples(truth, 0.05);
  ASSERT_TRUE(FitOpTimes(&r).ok());
  const std::string path = (std::filesystem::temp_directory_path() / "calibrate-fit-test.yaml").string();
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    const std::string yaml = CalibratedHardwareYaml(r, "fit-test", "cpu-host");
    std::fputs(yaml.c_str(), f);
    std::fclose(f);
  }
  StatusOr<HardwareSpec> loaded = LoadHardware(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  double worst = 0;
  for (const CalibrationSample& s : r.samples) {
    const double priced = OpForwardTime(loaded->gpu, DType::kFp32, s.op);
    EXPECT_NEAR(priced, s.predicted_s, 1e-12 * s.predicted_s) << s.what;
    worst = std::max(worst, std::fabs(priced - s.time_s) / s.time_s);
  }
  EXPECT_NEAR(worst, r.compute.max_rel_error, 1e-12);
  EXPECT_LT(r.compute.max_rel_error, 0.10);  // 5 % noise: the fit stays near it
}

// No sample moves bytes (GEMMs whose traffic is never the bound): the base's memory rate is
// kept, and said so; the GEMM rate is still recovered.
TEST(CalibrateFit, WithoutBytesTheBasesRateStays) {
  GpuSpec truth = CpuHost().gpu;
  truth.efficiency.matmul = 30e9 / *truth.Peak(DType::kFp32);
  truth.efficiency.kernel_latency_s = 3e-6;
  CalibrationResult r;
  r.hardware = CpuHost();
  const double base_rate = r.hardware.gpu.memory_bandwidth * r.hardware.gpu.efficiency.memory;
  for (int64_t n : {64, 256, 1024}) {
    CalibrationSample s;
    s.what = "gemm " + std::to_string(n);
    s.op = Gemm(n, 512, 512);
    s.op.bytes = 0;
    s.time_s = OpForwardTime(truth, DType::kFp32, s.op);
    r.samples.push_back(s);
  }
  ASSERT_TRUE(FitOpTimes(&r).ok());
  EXPECT_EQ(r.compute.byte_rate_source, "the base's");
  EXPECT_DOUBLE_EQ(r.compute.byte_rate, base_rate);
  EXPECT_NEAR(r.compute.flop_rate, 30e9, 30e9 * 1e-6);
}

// Bytes that explain none of the times (a smaller op slower than a larger one, as cache-resident
// element-wise ops on a CPU): the fit puts no cost on them, and the description takes the
// fastest rate a sample showed, 1e6 B / 10 us = 100 GB/s, so no sample's bytes alone exceed its
// time; the written file still reproduces the fit.
TEST(CalibrateFit, AnUnpinnedRateIsTheFastestSamplesAndSaidSo) {
  GpuSpec truth = CpuHost().gpu;
  truth.efficiency.matmul = 30e9 / *truth.Peak(DType::kFp32);
  CalibrationResult r;
  r.hardware = CpuHost();
  r.dtype = DType::kFp32;
  for (int64_t n : {64, 256, 1024}) {
    CalibrationSample s;
    s.what = "gemm " + std::to_string(n);
    s.op = Gemm(n, 512, 512);
    s.time_s = OpForwardTime(truth, DType::kFp32, s.op);
    r.samples.push_back(s);
  }
  const double bytes[3] = {1e4, 1e5, 1e6}, times[3] = {20e-6, 15e-6, 10e-6};  // falling with size
  for (int i = 0; i < 3; ++i) {
    CalibrationSample s;
    s.what = "element-wise " + std::to_string(i);
    s.op = Memory(bytes[i], 0);
    s.time_s = times[i];
    r.samples.push_back(s);
  }
  ASSERT_TRUE(FitOpTimes(&r).ok());
  EXPECT_EQ(r.compute.byte_rate_source, "the fastest sample's");
  EXPECT_NEAR(r.compute.byte_rate, 1e6 / 10e-6, 1e3);
  for (const CalibrationSample& s : r.samples) {
    EXPECT_DOUBLE_EQ(s.predicted_s, OpForwardTime(r.hardware.gpu, DType::kFp32, s.op));
  }
  const std::string yaml = CalibratedHardwareYaml(r, "fit-test", "cpu-host");
  EXPECT_NE(yaml.find("the fastest sample's"), std::string::npos);
}

}  // namespace
}  // namespace shardsim::runtime
