// Data-parallel communication volumes under mixed precision, in the simulator's task graph
// (src/sim/program.cc) and the estimate's table (src/cost/estimate.cc): gradients are
// reduced at their stored width (bf16 training: fp32, as Megatron-LM's
// accumulate_allreduce_grads_in_fp32 and the runtime do; fp16: fp16), parameters gathered at
// the weights' width (2 bytes for both).
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>

#include "src/cost/estimate.h"
#include "src/sim/program.h"
#include "tests/test_models.h"

namespace shardsim {
namespace {

// models/tiny.yaml's shape (tests/zero_memory_model_test.cc): 61,568 parameters per layer,
// 311,872 on the one stage; dp = 2, two micro-batches of 2.
constexpr double kLayerParams = 61568, kStageParams = 311872;

HardwareSpec TwoGpus() { return testing::TestCluster(1, 2, "300 GB/s", "3 us", "200 Gb/s", "5 us", 1); }

Layout Resolved(const std::string& spec) {
  StatusOr<Layout> parsed = ParseLayout(spec);
  CHECK(parsed.ok()) << parsed.status().message();
  StatusOr<Layout> l = ResolveLayoutFor(*parsed, 2, TwoGpus());
  CHECK(l.ok()) << l.status().message();
  return *l;
}

// Per DP collective task name: (count, bytes of each; -1 if they differ).
std::map<std::string, std::pair<int, double>> DpTasks(const std::string& spec) {
  const IterationProgram p = BuildIteration(testing::TinyModel(32), TwoGpus(), Resolved(spec));
  std::map<std::string, std::pair<int, double>> out;
  const StageProgram& s = p.stages[0];
  for (const TaskSpec& t : s.tasks) {
    if (t.category != Category::kDp) continue;
    auto [it, fresh] = out.try_emplace(s.names[t.name], 0, t.bytes);
    ++it->second.first;
    if (it->second.second != t.bytes) it->second.second = -1;
  }
  return out;
}

// ZeRO-0, bf16: one fp32 all-reduce per layer, 61,568 x 4 = 246,272 B each (the embedding
// and head ride with the optimizer step).
TEST(DpCommVolumeTest, Bf16AllReducesFp32Gradients) {
  const auto tasks = DpTasks("dp=2,mbs=2,gbs=8,zero=0,dtype=bf16");
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_EQ(tasks.at("dp gradient all-reduce").first, 4);
  EXPECT_DOUBLE_EQ(tasks.at("dp gradient all-reduce").second, kLayerParams * 4);
}

// ZeRO-1, bf16: fp32 reduce-scatters as above, then one bf16 all-gather of the stage's
// updated parameters, 311,872 x 2 = 623,744 B.
TEST(DpCommVolumeTest, Bf16ReduceScattersFp32AndGathersBf16) {
  const auto tasks = DpTasks("dp=2,mbs=2,gbs=8,zero=1,dtype=bf16");
  EXPECT_EQ(tasks.at("dp gradient reduce-scatter").first, 4);
  EXPECT_DOUBLE_EQ(tasks.at("dp gradient reduce-scatter").second, kLayerParams * 4);
  EXPECT_EQ(tasks.at("dp parameter all-gather").first, 1);
  EXPECT_DOUBLE_EQ(tasks.at("dp parameter all-gather").second, kStageParams * 2);
}

// ZeRO-3, bf16, 2 micro-batches: each layer's parameters gathered in bf16 for its forward
// and its backward (4 layers x 2 passes x 2 = 16 gathers of 61,568 x 2 = 123,136 B), its
// gradients reduce-scattered in fp32 every micro-batch (8 of 246,272 B).
TEST(DpCommVolumeTest, Bf16Zero3GathersBf16PerLayer) {
  const auto tasks = DpTasks("dp=2,mbs=2,gbs=8,zero=3,dtype=bf16");
  EXPECT_EQ(tasks.at("zero-3 parameter all-gather").first, 16);
  EXPECT_DOUBLE_EQ(tasks.at("zero-3 parameter all-gather").second, kLayerParams * 2);
  EXPECT_EQ(tasks.at("zero-3 gradient reduce-scatter").first, 8);
  EXPECT_DOUBLE_EQ(tasks.at("zero-3 gradient reduce-scatter").second, kLayerParams * 4);
}

// fp16 keeps fp16 gradients (the ZeRO paper's 2 + 2 + 12): 61,568 x 2 = 123,136 B per layer.
TEST(DpCommVolumeTest, Fp16ReducesFp16Gradients) {
  const auto tasks = DpTasks("dp=2,mbs=2,gbs=8,zero=1,dtype=fp16");
  EXPECT_DOUBLE_EQ(tasks.at("dp gradient reduce-scatter").second, kLayerParams * 2);
  EXPECT_DOUBLE_EQ(tasks.at("dp parameter all-gather").second, kStageParams * 2);
}

// The estimate's collective table lists the very tasks the simulator runs (both come from the
// layer plan): 4 per-layer reduce-scatters of 61,568 x 4 = 246,272 B, one gather of
// 311,872 x 2 = 623,744 B.
TEST(DpCommVolumeTest, EstimateListsTheSameTasks) {
  const Cluster cluster(TwoGpus());
  const Estimate e =
      EstimateIteration(testing::TinyModel(32), cluster, Resolved("dp=2,mbs=2,gbs=8,zero=1,dtype=bf16"));
  std::map<std::string, std::pair<int64_t, double>> rows;
  for (const CollectiveTiming& t : e.collectives) rows[t.purpose] = {t.count, t.cost.bytes};
  EXPECT_EQ(rows.at("dp gradient reduce-scatter").first, 4);
  EXPECT_DOUBLE_EQ(rows.at("dp gradient reduce-scatter").second, kLayerParams * 4);
  EXPECT_EQ(rows.at("dp parameter all-gather").first, 1);
  EXPECT_DOUBLE_EQ(rows.at("dp parameter all-gather").second, kStageParams * 2);
}

}  // namespace
}  // namespace shardsim
