// Resuming a checkpoint under another layout (issue 17 item 3's stretch goal): tp, pp, vpp, dp,
// cp, ep, ZeRO stage, offload, dtype and the rank count may all differ from the run that saved
// it; the model, seed, data and global batch may not (the data position is step x gbs).
//
// Beside its state file (Executor::SaveState, which only the same layout can read back), every
// rank writes a map (rank-R.map): where each element of the single-process model that this rank
// alone counts sits in its state file. The ranks' maps together cover the whole model once:
// an element is counted by its ZeRO owner (else DP rank 0), by TP rank 0 where TP replicates
// it, by the first stage for a tied table held twice, as Executor::FullParams counts it. A
// resumed run assembles the whole model's fp32 master weights and both AdamW moments from every
// rank's file (the single-process layout, runtime/cpu/param_layout.h) and each rank cuts its
// share from them (Executor::LoadFullState). This is what PyTorch's distributed checkpoint and
// Megatron-Core's dist_checkpointing do with per-tensor metadata; here every rank reads every
// file, which suits the models the runtime trains (a production format reads only the pieces
// that overlap its shard).
//
// Under the same layout (and the same float order) a re-sharded resume is bitwise an
// uninterrupted run (tests/resume_reshard_test.sh); under another, it continues the same
// optimizer state in another summation order. What is not carried across layouts: PowerSGD's
// error feedback and Q (compress=R), which are per-rank; they start afresh, as DeepSpeed's
// 1-bit Adam resets its compression errors on loading a checkpoint.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/util/status.h"

namespace shardsim::runtime {

// A run of elements a rank counts: [full, full + count) of the single-process model are the
// rank file's master weights from master_at (or, fp32 training without a master copy, its
// working weights from master_at) and both moments from moment_at.
struct StateRun {
  int64_t full = 0;
  int64_t count = 0;
  int64_t master_at = 0;
  int64_t moment_at = 0;
  bool master_in_weights = false;
};

// A rank's map file's bytes: `full_elements` (the single-process model's parameters),
// `weight_bytes` (its working weights' element size: 4 fp32, 2 bf16) and the runs.
std::string EncodeStateMap(int64_t full_elements, int64_t weight_bytes, const std::vector<StateRun>& runs);

// The whole model's training state in the single-process layout.
struct FullState {
  int64_t adam_step = 0;
  std::vector<float> master, moment1, moment2;
};

// One rank's state file and map (their bytes; the names for errors) added into `full` (each
// array `full_elements` long), marking the elements in `counted`: an element counted twice, a
// run outside the model or the file's sections, or another model is an error. `first`: the
// first rank added, whose AdamW step the others must match.
Status AddRankState(const std::string& map, const std::string& state, const std::string& map_file,
                    const std::string& state_file, bool first, FullState* full, std::vector<uint8_t>* counted);

// Checkpoint root/step-K's state, assembled from its `world` ranks' state files and maps;
// errors name the file and what is wrong (a missing or truncated file, a map of another model,
// an element counted twice or by no rank).
StatusOr<FullState> AssembleFullState(const std::string& root, int64_t step, int64_t world,
                                      int64_t full_elements);

}  // namespace shardsim::runtime
