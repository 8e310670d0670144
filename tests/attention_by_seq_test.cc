// The fused attention kernel's rate by sequence length (GpuEfficiency::attention_by_seq, the
// hardware YAML's attention_seq_lens and attention_tflops): FlashAttention-2's measured forward
// + backward rates at six lengths, interpolated in log2 of the length. Every expected value is
// worked by hand in the comment before it.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "src/cost/op_time.h"
#include "src/cost/ops.h"
#include "src/hardware/hardware_spec.h"
#include "src/layout/stack.h"
#include "src/layout/validate.h"
#include "src/io/plan_file.h"
#include "tests/find_op.h"
#include "tests/test_models.h"

namespace shardsim {
namespace {

// Between two measured lengths linear in log2: at 1,024 between (512, 0.2) and (2,048, 0.4),
// log2(1024 / 512) / log2(2048 / 512) = 1/2 of the way: 0.3. Held at the ends: 0.2 below 512,
// 0.4 above 2,048. Without a table, `attention` at every length.
TEST(AttentionBySeq, InterpolatesInLog2OfTheLength) {
  GpuEfficiency e;
  e.attention = 0.7;
  EXPECT_DOUBLE_EQ(e.AttentionAt(4096), 0.7);
  e.attention_by_seq = {{512, 0.2}, {2048, 0.4}};
  EXPECT_DOUBLE_EQ(e.AttentionAt(1024), 0.3);
  EXPECT_DOUBLE_EQ(e.AttentionAt(256), 0.2);
  EXPECT_DOUBLE_EQ(e.AttentionAt(512), 0.2);
  EXPECT_DOUBLE_EQ(e.AttentionAt(2048), 0.4);
  EXPECT_DOUBLE_EQ(e.AttentionAt(100000), 0.4);
}

// dgx-h100: FlashAttention-2's causal head-dim-128 bars, 163 ... 328 TFLOP/s at 512 ... 16k, over
// the 989 TFLOP/s bf16 peak. At 2,048: 265 / 989; at 3,000, log2(3000 / 2048) = 0.550747 of the
// way from 265 to 294: 280.971668 / 989; at 16k and beyond 328 / 989 (= `attention`, 0.332 to
// three places).
TEST(AttentionBySeq, TheH100DescriptionHoldsFlashAttention2sBars) {
  StatusOr<HardwareSpec> hw = LoadHardware("dgx-h100");
  ASSERT_TRUE(hw.ok()) << hw.status().message();
  const GpuEfficiency& e = hw->gpu.efficiency;
  ASSERT_EQ(e.attention_by_seq.size(), 6u);
  EXPECT_DOUBLE_EQ(e.AttentionAt(2048), 265.0 / 989.0);
  EXPECT_NEAR(e.AttentionAt(3000), (265.0 + 29.0 * std::log2(3000.0 / 2048.0)) / 989.0, 1e-12);
  EXPECT_DOUBLE_EQ(e.AttentionAt(16384), 328.0 / 989.0);
  EXPECT_DOUBLE_EQ(e.AttentionAt(131072), 328.0 / 989.0);
  EXPECT_NEAR(e.attention, 328.0 / 989.0, 5e-4);
}

// The kernel's length is the sequence, or its 1 / cp chunk under context parallelism: 4,096
// tokens at cp 2 run kernels over 2,048 keys.
TEST(AttentionBySeq, TheKernelSeesTheSequenceOrItsCpChunk) {
  const ModelSpec m = testing::TinyModel(4096);
  Layout l;
  l.dp = 1;
  l.gbs = 1;
  EXPECT_EQ(testing::FindOp(LayerOps(m, l, false), "attention").attention_seq, 4096);
  l.cp = 2;
  EXPECT_EQ(testing::FindOp(LayerOps(m, l, false), "attention").attention_seq, 2048);
}

// A plan file writes the table back as the description gave it (whole TFLOP/s), and reads it
// back the same.
TEST(AttentionBySeq, ThePlanFileKeepsTheTable) {
  StatusOr<HardwareSpec> hw = LoadHardware("dgx-a100-80gb");
  ASSERT_TRUE(hw.ok()) << hw.status().message();
  const std::string text = HardwareYaml(*hw);
  EXPECT_NE(text.find("attention_tflops: [99, 133, 155, 173, 182, 189]"), std::string::npos) << text;
  StatusOr<HardwareSpec> back = ParseHardwareYaml(text, "plan.yaml");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->gpu.efficiency.attention_by_seq, hw->gpu.efficiency.attention_by_seq);
}

// Bad tables are refused at their field, with what was expected.
TEST(AttentionBySeq, BadTablesAreRefused) {
  StatusOr<HardwareSpec> hw = LoadHardware("dgx-h100");
  ASSERT_TRUE(hw.ok());
  const std::string good = HardwareYaml(*hw);
  const std::string lens = "attention_seq_lens: [512, 1024, 2048, 4096, 8192, 16384]";
  const std::string rates = "attention_tflops: [163, 221, 265, 294, 308, 328]";
  ASSERT_NE(good.find(lens), std::string::npos);
  ASSERT_NE(good.find(rates), std::string::npos);
  auto with = [&](const std::string& from, const std::string& to) {
    std::string t = good;
    t.replace(t.find(from), from.size(), to);
    return ParseHardwareYaml(t, "bad.yaml");
  };
  struct Case {
    std::string from, to, want;
  };
  for (const Case& c : {Case{rates, "attention_tflops: [163, 221]", "one for each of attention_tflops"},
                        Case{lens, "attention_seq_lens: [1024, 512, 2048, 4096, 8192, 16384]", "ascending sequence lengths"},
                        Case{rates, "attention_tflops: [163, 221, 265, 294, 308, 2000]", "2000 TFLOP/s is above the 16-bit peak"},
                        Case{lens, "attention_seq_lenz: [512, 1024, 2048, 4096, 8192, 16384]", "give both or neither"}}) {
    StatusOr<HardwareSpec> r = with(c.from, c.to);
    ASSERT_FALSE(r.ok()) << c.to;
    EXPECT_NE(r.status().message().find(c.want), std::string::npos) << r.status().message();
  }
}

// How many times as long `a`'s forward takes as `b`'s on `hw`, less each one kernel's latency.
double ForwardRatio(const HardwareSpec& hw, const Op& a, const Op& b) {
  const double latency = hw.gpu.efficiency.kernel_latency_s;
  return (OpForwardTime(hw.gpu, DType::kBf16, a) - latency) / (OpForwardTime(hw.gpu, DType::kBf16, b) - latency);
}

// attention=flash1: FlashAttention (v1)'s bars of the same A100 figure, causal head dim 128,
// 55 ... 83 TFLOP/s (efficiency.attention_v1_tflops). One layer of h 2048, 16 heads of 128, at
// s = T = 2,048: the kernel is compute-bound (17.2 GFLOP against 33.6 MB), so its forward time
// less the one kernel's latency is executed FLOPs / (312 TFLOP/s x rate): FlashAttention-2 at
// 155 / 312 and v1 at 69 / 312, v1 155 / 69 times as long. The plan file keeps the v1 row; a
// description without one (the H200's) refuses attention=flash1.
TEST(AttentionBySeq, FlashAttentionV1RunsAtItsOwnBars) {
  StatusOr<HardwareSpec> hw = LoadHardware("dgx-a100-80gb");
  ASSERT_TRUE(hw.ok()) << hw.status().message();
  EXPECT_DOUBLE_EQ(hw->gpu.efficiency.AttentionV1At(2048), 69.0 / 312.0);
  const ModelSpec m = testing::GptModel(2, 2048, 16, 8192, 2048);
  StatusOr<Layout> v2 = ParseLayout("tp=1,pp=1,dp=1,mbs=1,gbs=1,attention=flash");
  StatusOr<Layout> v1 = ParseLayout("tp=1,pp=1,dp=1,mbs=1,gbs=1,attention=flash1");
  ASSERT_TRUE(v1.ok() && v2.ok());
  const Op a1 = testing::FindOp(LayerOps(m, *v1, false), "attention");
  const Op a2 = testing::FindOp(LayerOps(m, *v2, false), "attention");
  EXPECT_EQ(a1.attention_impl, AttentionImpl::kFlash1);
  EXPECT_EQ(a2.attention_impl, AttentionImpl::kFlash);
  EXPECT_EQ(a1.executed_flops, a2.executed_flops);
  EXPECT_NEAR(ForwardRatio(*hw, a1, a2), 155.0 / 69.0, 1e-9);

  const std::string text = HardwareYaml(*hw);
  EXPECT_NE(text.find("attention_v1_tflops: [55, 62, 69, 76, 80, 83]"), std::string::npos) << text;
  StatusOr<HardwareSpec> back = ParseHardwareYaml(text, "plan.yaml");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->gpu.efficiency.attention_v1_by_seq, hw->gpu.efficiency.attention_v1_by_seq);
  std::string bad = text;
  bad.replace(bad.find("[55, 62, 69, 76, 80, 83]"), 24, "[55, 62]");
  StatusOr<HardwareSpec> refused = ParseHardwareYaml(bad, "bad.yaml");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("one rate for each of attention_seq_lens"), std::string::npos)
      << refused.status().message();

  StatusOr<HardwareSpec> h200 = LoadHardware("dgx-h200");
  ASSERT_TRUE(h200.ok()) << h200.status().message();
  const LayoutCheck check = CheckLayout(*v1, m, *h200, 1);
  EXPECT_FALSE(check.ok());
  EXPECT_NE(check.ToStatus().message().find("attention_v1_tflops"), std::string::npos) << check.ToStatus().message();
}

