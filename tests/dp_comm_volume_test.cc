// Data-parallel communication volumes under mixed precision, in the simulator's task graph
// (src/sim/program.cc) and the estimate's table (src/cost/estimate.cc): gradients are
// reduced at their stored width (bf16 training: fp32, as Megatron-LM's
// accumulate_allreduce_grads_in_fp32 and the runtime do; fp16: fp16), parameters gathered at
// the weights' width (2 bytes for both).
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "src/cost/estimate.h"
#include "src/sim/program.h"
#include "tests/test_models.h"

namespace shardsim {
namespace {

// models/tiny.yaml's shape (tests/zero_memory_model_test.cc): 61,568 parameters per layer,
// 311,872 on the one stage; dp = 2, two micro-batches of 2. The gradient units (a bucket each,
// bucket_params 0) are the layers, the embedding table (512 x 64 = 32,768) and the final norm +
// untied LM head (64 + 32,768 = 32,832): 4 x 61,568 + 32,768 + 32,832 = 311,872.
constexpr double kLayerParams = 61568, kStageParams = 311872;
constexpr double kEmbeddingParams = 32768, kHeadParams = 32832;

HardwareSpec TwoGpus() { return testing::TestCluster(1, 2, "300 GB/s", "3 us", "200 Gb/s", "5 us", 1); }

Layout Resolved(const std::string& spec) {
  StatusOr<Layout> parsed = ParseLayout(spec);
  CHECK(parsed.ok()) << parsed.status().message();
  StatusOr<Layout> l = ResolveLayoutFor(*parsed, 2, TwoGpus());
  CHECK(l.ok()) << l.status().message();
  return *l;
}

// Per DP collective task name: its sizes in issue order.
std::map<std::string, std::vector<double>> DpTasks(const std::string& spec) {
  const IterationProgram p = BuildIteration(testing::TinyModel(32), TwoGpus(), Resolved(spec));
  std::map<std::string, std::vector<double>> out;
  const StageProgram& s = p.stages[0];
  for (const TaskSpec& t : s.tasks) {
    if (t.category == Category::kDp) out[s.names[t.name]].push_back(t.bytes);
  }
  return out;
}

// The sizes of one iteration's reductions, in backward order: the head, layers 3..0, the
// embeddings, at `bytes` per parameter.
std::vector<double> Backward(double bytes) {
  return {kHeadParams * bytes, kLayerParams * bytes, kLayerParams * bytes, kLayerParams * bytes,
          kLayerParams * bytes, kEmbeddingParams * bytes};
}

// ZeRO-0, bf16 with overlap_dp: one fp32 all-reduce per unit in the last micro-batch's
// backward, 61,568 x 4 = 246,272 B per layer.
TEST(DpCommVolumeTest, Bf16AllReducesFp32Gradients) {
  const auto tasks = DpTasks("dp=2,mbs=2,gbs=8,zero=0,dtype=bf16");
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_EQ(tasks.at("dp gradient all-reduce"), Backward(4));
}

// ZeRO-0 without overlap_dp: one all-reduce of all 311,872 x 4 = 1,247,488 B after the backward.
TEST(DpCommVolumeTest, WithoutOverlapZero0AllReducesOnce) {
  const auto tasks = DpTasks("dp=2,mbs=2,gbs=8,zero=0,dtype=bf16,overlap_dp=off");
  EXPECT_EQ(tasks.at("dp gradient all-reduce"), std::vector<double>{kStageParams * 4});
}

// ZeRO-1, bf16: fp32 reduce-scatters as above, once (the last micro-batch); after the step each
// unit's bf16 parameters all-gathered (2 bytes), in the same order.
TEST(DpCommVolumeTest, Bf16ReduceScattersFp32AndGathersBf16) {
  const auto tasks = DpTasks("dp=2,mbs=2,gbs=8,zero=1,dtype=bf16");
  EXPECT_EQ(tasks.at("dp gradient reduce-scatter"), Backward(4));
  EXPECT_EQ(tasks.at("dp parameter all-gather"), Backward(2));
}

// ZeRO-2 reduce-scatters every micro-batch (DeepSpeed's, and the runtime's ZeroBuckets): 2 x 6.
TEST(DpCommVolumeTest, Zero2ReduceScattersEveryMicrobatch) {
  const auto tasks = DpTasks("dp=2,mbs=2,gbs=8,zero=2,dtype=bf16");
  std::vector<double> twice = Backward(4);
  const std::vector<double> once = Backward(4);
  twice.insert(twice.end(), once.begin(), once.end());
  EXPECT_EQ(tasks.at("zero-2 gradient reduce-scatter"), twice);
  EXPECT_EQ(tasks.at("dp parameter all-gather"), Backward(2));
}

// ZeRO-3, bf16, 2 micro-batches: each unit's parameters gathered in bf16 for its forward and its
// backward, except the embedding table's backward (it reads no weights: the gradient is a
// scatter-add of the output gradient, as the runtime's and DeepSpeed's pre-backward hooks skip
// it): (6 + 5) units x 2 micro-batches = 22 gathers; the head's with the untied table, 32,832 x
// 2 B. Bytes: 2 micro-batches x 2 B x (2 x 311,872 - 32,768) = 2,363,904. Its gradients are
// reduce-scattered in fp32 every micro-batch (6 x 2 = 12).
TEST(DpCommVolumeTest, Bf16Zero3GathersBf16PerUnit) {
  const auto tasks = DpTasks("dp=2,mbs=2,gbs=8,zero=3,dtype=bf16");
  const std::vector<double>& gathers = tasks.at("zero-3 parameter all-gather");
  EXPECT_EQ(gathers.size(), 22u);
  double sum = 0;
  for (double g : gathers) sum += g;
  EXPECT_DOUBLE_EQ(sum, 2 * 2 * (2 * kStageParams - kEmbeddingParams));
  EXPECT_EQ(tasks.at("zero-3 gradient reduce-scatter").size(), 12u);
}

// fp16 keeps fp16 gradients (the ZeRO paper's 2 + 2 + 12): 61,568 x 2 = 123,136 B per layer.
TEST(DpCommVolumeTest, Fp16ReducesFp16Gradients) {
  const auto tasks = DpTasks("dp=2,mbs=2,gbs=8,zero=1,dtype=fp16");
  EXPECT_EQ(tasks.at("dp gradient reduce-scatter"), Backward(2));
  EXPECT_EQ(tasks.at("dp parameter all-gather"), Backward(2));
}

// bucket_params groups consecutive units: 150,000 closes a bucket after head + 2 layers
// (32,832 + 2 x 61,568 = 155,968), then after 2 layers + the embeddings (the pass's end).
TEST(DpCommVolumeTest, BucketsGroupUnits) {
  const auto tasks = DpTasks("dp=2,mbs=2,gbs=8,zero=1,dtype=bf16,bucket_params=150000");
  EXPECT_EQ(tasks.at("dp gradient reduce-scatter"),
            (std::vector<double>{(kHeadParams + 2 * kLayerParams) * 4, (2 * kLayerParams + kEmbeddingParams) * 4}));
}

// The estimate's collective table lists the very tasks the simulator runs (both come from the
// layer plan): 4 per-layer reduce-scatters of 246,272 B, one each for the head and embeddings.
TEST(DpCommVolumeTest, EstimateListsTheSameTasks) {
  const Cluster cluster(TwoGpus());
  const Estimate e =
      EstimateIteration(testing::TinyModel(32), cluster, Resolved("dp=2,mbs=2,gbs=8,zero=1,dtype=bf16"));
  std::map<std::pair<std::string, double>, int64_t> rows;
  for (const CollectiveTiming& t : e.collectives) rows[{t.purpose, t.cost.bytes}] = t.count;
  EXPECT_EQ((rows[{"dp gradient reduce-scatter", kLayerParams * 4}]), 4);
  EXPECT_EQ((rows[{"dp gradient reduce-scatter", kHeadParams * 4}]), 1);
  EXPECT_EQ((rows[{"dp parameter all-gather", kEmbeddingParams * 2}]), 1);
}

}  // namespace
}  // namespace shardsim
