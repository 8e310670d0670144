// Checkpoints of `shardsim run` (--save DIR --save-every N, --resume DIR), issue 17 item 3:
//   DIR/step-K/rank-R.bin   rank R's state after K steps (Executor::SaveState), one per rank
//   DIR/step-K/manifest.yaml  written by rank 0 once every rank's file is in place
//   DIR/latest              "step-K", the newest complete checkpoint, written last
// Every file is written whole (temp + rename), so a run killed at any moment leaves the
// previous complete checkpoint named by `latest`. A resume must use the layout, model, seed,
// data and world size it was saved with (re-sharding under another layout is not done).
#pragma once

#include <cstdint>
#include <string>

#include "src/util/status.h"

namespace shardsim::runtime {

struct CheckpointInfo {
  int64_t step = 0;   // steps done: the resumed run starts at this step
  int64_t world = 0;  // ranks
  int64_t seed = 0;
  std::string model, layout, data;
};

std::string CheckpointDir(const std::string& root, int64_t step);

// Rank `rank`'s state after `step` steps, into root/step-K (created when missing).
Status WriteRankState(const std::string& root, int64_t step, int rank, const std::string& bytes);
StatusOr<std::string> ReadRankState(const std::string& root, int64_t step, int rank);

// The manifest of a checkpoint whose rank files are all written, then `latest` naming it.
Status CommitCheckpoint(const std::string& root, const CheckpointInfo& info);

// The checkpoint `latest` names, from its manifest; errors name the file and what is wrong.
StatusOr<CheckpointInfo> ReadLatestCheckpoint(const std::string& root);

// Why `saved` cannot be resumed as `now` (empty when it can): the fields that differ.
std::string CheckpointMismatch(const CheckpointInfo& saved, const CheckpointInfo& now);

}  // namespace shardsim::runtime
