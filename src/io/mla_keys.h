// Multi-latent attention (ModelSpec::mla) as the framework readers find it: Megatron-LM's
// arguments (--multi-latent-attention's sizes) and Megatron-Core's MLATransformerConfig fields as
// NeMo names them, each with its own defaults.
#pragma once

#include <cstdint>

#include "src/io/located_values.h"
#include "src/model/model_spec.h"

namespace shardsim {

// Multi-latent attention's settings in a framework's vocabulary (Megatron-LM's arguments,
// Megatron-Core's MLATransformerConfig fields as NeMo names them) and their defaults there.
struct MlaKeys {
  const char* q_lora_rank;  // "None" (or absent with a 0 default): no query rank
  const char* kv_lora_rank;
  const char* qk_head_dim;  // the no-RoPE part of a query/key head
  const char* rope_head_dim;
  const char* v_head_dim;
  int64_t q_lora_rank_default, kv_lora_rank_default;
};
// Reads them into m.mla (head_dim the whole query/key head, every head its own keys).
void ReadMla(LocatedValues& r, const MlaKeys& keys, ModelSpec& m);

}  // namespace shardsim
