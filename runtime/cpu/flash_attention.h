// Memory-efficient causal attention (the layout's attention=flash) on the CPU: the attention of
// attention.h without storing the T x T probabilities. Forward keeps each row's log-sum-exp;
// backward recomputes the probabilities from Q, K and it (FlashAttention, Dao et al. 2022,
// Alg. 1 line 13 and Alg. 2 / Appendix B.4, where D_i = dO_i . O_i). One (T, T) head at a time
// is formed in workspace, so what training keeps per layer is O(T), as the simulator's
// attention=flash memory model assumes (src/cost/memory.cc).
#pragma once

#include "runtime/cpu/attention.h"

namespace shardsim::runtime {

// q, out (B*T, H*d); k, v (B*Tk, KV*d); lse (B, H, T) (AttentionShape's T, Tk and offset).
template <typename S>
void FlashAttentionForward(const S* q, const S* k, const S* v, S* lse, S* out,
                           const AttentionShape& shape);

// Adds into dq, dk, dv (as AttentionBackward).
template <typename S>
void FlashAttentionBackward(const S* dout, const S* q, const S* k, const S* v, const S* out,
                            const S* lse, S* dq, S* dk, S* dv, const AttentionShape& shape);

}  // namespace shardsim::runtime
