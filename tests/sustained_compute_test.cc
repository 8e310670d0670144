// efficiency.sustained_compute, the one parameter fitted to published runs (src/report/
// compute_fit.h): it scales GEMM and attention rates and nothing else, and the commands apply
// the bundled fit only to a description that does not set its own.
#include <gtest/gtest.h>

#include <fstream>

#include "src/cost/op_time.h"
#include "src/cost/ops.h"
#include "src/hardware/hardware_spec.h"
#include "src/report/compute_fit.h"
#include "tests/find_op.h"
#include "tests/test_models.h"

namespace shardsim {
namespace {

// bf16 mlp_up of one GPT layer (h 4096, s 2048, mbs 1, tp 1) on H100: 2 x 2048 x 4096 x 16384
// = 274.88 GFLOP at 989e12 x 0.803 x s, s = 752.315 / 804.715 = 0.934884 (the GEMM table, as
// tests/fp8_ops_test.cc derives it): 370.23 us of math plus the 5 us kernel latency. At
// sustained_compute 0.8 the math takes 370.23 / 0.8 = 462.79 us; the latency does not scale.
// A memory-bound op (the first norm, no FLOPs on the math units) keeps its time.
TEST(SustainedCompute, ScalesMathOnly) {
  StatusOr<HardwareSpec> loaded = LoadHardware("dgx-h100");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  HardwareSpec hw = *loaded;
  const ModelSpec m = testing::GptModel(2, 4096, 32, 51200, 2048);
  Layout l;
  l.dp = 1;
  l.mbs = 1;
  l.gbs = 1;
  l.dtype = DType::kBf16;
  const std::vector<Op> ops = LayerOps(m, l, false);
  const Op& up = testing::FindOp(ops, "mlp_up");
  const Op& norm = testing::FindOp(ops, "norm1");
  const double norm_time = OpForwardTime(hw.gpu, DType::kBf16, norm);
  EXPECT_NEAR(OpForwardTime(hw.gpu, DType::kBf16, up), 375.23e-6, 0.01e-6);
  hw.gpu.efficiency.sustained_compute = 0.8;
  EXPECT_NEAR(OpForwardTime(hw.gpu, DType::kBf16, up), 467.79e-6, 0.01e-6);
  EXPECT_DOUBLE_EQ(OpForwardTime(hw.gpu, DType::kBf16, norm), norm_time);
}

// The bundled fit of the H100's architecture (docs/validation/compute-fits.yaml, read here
// directly) is applied to a description without the field; --unfitted leaves it at 1; a
// description's own value is kept; an architecture with no fit (the CPU host) stays at 1.
TEST(SustainedCompute, AppliesTheBundledFitOnlyWhereUnset) {
  StatusOr<std::vector<ComputeFit>> fits =
      LoadComputeFits(std::string(SHARDSIM_SOURCE_DIR) + "/docs/validation/compute-fits.yaml");
  ASSERT_TRUE(fits.ok()) << fits.status().message();
  double sm90 = 0;
  for (const ComputeFit& f : *fits) {
    if (f.architecture == "sm90") sm90 = f.sustained_compute;
  }
  ASSERT_GT(sm90, 0) << "no sm90 fit in the bundled file";

  StatusOr<HardwareSpec> h100 = LoadHardware("dgx-h100");
  StatusOr<HardwareSpec> h200 = LoadHardware("dgx-h200");
  StatusOr<HardwareSpec> cpu = LoadHardware("cpu-host");
  ASSERT_TRUE(h100.ok() && h200.ok() && cpu.ok());
  HardwareSpec fitted = *h100, unfitted = *h100, own = *h100, same_arch = *h200, host = *cpu;
  own.gpu.efficiency.sustained_compute = 0.9;
  ApplyComputeFit(&fitted, false);
  ApplyComputeFit(&unfitted, true);
  ApplyComputeFit(&own, false);
  ApplyComputeFit(&same_arch, false);
  ApplyComputeFit(&host, false);
  EXPECT_DOUBLE_EQ(fitted.gpu.efficiency.sustained(), sm90);
  EXPECT_EQ(fitted.gpu.efficiency.sustained_compute_origin, "fit");
  EXPECT_DOUBLE_EQ(same_arch.gpu.efficiency.sustained(), sm90);  // H200: sm90, as the H100
  EXPECT_DOUBLE_EQ(unfitted.gpu.efficiency.sustained(), 1.0);
  EXPECT_FALSE(unfitted.gpu.efficiency.sustained_compute.has_value());
  EXPECT_DOUBLE_EQ(own.gpu.efficiency.sustained(), 0.9);
  EXPECT_DOUBLE_EQ(host.gpu.efficiency.sustained(), 1.0);
  EXPECT_EQ(host.gpu.efficiency.sustained_compute_origin, "no-fit");
  EXPECT_NE(ComputeFitText(fitted).find("fitted on"), std::string::npos) << ComputeFitText(fitted);
  EXPECT_NE(ComputeFitText(unfitted).find("--unfitted"), std::string::npos) << ComputeFitText(unfitted);
}

TEST(SustainedCompute, FitsFileIsStrict) {
  const std::string dir = ::testing::TempDir();
  const std::string file = dir + "/fits-bad.yaml";
  {
    std::ofstream out(file);
    out << "fits:\n  - {architecture: sm90, gpus: G, sustained_compute: 3, runs: 1, sources: 2, structural_mape: 0,\n"
           "     fitted_mape: 0, loso_mape: 0, structural_median_signed: 0, fitted_median_signed: 0,\n"
           "     loso_median_signed: 0}\n";
  }
  StatusOr<std::vector<ComputeFit>> back = LoadComputeFits(file);
  ASSERT_FALSE(back.ok());
  EXPECT_NE(back.status().message().find("sustained_compute"), std::string::npos) << back.status().message();
}

}  // namespace
}  // namespace shardsim
