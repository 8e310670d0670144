// See mla_keys.h.
#include "src/io/mla_keys.h"

namespace shardsim {

void ReadMla(LocatedValues& r, const MlaKeys& keys, ModelSpec& m) {
  MlaSpec a;
  // Set to None (which a NeMo reader's values hold as absent, so Text gives the fallback back).
  const bool none = r.Has(keys.q_lora_rank) && r.Text(keys.q_lora_rank, "None") == "None";
  a.q_lora_rank = none ? 0 : r.Int(keys.q_lora_rank, keys.q_lora_rank_default, 0);
  a.kv_lora_rank = r.Int(keys.kv_lora_rank, keys.kv_lora_rank_default);
  a.rope_head_dim = r.Int(keys.rope_head_dim, 64);
  a.v_head_dim = r.Int(keys.v_head_dim, 128);
  m.head_dim = r.Int(keys.qk_head_dim, 128) + a.rope_head_dim;
  m.kv_heads = m.heads;
  m.mla = a;
}

}  // namespace shardsim
