// Causal scaled dot-product attention (Vaswani et al. 2017, eq. 1) with grouped-query heads
// (GQA; Ainslie et al. 2023): query head h reads key/value head h / (heads / kv_heads).
// Inputs are the already projected (and, for RoPE models, rotated) Q, K and V.
#pragma once

#include <cstdint>

namespace shardsim::runtime {

struct AttentionShape {
  int64_t batch = 0;     // B
  int64_t seq = 0;       // T, queries per sequence
  int64_t heads = 0;     // H, query heads
  int64_t kv_heads = 0;  // KV, divides H
  int64_t head_dim = 0;  // d
  // Context parallelism: a chunk of T queries against all Tk >= T keys of the sequence, query
  // t at position q_offset + t (q_offset + T <= Tk). Tk = kv_seq, or T when 0.
  int64_t kv_seq = 0;
  int64_t q_offset = 0;
  int64_t keys() const { return kv_seq > 0 ? kv_seq : seq; }
};

// q (B, T, H, d); k, v (B, Tk, KV, d); saves probs (B, H, T, Tk); out (B, T, H, d).
// For each (b, h), with g = h / (H / KV):
//   P = softmax_row(Q_h K_g^T / sqrt(d) + M),  M_ts = -inf for s > q_offset + t (causal),
//   O_h = P V_g.
template <typename S>
void AttentionForward(const S* q, const S* k, const S* v, S* probs, S* out,
                      const AttentionShape& shape);

// The same forward, keeping what the caller asks for: probs (B, H, T, Tk) when non-null (else
// one head's (T, Tk) workspace), and each row's log-sum-exp of the scaled, masked scores,
// lse (B, H, T), when non-null (attention=flash, flash_attention.h).
template <typename S>
void CausalAttentionForward(const S* q, const S* k, const S* v, S* probs, S* lse, S* out,
                            const AttentionShape& shape);

// dout (B, T, H, d). Adds, for each (b, h):
//   dP = dO_h V_g^T,  dS = P * (dP - rowsum(P * dP))   (softmax Jacobian, elementwise *),
//   dq_h += dS K_g / sqrt(d),  dk_g += dS^T Q_h / sqrt(d),  dv_g += P^T dO_h.
// Masked entries have P = 0, so they contribute nothing.
template <typename S>
void AttentionBackward(const S* dout, const S* q, const S* k, const S* v, const S* probs, S* dq,
                       S* dk, S* dv, const AttentionShape& shape);

}  // namespace shardsim::runtime
