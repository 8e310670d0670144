// The simulator's ZeRO-2/3 transients (src/cost/memory.h ZeroTransientBytes, StageMemory)
// against the numbers worked out by hand for models/tiny.yaml's shape, fp32, dp = 2: what the
// runtime's buckets (runtime/exec/zero_buckets.h) hold, and nothing for ZeRO 0/1.
#include <gtest/gtest.h>

#include "src/cost/memory.h"
#include "tests/test_models.h"

namespace shardsim {
namespace {

// models/tiny.yaml: 4 layers, h 64, 4 heads of 16 (2 KV heads), SwiGLU 256, RMSNorm, RoPE,
// untied, vocab 512, 32 tokens. Per layer: attention 64 (64 + 2 x 32) + 64 x 64 = 12,288, MLP
// 3 x 64 x 256 = 49,152, two norms 128: 61,568 parameters, 246,272 B in fp32. Embedding
// 512 x 64 = 32,768 (131,072 B); final norm + head 64 + 32,768 = 32,832 (131,328 B). The
// stage (pp = 1) holds 4 x 61,568 + 32,768 + 32,832 = 311,872 parameters (1,247,488 B).
ModelSpec Tiny() { return testing::TinyModel(32); }

// overlap_dp off unless a test says otherwise: each bucket reduced before the next opens.
Layout Dp2(int zero) {
  Layout l;
  l.overlap_dp = false;
  l.dp = 2;
  l.mbs = 2;
  l.gbs = 8;
  l.zero = zero;
  l.dtype = DType::kFp32;
  l.attention = AttentionImpl::kUnfused;
  return l;
}

constexpr double kLayerBytes = 246272, kEmbedBytes = 131072, kHeadBytes = 131328;
constexpr double kStageBytes = 1247488;

TEST(ZeroMemoryModelTest, NoTransientsBelowZero2OrWithoutDp) {
  for (int zero : {0, 1}) {
    const ZeroTransients z = ZeroTransientBytes(Tiny(), Dp2(zero), 0);
    EXPECT_EQ(z.layer_grads + z.layer_params + z.head_grads + z.head_params + z.embed_grads, 0);
  }
  Layout one = Dp2(3);
  one.dp = 1;
  one.gbs = 4;
  EXPECT_EQ(ZeroTransientBytes(Tiny(), one, 0).layer_params, 0);
}

// ZeRO-2: one layer's bucket during its backward, the head's during the head's, the
// embedding's during the embedding's; no parameters gathered.
TEST(ZeroMemoryModelTest, Zero2BucketsAreOneUnitsGradients) {
  const ZeroTransients z = ZeroTransientBytes(Tiny(), Dp2(2), 0);
  EXPECT_DOUBLE_EQ(z.layer_grads, kLayerBytes);
  EXPECT_DOUBLE_EQ(z.head_grads, kHeadBytes);
  EXPECT_DOUBLE_EQ(z.embed_grads, kEmbedBytes);
  EXPECT_DOUBLE_EQ(z.layer_params + z.head_params, 0);
}

// StageMemory, ZeRO-2 against ZeRO-1 on the same layout: weights and optimizer states equal;
// gradients 1,247,488 / 2 = 623,744 persistent plus the layer bucket 246,272 (a layer's
// backward is the peak moment: its workspace + bucket exceeds the head's logits + bucket) =
// 870,016 B, which is what the runtime measures (shardsim run --json, gradients); other equal.
TEST(ZeroMemoryModelTest, Zero2StageMemoryShardsGradientsPlusOneBucket) {
  const HardwareSpec hw;
  const MemoryBreakdown z1 = StageMemory(Tiny(), hw, Dp2(1), 0);
  const MemoryBreakdown z2 = StageMemory(Tiny(), hw, Dp2(2), 0);
  EXPECT_DOUBLE_EQ(z1.gradients, kStageBytes);
  EXPECT_DOUBLE_EQ(z2.gradients, kStageBytes / 2 + kLayerBytes);
  EXPECT_DOUBLE_EQ(z2.weights, z1.weights);
  EXPECT_DOUBLE_EQ(z2.optimizer, z1.optimizer);
  EXPECT_DOUBLE_EQ(z2.other, z1.other);
  EXPECT_DOUBLE_EQ(z2.activations, z1.activations);
}

// ZeRO-3 adds sharded weights (623,744 B) and, under other, the running layer's gathered
// parameters plus the prefetched next layer's: 2 x 246,272; one without prefetch.
TEST(ZeroMemoryModelTest, Zero3GathersOneOrTwoLayers) {
  const HardwareSpec hw;
  const MemoryBreakdown z2 = StageMemory(Tiny(), hw, Dp2(2), 0);
  const MemoryBreakdown z3 = StageMemory(Tiny(), hw, Dp2(3), 0);
  EXPECT_DOUBLE_EQ(z3.weights, kStageBytes / 2);
  EXPECT_DOUBLE_EQ(z3.gradients, z2.gradients);
  EXPECT_DOUBLE_EQ(z3.other, z2.other + 2 * kLayerBytes);
  Layout no_prefetch = Dp2(3);
  no_prefetch.prefetch = false;
  EXPECT_DOUBLE_EQ(StageMemory(Tiny(), hw, no_prefetch, 0).other, z2.other + kLayerBytes);
}

// Buckets and gathers below one layer (DeepSpeed's reduce_bucket_size and
// stage3_max_live_parameters): the tiny layer's largest tensor is the MLP's fused gate + up,
// 64 x 2 x 256 = 32,768 parameters (QKV 64 x 128 = 8,192; down 16,384; output 4,096), of its
// 61,568. A 10,000-parameter bucket holds that tensor: 32,768 x 4 B = 131,072 B; a 40,000 one
// holds 40,000 x 4 = 160,000 B. A 20,000-parameter live limit gathers the tensor alone
// (131,072 B), a 50,000 one 200,000 B; 61,568 and more gather whole layers as before.
TEST(ZeroMemoryModelTest, BucketsAndGathersBelowOneLayer) {
  EXPECT_DOUBLE_EQ(LargestLayerTensorOnRank(Tiny(), Dp2(2)), 32768);
  Layout l = Dp2(2);
  l.bucket_params = 10000;
  EXPECT_DOUBLE_EQ(ZeroTransientBytes(Tiny(), l, 0).layer_grads, 131072);
  l.bucket_params = 40000;
  EXPECT_DOUBLE_EQ(ZeroTransientBytes(Tiny(), l, 0).layer_grads, 160000);
  Layout z3 = Dp2(3);
  z3.live_params = 20000;
  EXPECT_DOUBLE_EQ(ZeroTransientBytes(Tiny(), z3, 0).layer_params, 131072);
  z3.live_params = 50000;
  EXPECT_DOUBLE_EQ(ZeroTransientBytes(Tiny(), z3, 0).layer_params, 200000);
  z3.live_params = 61568;  // one layer fits, two do not: no prefetch
  EXPECT_DOUBLE_EQ(ZeroTransientBytes(Tiny(), z3, 0).layer_params, kLayerBytes);
}

// Tied embeddings (pp = 1): the head's gradient lands in the embedding table's bucket, which
// stays open until the embedding's backward, so every layer's moment holds it too:
// 246,272 + 131,072 B.
TEST(ZeroMemoryModelTest, TiedTableBucketStaysOpenThroughTheLayers) {
  ModelSpec m = Tiny();
  m.tied_embeddings = true;
  const ZeroTransients z = ZeroTransientBytes(m, Dp2(2), 0);
  EXPECT_DOUBLE_EQ(z.layer_grads, kLayerBytes + kEmbedBytes);
  EXPECT_DOUBLE_EQ(z.head_grads, 64 * 4 + kEmbedBytes);  // the final norm's gain + the table
}

// overlap_dp (ZeroBuckets: a bucket's reduce-scatter completes when the next bucket's backward
// ends): during the top layer's backward the head's bucket (131,328 B) is still in flight with
// this rank's half of its sum (65,664 B); during a lower layer's, the layer above's (246,272 B
// + 123,136 B), whose activations are freed by then. In tiny the top layer's moment is the
// peak: a lower layer's holds 369,408 - 196,992 = 172,416 B more in buckets but has freed a
// layer's stored activations (two 32-token sequences), which are more. So gradients 623,744 +
// 246,272 + 131,328 = 1,001,344 B, other ZeRO-1's + 65,664 B, activations unchanged.
TEST(ZeroMemoryModelTest, OverlapKeepsThePreviousBucketInFlight) {
  Layout l = Dp2(2);
  l.overlap_dp = true;
  const ZeroTransients z = ZeroTransientBytes(Tiny(), l, 0);
  EXPECT_DOUBLE_EQ(z.head_in_flight_grads, kHeadBytes);
  EXPECT_DOUBLE_EQ(z.head_in_flight_other, kHeadBytes / 2);
  EXPECT_DOUBLE_EQ(z.layer_in_flight_grads, kLayerBytes);
  EXPECT_DOUBLE_EQ(z.layer_in_flight_other, kLayerBytes / 2);
  const HardwareSpec hw;
  const MemoryBreakdown z1 = StageMemory(Tiny(), hw, Dp2(1), 0);
  const MemoryBreakdown mem = StageMemory(Tiny(), hw, l, 0);
  EXPECT_DOUBLE_EQ(mem.gradients, 1001344);
  EXPECT_DOUBLE_EQ(mem.other, z1.other + 65664);
  EXPECT_DOUBLE_EQ(mem.activations, z1.activations);
  // Nothing in flight without the overlap, and nothing below ZeRO-2.
  EXPECT_DOUBLE_EQ(ZeroTransientBytes(Tiny(), Dp2(2), 0).layer_in_flight_grads, 0);
  Layout z1_overlap = Dp2(1);
  z1_overlap.overlap_dp = true;
  EXPECT_DOUBLE_EQ(ZeroTransientBytes(Tiny(), z1_overlap, 0).head_in_flight_grads, 0);
}

// bf16 (Megatron-LM's mixed precision and the runtime's): buckets hold fp32 gradients,
// gathered parameters are bf16. A layer's 61,568 parameters: bucket 61,568 x 4 = 246,272 B,
// gathered 61,568 x 2 = 123,136 B (two with prefetch: 246,272 B); the embedding's bucket
// 32,768 x 4 = 131,072 B; the head's gathered weights 32,832 x 2 = 65,664 B. With dp = 2 the
// persistent ZeRO-3 states are 311,872 / 2 x 2 = 311,872 B of weights and, with the layer
// bucket, 311,872 / 2 x 4 + 246,272 = 870,016 B of gradients (the fp32 figures above).
TEST(ZeroMemoryModelTest, Bf16BucketsAreFp32AndGatheredParametersBf16) {
  Layout l = Dp2(3);
  l.dtype = DType::kBf16;
  const ZeroTransients z = ZeroTransientBytes(Tiny(), l, 0);
  EXPECT_DOUBLE_EQ(z.layer_grads, 246272);
  EXPECT_DOUBLE_EQ(z.layer_params, 246272);
  EXPECT_DOUBLE_EQ(z.embed_grads, 131072);
  EXPECT_DOUBLE_EQ(z.embed_params, 65536);  // 32,768 x 2
  EXPECT_DOUBLE_EQ(z.head_params, 65664);
  const MemoryBreakdown mem = StageMemory(Tiny(), HardwareSpec{}, l, 0);
  EXPECT_DOUBLE_EQ(mem.weights, 311872);
  EXPECT_DOUBLE_EQ(mem.gradients, 870016);
}

}  // namespace
}  // namespace shardsim
