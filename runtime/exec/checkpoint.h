// Checkpoints of `shardsim run` (--save DIR --save-every N, --resume DIR), issue 17 item 3:
//   DIR/step-K/rank-R.bin   rank R's state after K steps (Executor::SaveState), one per rank
//   DIR/step-K/rank-R.map   where rank R's state sits in the single-process model (reshard.h)
//   DIR/step-K/manifest.yaml  written by rank 0 once every rank's file is in place
//   DIR/latest              "step-K", the newest complete checkpoint, written last
// Every file is written whole (temp + rename), so a run killed at any moment leaves the
// previous complete checkpoint named by `latest`. A resume must use the model, seed, data and
// global batch it was saved with; under another layout or rank count it is re-sharded
// (reshard.h), under the same one each rank reads back its own file.
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
// Rank `rank`'s map (reshard.h), beside its state.
Status WriteRankMap(const std::string& root, int64_t step, int rank, const std::string& bytes);
StatusOr<std::string> ReadRankMap(const std::string& root, int64_t step, int rank);
std::string RankFile(const std::string& root, int64_t step, int rank, const char* ext = ".bin");

// The manifest of a checkpoint whose rank files are all written, then `latest` naming it.
Status CommitCheckpoint(const std::string& root, const CheckpointInfo& info);

// The checkpoint `latest` names, from its manifest; errors name the file and what is wrong.
StatusOr<CheckpointInfo> ReadLatestCheckpoint(const std::string& root);
// A manifest's text (`path` names it in errors).
StatusOr<CheckpointInfo> ParseCheckpointManifest(const std::string& text, const std::string& path);

// Why `saved` cannot be resumed as `now` at all (empty when it can): the model, seed or data
// differ. The layout and world size may differ: see NeedsReshard.
std::string CheckpointMismatch(const CheckpointInfo& saved, const CheckpointInfo& now);
// Whether `saved` was written under another layout or rank count than `now` runs.
bool NeedsReshard(const CheckpointInfo& saved, const CheckpointInfo& now);

}  // namespace shardsim::runtime
