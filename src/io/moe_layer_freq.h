// Megatron-LM's --moe-layer-freq and NeMo's model.config.moe_layer_freq: an integer N (layer i
// is an expert layer when i % N == 0) or a Python list of 0/1 per layer, written either
// explicitly ("[0, 1, 1]") or as a sum of repeated lists ("([0]*3+[1]*58)"), which
// megatron/training/arguments.py's moe_freq_type evaluates. shardsim's MoE description holds
// the patterns MoeSpec::first_dense and interval make (ModelSpec::IsMoeLayer).
#pragma once

#include <cstdint>
#include <string>

#include "src/io/located_values.h"
#include "src/model/model_spec.h"
#include "src/util/status.h"

namespace shardsim {

struct MoeLayerPattern {
  int64_t first_dense = 0;
  int64_t interval = 1;
};

// Reads `text` for a model of `layers` layers; an error says what the pattern is not.
StatusOr<MoeLayerPattern> ParseMoeLayerFreq(const std::string& text, int64_t layers);

// What to write for `moe` in a model of `layers` layers: "N" when no layer before the pattern
// is dense, else the list expression ("([0]*3+[1]*58)"), or with `literal` the list itself
// ("[0,0,0,1,...]": a Python literal, for configuration systems that take literals only).
std::string MoeLayerFreqText(const MoeSpec& moe, int64_t layers, bool literal = false);

// The readers' common step: when `key` is set, its pattern into moe.first_dense and
// moe.interval; what it cannot hold is an error located at the key.
void ReadMoeLayerFreq(LocatedValues& r, const std::string& key, int64_t layers, MoeSpec& moe);

}  // namespace shardsim
