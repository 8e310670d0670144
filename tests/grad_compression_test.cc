// Gradient compression's sizes (src/cost/grad_compression.h), derived by hand from PowerSGD's
// rank rule r = floor(n m / (R (n + m))), at least 1, and "sent whole unless r (n + m) < n m".
#include "src/cost/grad_compression.h"

#include <gtest/gtest.h>

#include "src/layout/validate.h"
#include "tests/test_models.h"

namespace shardsim {
namespace {

TEST(GradCompression, RankRule) {
  // 64 x 64 at R = 4: floor(4096 / (4 x 128)) = 8; 8 x 128 = 1024 < 4096, compressed.
  EXPECT_EQ(PowerSgdRank(64, 64, 4), 8);
  // At R = 100: floor(4096 / 12800) = 0, raised to 1; 128 < 4096.
  EXPECT_EQ(PowerSgdRank(64, 64, 100), 1);
  // 1024 x 4096 at R = 4: floor(4194304 / 20480) = floor(204.8) = 204.
  EXPECT_EQ(PowerSgdRank(1024, 4096, 4), 204);
  // Sent whole: no compression (R = 1), a vector, and a 2 x 2 whose rank-1 factors (4 elements)
  // are not smaller than it (4).
  EXPECT_EQ(PowerSgdRank(64, 64, 1), 0);
  EXPECT_EQ(PowerSgdRank(1, 64, 4), 0);
  EXPECT_EQ(PowerSgdRank(2, 2, 1.5), 0);
}

TEST(GradCompression, TinyLayer) {
  // models/tiny: hidden 64, 4 heads of 16 (q 64), 2 KV heads (k, v 32), SwiGLU ffn 256, RMSNorm.
  const ModelSpec m = testing::TinyModel(64);
  Layout l;
  l.dp = 2;
  l.grad_compression = 4;
  // q, o (64 x 64): r 8, P 512, Q 512. k, v (32 x 64): floor(2048 / 384) = 5, P 160, Q 320.
  // gate, up (256 x 64): floor(16384 / 1280) = 12, P 3072, Q 768; down (64 x 256): P 768, Q 3072.
  // P = 512 + 160 + 160 + 512 + 3072 + 3072 + 768 = 8256; Q = 512 + 320 + 320 + 512 + 768 + 768
  // + 3072 = 6272; matrices 4096 + 2048 + 2048 + 4096 + 3 x 16384 = 61440; the two norms (128)
  // whole: the layer's 61568 parameters.
  const CompressedGradients c = LayerGradients(m, l, false, 61568);
  EXPECT_DOUBLE_EQ(c.p, 8256);
  EXPECT_DOUBLE_EQ(c.q, 6272);
  EXPECT_DOUBLE_EQ(c.whole, 128);
  EXPECT_DOUBLE_EQ(c.matrices, 61440);
  EXPECT_DOUBLE_EQ(c.first(), 8384);
  EXPECT_EQ(c.shapes.size(), 7u);
  // FLOPs: 3 GEMMs of 2 n m r each: 6 x (4096 x 8 x 2 + 2048 x 5 x 2 + 16384 x 12 x 3).
  EXPECT_DOUBLE_EQ(c.flops, 6.0 * (4096 * 8 * 2 + 2048 * 5 * 2 + 16384 * 12 * 3));
}

TEST(GradCompression, StateOnTheOnlyStage) {
  const ModelSpec m = testing::TinyModel(64);
  Layout l;
  l.dp = 2;
  l.grad_compression = 4;
  // Four layers as above: 4 x (61440 + 128 + 8256 + 6272) = 304384. The embedding and the LM
  // head (512 x 64, untied): floor(32768 / 2304) = 14, P 7168, Q 896, each 32768 + 8064 = 40832;
  // the final norm (64) whole. 4 bytes each: 4 x (304384 + 2 x 40832 + 64) = 1,544,448.
  EXPECT_DOUBLE_EQ(CompressionStateBytes(m, l, 0), 1544448);
  // Nothing without replicas, without compression or with ZeRO (which validation refuses).
  Layout one = l;
  one.dp = 1;
  EXPECT_EQ(CompressionStateBytes(m, one, 0), 0);
  Layout zero1 = l;
  zero1.zero = 1;
  EXPECT_FALSE(CompressesGradients(zero1));
}

TEST(GradCompression, RefusedWithZero) {
  const ModelSpec m = testing::TinyModel(64);
  Layout l;
  l.dp = 2;
  l.gbs = 8;
  l.zero = 1;
  l.grad_compression = 4;
  StatusOr<HardwareSpec> hw = LoadHardware("cpu-host");
  ASSERT_TRUE(hw.ok());
  const LayoutCheck check = CheckLayout(l, m, *hw, 2);
  ASSERT_FALSE(check.ok());
  EXPECT_NE(check.ToStatus().message().find("PowerSGD"), std::string::npos) << check.ToStatus().message();
}

}  // namespace
}  // namespace shardsim
