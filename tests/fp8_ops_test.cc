// fp8 as Megatron-Core with Transformer Engine runs it (src/cost/ops.h, Op::bf16_under_fp8 and
// Op::fp8_cast_*_bytes): the TE GEMMs quantize their inputs and output gradients in separate
// memory-bound kernels, the output layer and attention stay 16-bit. The expected times are
// derived from the H100 description's figures, not from the code under test.
#include <gtest/gtest.h>

#include "src/cost/op_time.h"
#include "src/cost/memory.h"
#include "src/cost/ops.h"
#include "src/hardware/hardware_spec.h"
#include "tests/find_op.h"
#include "tests/test_models.h"

namespace shardsim {
namespace {

// One GPU, one sequence per micro-batch and iteration, at `dtype`.
Layout OneSequence(DType dtype) {
  Layout l;
  l.dp = 1;
  l.mbs = 1;
  l.gbs = 1;
  l.dtype = dtype;
  return l;
}

// One GPT layer, h = 4096, 32 heads, s = 2048, mbs 1, tp 1: T = 2048 tokens.
//   qkv  (T x 3h) = (T x h) x (h x 3h): input quantized by the fused norm, so no forward cast;
//        backward casts dY: 4 bytes x T x 3h = 4 x 2048 x 12288 = 100,663,296 bytes.
//   proj (T x h) = (T x h) x (h x h): forward casts its input, 4 x T x h = 33,554,432 bytes;
//        backward dY the same.
//   mlp down (T x h) = (T x 4h) x (4h x h): forward 4 x T x 4h = 134,217,728; backward 4 x T x h.
// Under bf16 no op has a cast.
TEST(Fp8OpsTest, TransformerEngineGemmsQuantizeTheirOperands) {
  const ModelSpec m = testing::GptModel(2, 4096, 32, 51200, 2048);
  Layout l = OneSequence(DType::kFp8);
  const std::vector<Op> ops = LayerOps(m, l, false);
  EXPECT_EQ(testing::FindOp(ops, "qkv").fp8_cast_forward_bytes, 0);
  EXPECT_EQ(testing::FindOp(ops, "qkv").fp8_cast_backward_bytes, 100663296.0);
  EXPECT_EQ(testing::FindOp(ops, "proj").fp8_cast_forward_bytes, 33554432.0);
  EXPECT_EQ(testing::FindOp(ops, "proj").fp8_cast_backward_bytes, 33554432.0);
  EXPECT_EQ(testing::FindOp(ops, "mlp_down").fp8_cast_forward_bytes, 134217728.0);
  EXPECT_EQ(testing::FindOp(ops, "mlp_down").fp8_cast_backward_bytes, 33554432.0);
  EXPECT_EQ(testing::FindOp(ops, "mlp_up").fp8_cast_forward_bytes, 0);  // the norm quantizes fc1's input

  l.dtype = DType::kBf16;
  for (const Op& op : LayerOps(m, l, false)) {
    EXPECT_EQ(op.fp8_cast_forward_bytes, 0) << op.name;
    EXPECT_EQ(op.fp8_cast_backward_bytes, 0) << op.name;
  }
}

// The cast is a kernel of its own after the GEMM's roofline: proj's fp8 forward time is the
// same op priced without casts plus one launch (kernel_latency) plus 33,554,432 bytes at the
// achieved HBM bandwidth (memory_bandwidth x efficiency.memory).
TEST(Fp8OpsTest, CastsAddAKernelAndTheirBytes) {
  const StatusOr<HardwareSpec> hw = LoadHardware("dgx-h100");
  ASSERT_TRUE(hw.ok()) << hw.status().message();
  const GpuSpec& gpu = hw->gpu;
  const ModelSpec m = testing::GptModel(2, 4096, 32, 51200, 2048);
  Layout l = OneSequence(DType::kFp8);
  const Op proj = testing::FindOp(LayerOps(m, l, false), "proj");
  Op bare = proj;
  bare.fp8_cast_forward_bytes = bare.fp8_cast_backward_bytes = 0;
  const double cast_s = gpu.efficiency.kernel_latency_s +
                        33554432.0 / (gpu.memory_bandwidth * gpu.efficiency.memory);
  EXPECT_NEAR(OpForwardTime(gpu, DType::kFp8, proj), OpForwardTime(gpu, DType::kFp8, bare) + cast_s, 1e-15);
  EXPECT_NEAR(OpBackwardTime(gpu, DType::kFp8, proj), OpBackwardTime(gpu, DType::kFp8, bare) + cast_s, 1e-15);
}

// The LM head is not a Transformer Engine module: under fp8 it runs at the bf16 rate, so its
// time is the bf16 time of the same op (same shape, same bytes), and no cast is added.
TEST(Fp8OpsTest, TheOutputLayerStaysBf16) {
  const StatusOr<HardwareSpec> hw = LoadHardware("dgx-h100");
  ASSERT_TRUE(hw.ok()) << hw.status().message();
  const ModelSpec m = testing::GptModel(2, 4096, 32, 51200, 2048);
  Layout l = OneSequence(DType::kFp8);
  const Op head = testing::FindOp(HeadOps(m, l), "lm_head");
  EXPECT_TRUE(head.bf16_under_fp8);
  EXPECT_EQ(head.fp8_cast_forward_bytes, 0);
  EXPECT_DOUBLE_EQ(OpForwardTime(hw->gpu, DType::kFp8, head), OpForwardTime(hw->gpu, DType::kBf16, head));
  // A TE GEMM of the layer does run faster at fp8 (1979 against 989 TFLOP/s peak).
  const Op up = testing::FindOp(LayerOps(m, l, false), "mlp_up");
  EXPECT_LT(OpForwardTime(hw->gpu, DType::kFp8, up), OpForwardTime(hw->gpu, DType::kBf16, up));
}


// An fp8 GEMM runs at the fp8 peak times efficiency.matmul_fp8 (H100: 1979 TFLOP/s x 0.709 =
// 1403 TFLOP/s, the MAMF fp8 figure), not at matmul's 0.803, times the shape factor of the H100's
// GEMM table (op_time.h). mlp_up of the layer above: T = 2048 rows, h = 4096 -> 4h = 16384
// columns, K = 4096: 2 x 2048 x 4096 x 16384 = 274,877,906,944 FLOPs. The table
// (hardware/gemm/sm90-bf16.yaml) at b 1, m 2048, k 4096 and n clamped to 4096 reads
// 752.315 TFLOP/s, times the waves of the real output
// against the clamped one: 2048 x 16384 in 128 x 256 tiles is 1024 tiles on 132 SMs, 8 waves,
// 1024/1056; 2048 x 4096 is 256 tiles, 2 waves, 256/264: ratio 1. s = 752.315 / 804.715 =
// 0.934884, so the forward is kernel_latency 5 us + 274.88e9 / (1979e12 x 0.709 x 0.934884) =
// 5 + 209.55 = 214.55 us; mlp_up has no forward cast.
TEST(Fp8OpsTest, Fp8GemmsRunAtTheirOwnEfficiency) {
  const StatusOr<HardwareSpec> hw = LoadHardware("dgx-h100");
  ASSERT_TRUE(hw.ok()) << hw.status().message();
  const ModelSpec m = testing::GptModel(2, 4096, 32, 51200, 2048);
  const Op up = testing::FindOp(LayerOps(m, OneSequence(DType::kFp8), false), "mlp_up");
  EXPECT_NEAR(OpForwardTime(hw->gpu, DType::kFp8, up), 214.55e-6, 0.01e-6);
}

// Under fp8 the GEMMs keep their quantized inputs for the weight gradient: the QKV input, the
// MLP input, the projection input and fc2's input (the GELU output) at 1 byte instead of 2.
// One GPT layer, tp 1, no SP, no recompute, s = 2048, mbs 1, unfused attention: the saved
// bytes fall by sb x (h + h + q + ffn) x (2 - 1) = 2048 x (4096 + 4096 + 4096 + 16384) =
// 58,720,256. A fused (flash) kernel keeps its 16-bit output O for its own backward beside the
// projection's fp8 copy, so there the projection input costs 1 byte more instead of 1 less:
// 2048 x (4096 + 4096 + 16384 - 4096) = 41,943,040.
TEST(Fp8OpsTest, GemmInputsAreSavedInFp8) {
  const ModelSpec m = testing::GptModel(2, 4096, 32, 51200, 2048);
  for (const auto& [attention, saved] : {std::pair{AttentionImpl::kUnfused, 58720256.0},
                                          std::pair{AttentionImpl::kFlash, 41943040.0}}) {
    Layout l = OneSequence(DType::kBf16);
    l.recompute = Recompute::kNone;
    l.attention = attention;
    const double bf16 = LayerActivationBytes(m, l, false);
    l.dtype = DType::kFp8;
    EXPECT_DOUBLE_EQ(bf16 - LayerActivationBytes(m, l, false), saved) << AttentionName(attention);
  }
}

// Transformer Engine keeps an fp8 copy of each layer GEMM's weight and its transpose across an
// iteration's micro-batches: 2 bytes per parameter of the layers' attention and MLP GEMMs
// (biases included, as the weights' tensors; not norms, embeddings or the head). One GPT layer
// at h = 4096 with biases: attention 4096 x 12288 + 12288 + 4096 x 4096 + 4096 = 67,125,248,
// MLP 2 x 4096 x 16384 + 16384 + 4096 = 134,238,208; two layers on one stage: 2 x 2 x
// 201,363,456 = 805,453,824 bytes. With tp = 2 the weights and the column-parallel biases halve
// and the two row-parallel biases (4,096 each) stay whole on every rank: a layer's 201,363,456 / 2
// + 2 x 4,096 / 2 = 100,685,824, two layers 2 x 2 x 100,685,824 = 402,743,296 bytes.
// fp8_params=on stores the weights in fp8 instead (no extra copy), torchtitan's torchao float8
// (kernels=compiled) caches nothing, and bf16 has none.
TEST(Fp8OpsTest, TransformerEngineCachesFp8Weights) {
  const ModelSpec m = testing::GptModel(2, 4096, 32, 51200, 2048);
  Layout l = OneSequence(DType::kFp8);
  EXPECT_DOUBLE_EQ(Fp8CachedWeightBytes(m, l, 0), 805453824.0);
  l.tp = 2;
  EXPECT_DOUBLE_EQ(Fp8CachedWeightBytes(m, l, 0), 402743296.0);
  l.fp8_params = true;
  EXPECT_EQ(Fp8CachedWeightBytes(m, l, 0), 0);
  l.fp8_params = false;
  l.kernels = Kernels::kCompiled;  // torchtitan's torchao float8 casts per call: no cache
  EXPECT_EQ(Fp8CachedWeightBytes(m, l, 0), 0);
  l.kernels = Kernels::kFused;
  l.zero = 3;  // Transformer Engine's cache (and shardsim's runtime's) under ZeRO-3 too
  EXPECT_DOUBLE_EQ(Fp8CachedWeightBytes(m, l, 0), 402743296.0);
  l.dtype = DType::kBf16;
  EXPECT_EQ(Fp8CachedWeightBytes(m, l, 0), 0);
}

}  // namespace
}  // namespace shardsim
