// ReferenceDump: what an outside implementation needs to replay a training run and check it,
// tensor by tensor (tests/torch_reference.py does it in PyTorch). A directory of raw
// little-endian arrays and a manifest.json naming them:
//   params_initial.f32, params_final.f32   the whole model, the single-process layout's order
//                                           (the manifest's "tensors": name, offset, rows, cols)
//   inputs.i32, targets.i32                 (steps, gbs, seq): every step's global batch
//   logits.f32, grads.f32                   optional: step 0's (gbs * seq, vocab) logits and the
//                                           gradient of its mean loss, before the update
// Each file is written whole (temp + rename); the manifest last, so a directory with a
// manifest is complete.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/cpu/adamw.h"
#include "runtime/cpu/lr_schedule.h"
#include "runtime/cpu/param_layout.h"
#include "runtime/cpu/token_batch.h"
#include "src/model/model_spec.h"
#include "src/util/status.h"

namespace shardsim::runtime {

struct ReferenceDump {
  ModelSpec model;
  std::string source;        // who computed it: "shardsim run", "single-process reference"
  std::string layout;        // the layout it ran under, formatted
  std::string dtype;         // "fp32" or "bf16"
  int64_t gbs = 0;           // sequences per step
  int64_t mbs = 0;           // sequences per micro-batch
  uint64_t seed = 0;
  AdamWConfig adamw;
  std::vector<int32_t> inputs;   // (steps, gbs, seq)
  std::vector<int32_t> targets;  // (steps, gbs, seq)
  std::vector<double> losses;    // one per step, before its update
  LrSchedule schedule;           // the rule (runtime/cpu/lr_schedule.h)
  std::vector<double> learning_rates;  // one per step, what the rule gave; empty: adamw.lr throughout
  std::string data = "synthetic (MarkovStream)";  // where the tokens came from
  std::vector<float> params_initial;
  std::vector<float> params_final;
  std::vector<float> logits;  // empty, or (gbs * seq, vocab) of step 0
  std::vector<float> grads;   // empty, or the flat gradient of step 0

  // Appends the next step's global batch to inputs and targets.
  void AddBatch(const TokenBatch& batch) {
    inputs.insert(inputs.end(), batch.inputs.begin(), batch.inputs.end());
    targets.insert(targets.end(), batch.targets.begin(), batch.targets.end());
  }
};

// Writes `dump` into `dir` (created when missing). Fails, naming the file, when a write fails or
// the arrays disagree with the model (sizes are checked before anything is written).
Status WriteReferenceDump(const std::string& dir, const ReferenceDump& dump);

}  // namespace shardsim::runtime
