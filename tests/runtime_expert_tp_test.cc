// The runtime under the experts' own TP size (Layout::etp, MoE parallel folding): what each rank
// holds (runtime/exec/shard.h) and what it refuses (runtime/exec/executor.h UnsupportedLayout).
// The training itself is checked against the single-process reference by mpi.Equivalence.MoeEtp*
// (tests/CMakeLists.txt) and its collectives against the plan's by
// RuntimePricedCollectivesTest.ExpertsWholeUnderTp and ExpertsOverTheirOwnTpGroup. Expected
// values are worked by hand.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/exec/executor.h"
#include "runtime/exec/shard.h"
#include "src/layout/placement.h"
#include "tests/test_models.h"

namespace shardsim::runtime {
namespace {

// The shard's tensor `name` (its index in the rank's layout), or -1.
int Find(const RankShard& s, const std::string& name) {
  const std::vector<ParamTensor>& t = s.layout().tensors();
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

// tiny-moe (h 64, 4 experts of 128, 4 layers) under tp 2, sp, ep 2, etp 1 on 2 GPUs: the EP group
// folds over the two TP ranks (ExpertCoordOf: TP rank 1 is EP member 1), each holding 4 / 2 = 2
// experts whole: member 1 has experts 2 and 3, gate 128 x 64 (the dense TP would halve it to 64
// rows), neither split (kRows) nor TP's replica (its gradient is not summed over TP: kWhole, not
// partial). The router stays TP's replica, partial under SP.
TEST(RuntimeExpertTp, EachMemberHoldsItsExpertsWhole) {
  const ModelSpec m = testing::TinyMoeModel(32);
  const Layout l = testing::ResolvedOnH100("tp=2,sp=on,ep=2,etp=1,mbs=1,gbs=1", 2);
  ASSERT_EQ(ExpertCoordOf(l, 1).ep, 1);
  StatusOr<RankShard> s = RankShard::Create(m, l, /*tp_rank=*/1, /*pp_rank=*/0, /*ep_rank=*/1);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(Find(*s, "experts.0.0.gate.weight"), -1);
  const int gate = Find(*s, "experts.0.2.gate.weight");
  ASSERT_GE(gate, 0);
  EXPECT_EQ(s->layout().tensors()[gate].rows, 128);
  EXPECT_EQ(s->layout().tensors()[gate].cols, 64);
  EXPECT_EQ(s->split(gate), TensorSplit::kWhole);
  EXPECT_FALSE(s->PartialOverTp(gate));
  EXPECT_EQ(s->local_model().moe->ffn_hidden, 128);
  const int router = Find(*s, "blocks.0.moe.router.weight");
  ASSERT_GE(router, 0);
  EXPECT_EQ(s->split(router), TensorSplit::kReplicated);
  EXPECT_TRUE(s->PartialOverTp(router));
  // Without etp the experts split over TP as a dense MLP: 64 of the gate's 128 rows.
  const Layout split = testing::ResolvedOnH100("tp=2,sp=on,dp=2,ep=2,mbs=1,gbs=2", 4);
  StatusOr<RankShard> t = RankShard::Create(m, split, 1, 0, 1);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->layout().tensors()[Find(*t, "experts.0.2.gate.weight")].rows, 64);
  EXPECT_EQ(t->split(Find(*t, "experts.0.2.gate.weight")), TensorSplit::kRows);
}

// The experts over a TP group of their own (etp 2 under tp 1, dp 4, ep 2: ExpertCoordOf folds
// ranks 0-1 into etp group 0 of EP member 0, ranks 2-3 into EP member 1): each holds half of
// each of its experts' MLPs, the block of its rank in that group, whatever its TP rank (0 here):
// EP member 1, etp rank 1 holds rows 64-127 of expert 2's gate (128 x 64, split by rows as a
// column-parallel weight), so the first element of its slice is the full gate's element
// (64, 0), at 64 x 64 = 4,096 into the tensor.
TEST(RuntimeExpertTp, EachRankHoldsItsBlockOfTheExpertsTpGroup) {
  const ModelSpec m = testing::TinyMoeModel(32);
  const Layout l = testing::ResolvedOnH100("dp=4,ep=2,etp=2,mbs=1,gbs=4", 4);
  ASSERT_EQ(ExpertCoordOf(l, 3).etp, 1);
  ASSERT_EQ(ExpertCoordOf(l, 3).ep, 1);
  StatusOr<RankShard> s = RankShard::Create(m, l, /*tp_rank=*/0, /*pp_rank=*/0, /*ep_rank=*/1, /*etp_rank=*/1);
  ASSERT_TRUE(s.ok()) << s.status().message();
  const int gate = Find(*s, "experts.0.2.gate.weight");
  ASSERT_GE(gate, 0);
  EXPECT_EQ(s->layout().tensors()[gate].rows, 64);
  EXPECT_EQ(s->split(gate), TensorSplit::kRows);
  std::vector<float> full(static_cast<size_t>(s->full_layout().total_size()));
  for (size_t i = 0; i < full.size(); ++i) full[i] = static_cast<float>(i);
  std::vector<float> local(static_cast<size_t>(s->layout().total_size()));
  s->Slice(full.data(), local.data());
  const int64_t full_gate = s->full_layout().Get("experts.0.2.gate.weight").offset;
  EXPECT_EQ(local[static_cast<size_t>(s->layout().tensors()[gate].offset)], static_cast<float>(full_gate + 64 * 64));
  EXPECT_TRUE(UnsupportedLayout(m, l).empty());
}

// What the runtime still refuses: ZeRO-2/3 where the experts' replicas come from TP alone
// (dp x cp = 1: ZeroBuckets shards gradients and weights over DP x CP); ZeRO-1 there it runs.
TEST(RuntimeExpertTp, RefusesWhatItDoesNotRun) {
  const ModelSpec m = testing::TinyMoeModel(32);
  EXPECT_TRUE(UnsupportedLayout(m, testing::ResolvedOnH100("tp=2,sp=on,ep=2,etp=1,mbs=1,gbs=1", 2)).empty());
  EXPECT_TRUE(UnsupportedLayout(m, testing::ResolvedOnH100("tp=2,sp=on,dp=2,ep=2,etp=1,zero=1,mbs=1,gbs=2", 4)).empty());
  EXPECT_TRUE(UnsupportedLayout(m, testing::ResolvedOnH100("tp=2,sp=on,etp=1,zero=1,mbs=1,gbs=1", 2)).empty());
  const std::vector<std::string> zero = UnsupportedLayout(m, testing::ResolvedOnH100("tp=2,sp=on,etp=1,zero=2,mbs=1,gbs=1", 2));
  ASSERT_EQ(zero.size(), 1u);
  EXPECT_NE(zero[0].find("dp x cp = 1"), std::string::npos) << zero[0];
}

}  // namespace
}  // namespace shardsim::runtime
