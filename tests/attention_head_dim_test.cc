// Fused attention at the head size its kernel is compiled for (GpuEfficiency::
// attention_head_dims, FlashAttention-2's HEADDIM_SWITCH on the bundled GPUs): a head of 80
// runs the 96 kernel, so its math takes 96/80 = 1.2x the time its FLOPs alone would; a head of
// 64 or 128 (a bucket) runs as given; without the list (a description that omits it, the CPU
// host) every size runs as given.
#include <gtest/gtest.h>

#include "src/cost/op_time.h"
#include "src/cost/ops.h"
#include "src/hardware/hardware_spec.h"
#include "src/io/plan_file.h"
#include "tests/find_op.h"
#include "tests/test_models.h"

namespace shardsim {
namespace {

// One layer's fused attention on A100 (bf16, tp 1, mbs 1, seq 2048), 8 heads of `head_dim`:
// its math part, the op time less the kernel latency (both forward times are math-bound:
// attention at 312e12 x 0.6 is far from HBM-bound at these sizes).
double AttentionMath(const HardwareSpec& hw, int64_t head_dim) {
  ModelSpec m = testing::GptModel(2, 8 * head_dim, 8, 51200, 2048);
  Layout l;
  l.mbs = l.gbs = 1;
  l.dtype = DType::kBf16;
  const Op& attn = testing::FindOp(LayerOps(m, l, false), "attention");
  return OpForwardTime(hw.gpu, DType::kBf16, attn) - hw.gpu.efficiency.kernel_latency_s;
}

TEST(AttentionHeadDim, RunsAtTheKernelsHeadSize) {
  StatusOr<HardwareSpec> a100 = LoadHardware("dgx-a100-80gb");
  ASSERT_TRUE(a100.ok()) << a100.status().message();
  ASSERT_EQ(a100->gpu.efficiency.attention_head_dims,
            (std::vector<int64_t>{32, 64, 96, 128, 160, 192, 224, 256}));
  // Math time is FLOPs / rate, and FLOPs are linear in the head size (2 T s (d + d) heads / 2):
  // at 80 the kernel runs 96, so t(80) = t(96) exactly; at 64 and 128, buckets, t(128) = 2 t(64).
  EXPECT_NEAR(AttentionMath(*a100, 80), AttentionMath(*a100, 96), 1e-12);
  EXPECT_NEAR(AttentionMath(*a100, 128), 2 * AttentionMath(*a100, 64), 1e-12);
  // 112 runs at 128.
  EXPECT_NEAR(AttentionMath(*a100, 112), AttentionMath(*a100, 128), 1e-12);
  // Without the list: as given, t(80) = 80/96 t(96).
  HardwareSpec plain = *a100;
  plain.gpu.efficiency.attention_head_dims.clear();
  EXPECT_NEAR(AttentionMath(plain, 80), AttentionMath(plain, 96) * 80 / 96, 1e-12);
  // Beyond the largest size (FA2 stops at 256): as given.
  EXPECT_NEAR(AttentionMath(*a100, 288), AttentionMath(plain, 288), 1e-12);
}

// The description's list must ascend, each size once: a located error otherwise.
TEST(AttentionHeadDim, AListOutOfOrderIsAnError) {
  StatusOr<HardwareSpec> a100 = LoadHardware("dgx-a100-80gb");
  ASSERT_TRUE(a100.ok());
  const std::string text = HardwareYaml(*a100);
  const std::string good = "attention_head_dims: [32, 64";
  const size_t at = text.find(good);
  ASSERT_NE(at, std::string::npos) << text;
  std::string bad = text;
  bad.replace(at, good.size(), "attention_head_dims: [64, 32");
  StatusOr<HardwareSpec> parsed = ParseHardwareYaml(bad, "bad.yaml");
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("field 'gpu.efficiency.attention_head_dims': expected head sizes in ascending order"),
            std::string::npos)
      << parsed.status().message();
}

}  // namespace
}  // namespace shardsim
