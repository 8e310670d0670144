// AssembleFullState (runtime/exec/reshard.h) on checkpoints written by hand: a model of 6
// parameters over 2 ranks, each rank's state file (Executor::SaveState's sections: the AdamW
// step, then weights, master, moment 1, moment 2, each an int64 byte count and its floats) and
// its map (EncodeStateMap). Every expected value is the one the file was written with.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "runtime/exec/checkpoint.h"
#include "runtime/exec/reshard.h"

namespace shardsim::runtime {
namespace {

std::string Floats(const std::vector<float>& v) {
  const int64_t n = static_cast<int64_t>(v.size() * sizeof(float));
  std::string out(reinterpret_cast<const char*>(&n), sizeof n);
  out.append(reinterpret_cast<const char*>(v.data()), static_cast<size_t>(n));
  return out;
}

// A state file: step, empty weights (a bf16 rank's master holds the values), then `master`,
// and the moments as master + 100 and master + 200.
std::string State(int64_t step, const std::vector<float>& master) {
  std::string out(reinterpret_cast<const char*>(&step), sizeof step);
  std::vector<float> m1 = master, m2 = master;
  for (float& x : m1) x += 100;
  for (float& x : m2) x += 200;
  return out + Floats({}) + Floats(master) + Floats(m1) + Floats(m2);
}

class ReshardState : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = ::testing::TempDir() + "reshard_state_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed());
    std::filesystem::remove_all(root_);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  void Write(int rank, const std::string& state, const std::string& map) {
    ASSERT_TRUE(WriteRankState(root_, 3, rank, state).ok());
    ASSERT_TRUE(WriteRankMap(root_, 3, rank, map).ok());
  }
  std::string root_;
};

// Rank 0 holds elements [0, 2) at its master 0.. and [4, 6) at 2..; rank 1 [2, 4) at 1.. (its
// master 0 is padding). Assembled: master 0..5 = 10, 11, 21, 22, 12, 13.
TEST_F(ReshardState, AssemblesEveryRanksRunsInPlace) {
  Write(0, State(7, {10, 11, 12, 13}),
        EncodeStateMap(6, 2, {{.full = 0, .count = 2, .master_at = 0, .moment_at = 0},
                              {.full = 4, .count = 2, .master_at = 2, .moment_at = 2}}));
  Write(1, State(7, {-1, 21, 22}), EncodeStateMap(6, 2, {{.full = 2, .count = 2, .master_at = 1, .moment_at = 1}}));
  StatusOr<FullState> full = AssembleFullState(root_, 3, 2, 6);
  ASSERT_TRUE(full.ok()) << full.status().message();
  EXPECT_EQ(full->adam_step, 7);
  EXPECT_EQ(full->master, (std::vector<float>{10, 11, 21, 22, 12, 13}));
  EXPECT_EQ(full->moment1, (std::vector<float>{110, 111, 121, 122, 112, 113}));
  EXPECT_EQ(full->moment2, (std::vector<float>{210, 211, 221, 222, 212, 213}));
}

TEST_F(ReshardState, RefusesGapsOverlapsAndOtherModels) {
  const std::string state = State(7, {1, 2, 3, 4, 5, 6});
  auto error = [&](const std::string& map0, const std::string& map1) {
    Write(0, state, map0);
    Write(1, state, map1);
    StatusOr<FullState> full = AssembleFullState(root_, 3, 2, 6);
    return full.ok() ? std::string("ok") : full.status().message();
  };
  const std::string first = EncodeStateMap(6, 2, {{.full = 0, .count = 3}});
  const std::string rest = EncodeStateMap(6, 2, {{.full = 3, .count = 3}});
  EXPECT_EQ(error(first, rest), "ok");
  // Element 2 counted by both ranks.
  EXPECT_NE(error(first, EncodeStateMap(6, 2, {{.full = 2, .count = 4}})).find("element 2 is also another rank's"),
            std::string::npos);
  // Element 5 by none.
  EXPECT_NE(error(first, EncodeStateMap(6, 2, {{.full = 3, .count = 2}})).find("element 5 of the model is in no rank's map"),
            std::string::npos);
  // A run past the model's end, and one past the state file's sections (master_at 5 + 3 > 6).
  EXPECT_NE(error(first, EncodeStateMap(6, 2, {{.full = 3, .count = 4}})).find("outside the model's 6"), std::string::npos);
  EXPECT_NE(error(first, EncodeStateMap(6, 2, {{.full = 3, .count = 3, .master_at = 5}})).find("past the end of"),
            std::string::npos);
  // A map of a model of 7 parameters.
  EXPECT_NE(error(first, EncodeStateMap(7, 2, {{.full = 3, .count = 3}})).find("a model of 7 parameters, this run's has 6"),
            std::string::npos);
  // fp32 weights named as a bf16 rank's master copy.
  EXPECT_NE(error(first, EncodeStateMap(6, 2, {{.full = 3, .count = 3, .master_in_weights = true}})).find("fp32 weights"),
            std::string::npos);
  // A truncated map, and a file that is no map.
  EXPECT_NE(error(first, rest.substr(0, rest.size() - 1)).find("truncated"), std::string::npos);
  EXPECT_NE(error(first, "not a map").find("not a shardsim state map"), std::string::npos);
}

}  // namespace
}  // namespace shardsim::runtime
