// FLOP counts summed from the per-op model reproduce Megatron's closed forms
// (Narayanan et al. 2021, SC'21, eq. 3 and its no-recompute variant).
#include <gtest/gtest.h>

#include "src/cost/ops.h"
#include "tests/test_models.h"

namespace shardsim {
namespace {

// F = 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) with full recompute (4 passes over the layers,
// 3 over the logit layer) and 72 B s l h^2 (1 + s/(6h) + V/(12 l h)) without.
// GPT-3 175B as in the paper: l = 96, h = 12288, s = 2048, V = 51200, B = 1536.
TEST(MegatronFlopsTest, ReproducesEquation3) {
  const double l = 96, h = 12288, s = 2048, V = 51200, B = 1536;
  const ModelSpec m = testing::GptModel(96, 12288, 96, 51200, 2048);
  Layout lay;
  lay.dp = 1;
  lay.gbs = 1536;
  lay.recompute = Recompute::kFull;
  const double with = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
  const double without = 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
  EXPECT_NEAR(IterationFlops(m, lay, true) / with, 1.0, 1e-12);
  EXPECT_NEAR(IterationFlops(m, lay, false) / without, 1.0, 1e-12);
  // The ratio HFU/MFU under full recompute: 4/3 on the layers, 1 on the logits.
  lay.recompute = Recompute::kNone;
  EXPECT_NEAR(IterationFlops(m, lay, true) / without, 1.0, 1e-12);
  // Unfused attention counts the same FLOPs (its two batched GEMMs are the 4 b s^2 h).
  lay.attention = AttentionImpl::kUnfused;
  EXPECT_NEAR(IterationFlops(m, lay, false) / without, 1.0, 1e-12);
}

// Per rank, TP divides every matmul of a layer: the layer's forward FLOPs on one of t = 8
// ranks are 1/8 of the unpartitioned ones (24 b s h^2 + 4 b s^2 h for b = 1).
TEST(MegatronFlopsTest, TensorParallelSplitsLayerFlops) {
  const double h = 12288, s = 2048;
  const ModelSpec m = testing::GptModel(96, 12288, 96, 51200, 2048);
  Layout lay;
  lay.tp = 8;
  lay.dp = 1;
  lay.gbs = 1;
  double fwd = 0;
  for (const Op& op : LayerOps(m, lay, false)) fwd += op.flops;
  EXPECT_NEAR(fwd / ((24 * s * h * h + 4 * s * s * h) / 8), 1.0, 1e-12);
}

}  // namespace
}  // namespace shardsim