// attention=cudnn: Transformer Engine's FusedAttention, cuDNN's flash kernel, which TE picks on
// Hopper. Its H100 rates are FlashAttention-2's bars times cuDNN's measured speed-up over
// FlashAttention-2 in TE's attention benchmark on an H100 80GB HBM3 (docs/examples/attention/
// attention.ipynb @ 88c0c9143), as it prints them: 1.5968 at 2,048 keys (0.5850 vs 0.3664 ms)
// and 1.5877 at 8,192 (11.8879 vs 7.4875 ms). At 2,048: round(265 x 1.5968) = 423 TFLOP/s; at 8,192: round(308 x 1.5877)
// = 489. One layer of h 2048, 16 heads of 128, at s = 8,192 (compute-bound: 4 x 8192^2 x 2048
// = 550 GFLOP against 134 MB): the cuDNN forward takes 308 / 489 of FlashAttention-2's, less
// the one kernel's latency. The A100 description has no cuDNN rates (TE runs FlashAttention
// there): refused, and megatron-core-2024's default attention=cudnn becomes flash on it.
TEST(AttentionBySeq, CudnnRunsAtItsMeasuredSpeedUp) {
  StatusOr<HardwareSpec> hw = LoadHardware("dgx-h100");
  ASSERT_TRUE(hw.ok()) << hw.status().message();
  EXPECT_DOUBLE_EQ(hw->gpu.efficiency.AttentionCudnnAt(2048), 423.0 / 989.0);
  EXPECT_DOUBLE_EQ(hw->gpu.efficiency.AttentionCudnnAt(8192), 489.0 / 989.0);
  const ModelSpec m = testing::GptModel(2, 2048, 16, 8192, 8192);
  StatusOr<Layout> flash = ParseLayout("tp=1,pp=1,dp=1,mbs=1,gbs=1,attention=flash");
  StatusOr<Layout> cudnn = ParseLayout("tp=1,pp=1,dp=1,mbs=1,gbs=1,attention=cudnn");
  ASSERT_TRUE(flash.ok() && cudnn.ok());
  EXPECT_EQ(FormatLayout(*cudnn).find("attention=cudnn") != std::string::npos, true);
  const Op c = testing::FindOp(LayerOps(m, *cudnn, false), "attention");
  const Op f = testing::FindOp(LayerOps(m, *flash, false), "attention");
  EXPECT_EQ(c.attention_impl, AttentionImpl::kCudnn);
  EXPECT_EQ(c.executed_flops, f.executed_flops);
  EXPECT_NEAR(ForwardRatio(*hw, c, f), 308.0 / 489.0, 1e-9);

  // The plan file writes the row back.
  const std::string text = HardwareYaml(*hw);
  EXPECT_NE(text.find("attention_cudnn_tflops: [260, 353, 423, 468, 489, 521]"), std::string::npos) << text;
  StatusOr<HardwareSpec> back = ParseHardwareYaml(text, "plan.yaml");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->gpu.efficiency.attention_cudnn_by_seq, hw->gpu.efficiency.attention_cudnn_by_seq);

  StatusOr<HardwareSpec> a100 = LoadHardware("dgx-a100-80gb");
  ASSERT_TRUE(a100.ok()) << a100.status().message();
  const LayoutCheck check = CheckLayout(*cudnn, m, *a100, 1);
  EXPECT_FALSE(check.ok());
  EXPECT_NE(check.ToStatus().message().find("attention_cudnn_tflops"), std::string::npos) << check.ToStatus().message();
  StatusOr<StackSpec> stack = LoadStack("megatron-core-2024");
  ASSERT_TRUE(stack.ok()) << stack.status().message();
  EXPECT_EQ(StackDefaultsOn(*stack, *hw).at("attention"), "cudnn");
  EXPECT_EQ(StackDefaultsOn(*stack, *a100).at("attention"), "flash");
}

}  // namespace
}  // namespace shardsim
