// See attention_core.h. Without CP the rank's rows are one block of queries against their own
// keys; with CP each of the two halves is a block of L queries against the T gathered keys,
// at its offset (the probabilities and log-sum-exps are kept half after half).
#include "runtime/exec/attention_core.h"

#include <utility>

#include "runtime/cpu/rope.h"
#include "runtime/exec/context_parallel.h"

namespace shardsim::runtime {
namespace {

constexpr MemoryKind kAct = MemoryKind::kActivations;
constexpr MemoryKind kWork = MemoryKind::kOther;

int Halves(const BlockDims& d) { return d.cp.active() ? 2 : 1; }

// Half h's queries: (B, t / halves) of them, against all of the sequence's keys under CP.
AttentionDims HalfDims(const BlockDims& d, int h) {
  AttentionDims a{d.b, d.t / Halves(d), d.m->heads, d.m->kv_heads, d.m->head_dim};
  if (d.cp.active()) {
    a.kv_seq = d.cp.seq;
    a.q_offset = d.cp.Start(h);
  }
  return a;
}

// Offsets of half h in the (n, width) row buffers and in the per-head statistics.
int64_t Rows(const BlockDims& d, int h, int64_t width) { return h * (d.n / Halves(d)) * width; }
int64_t ProbElements(const AttentionDims& a) { return a.batch * a.heads * a.seq * a.keys(); }
int64_t LseElements(const AttentionDims& a) { return a.batch * a.heads * a.seq; }

// The keys and values every half attends to: the rank's own, or under CP the gathered ones.
template <typename T>
struct Keys {
  DeviceBuffer k_all, v_all;
  const T* k = nullptr;
  const T* v = nullptr;
};

template <typename T>
StatusOr<Keys<T>> KeysOf(ExecContext& ctx, const BlockDims& d, const BlockSaved& s) {
  Keys<T> keys;
  if (!d.cp.active()) {
    keys.k = s.k.as<T>();
    keys.v = s.v.as<T>();
    return keys;
  }
  SHARDSIM_RETURN_IF_ERROR(GatherKeysValues(ctx, d, d.m->kv_dim(), s.k.as<T>(), s.v.as<T>(), keys.k_all, keys.v_all));
  keys.k = keys.k_all.template as<T>();
  keys.v = keys.v_all.template as<T>();
  return keys;
}

// The probabilities from Q and K, half by half, into `probs` (allocated as `kind`); `out`
// receives the attention output.
template <typename T>
Status Probabilities(ExecContext& ctx, const BlockDims& d, const BlockSaved& s, const Keys<T>& keys,
                     MemoryKind kind, const char* what, DeviceBuffer& probs, T* out) {
  const int64_t qd = d.m->q_dim();
  const int64_t per_half = ProbElements(HalfDims(d, 0));
  SHARDSIM_ASSIGN_OR_RETURN(probs, ctx.Alloc<T>(kind, Halves(d) * per_half, what));
  for (int h = 0; h < Halves(d); ++h) {
    ctx.kt<T>().AttentionForward(s.q.as<T>() + Rows(d, h, qd), keys.k, keys.v, probs.as<T>() + h * per_half,
                                 out + Rows(d, h, qd), HalfDims(d, h));
  }
  return Status::Ok();
}

}  // namespace

template <typename T>
void RopeQueriesKeys(ExecContext& ctx, const BlockDims& d, T* q, T* k, bool backward) {
  const ModelSpec& m = *d.m;
  if (m.position != Position::kRope) return;
  const double base = RopeBaseOf(m.rotary_base);
  TypedKernels<T>& kt = ctx.kt<T>();
  for (int h = 0; h < Halves(d); ++h) {
    const AttentionDims a = HalfDims(d, h);
    T* qh = q + Rows(d, h, m.q_dim());
    T* kh = k + Rows(d, h, m.kv_dim());
    if (backward) {
      kt.RopeBackward(qh, a.batch, a.seq, m.heads, m.head_dim, base, a.q_offset);
      kt.RopeBackward(kh, a.batch, a.seq, m.kv_heads, m.head_dim, base, a.q_offset);
    } else {
      kt.RopeForward(qh, a.batch, a.seq, m.heads, m.head_dim, base, a.q_offset);
      kt.RopeForward(kh, a.batch, a.seq, m.kv_heads, m.head_dim, base, a.q_offset);
    }
  }
}

template <typename T>
Status AttentionCoreForward(ExecContext& ctx, const BlockDims& d, BlockSaved& s, bool keep_probs) {
  const int64_t qd = d.m->q_dim();
  SHARDSIM_ASSIGN_OR_RETURN(Keys<T> keys, KeysOf<T>(ctx, d, s));
  if (d.flash) {
    const int64_t per_half = LseElements(HalfDims(d, 0));
    SHARDSIM_ASSIGN_OR_RETURN(s.lse, ctx.Alloc(kAct, Halves(d) * per_half, "attention log-sum-exp"));
    SHARDSIM_ASSIGN_OR_RETURN(s.attn, ctx.Alloc<T>(kAct, d.n * qd, "attention output"));
    for (int h = 0; h < Halves(d); ++h) {
      ctx.kt<T>().FlashAttentionForward(s.q.as<T>() + Rows(d, h, qd), keys.k, keys.v, s.lse.f() + h * per_half,
                                        s.attn.as<T>() + Rows(d, h, qd), HalfDims(d, h));
    }
    return Status::Ok();
  }
  // Kept as activations; under selective recompute a transient the backward rebuilds.
  SHARDSIM_ASSIGN_OR_RETURN(s.attn, ctx.Alloc<T>(kAct, d.n * qd, "attention output"));
  DeviceBuffer probs;
  SHARDSIM_RETURN_IF_ERROR(Probabilities(ctx, d, s, keys, keep_probs ? kAct : kWork, "attention probabilities",
                                         probs, s.attn.as<T>()));
  if (keep_probs) s.probs = std::move(probs);
  return Status::Ok();
}

template <typename T>
Status AttentionCoreBackward(ExecContext& ctx, const BlockDims& d, BlockSaved& s, const T* dattn,
                             T* dq, T* dk, T* dv) {
  const ModelSpec& m = *d.m;
  const int64_t qd = m.q_dim(), kvd = m.kv_dim();
  TypedKernels<T>& k = ctx.kt<T>();
  SHARDSIM_ASSIGN_OR_RETURN(Keys<T> keys, KeysOf<T>(ctx, d, s));
  if (!d.flash && s.probs.empty()) {  // selective recompute: the probabilities from Q and K
    const SpanLabel part = ctx.part();
    ctx.SwitchCompute(Phase::kRecompute, SpanLabel::kAttentionCore);  // the simulator's "attention core recompute"
    DeviceBuffer out;
    SHARDSIM_ASSIGN_OR_RETURN(out, ctx.Alloc<T>(kWork, d.n * qd, "recomputed attention output"));
    SHARDSIM_RETURN_IF_ERROR(Probabilities(ctx, d, s, keys, kWork, "recomputed attention probabilities", s.probs,
                                           out.as<T>()));
    ctx.SwitchCompute(Phase::kBackward, part);
  }
  // Under CP the whole sequence's key and value gradients, this rank's part of their sums.
  DeviceBuffer dk_all, dv_all;
  T* dk_to = dk;
  T* dv_to = dv;
  if (d.cp.active()) {
    SHARDSIM_ASSIGN_OR_RETURN(dk_all, ctx.Zeros<T>(kWork, d.b * d.cp.seq * kvd, "cp all key gradients"));
    SHARDSIM_ASSIGN_OR_RETURN(dv_all, ctx.Zeros<T>(kWork, d.b * d.cp.seq * kvd, "cp all value gradients"));
    dk_to = dk_all.as<T>();
    dv_to = dv_all.as<T>();
  }
  for (int h = 0; h < Halves(d); ++h) {
    const AttentionDims a = HalfDims(d, h);
    const int64_t at = Rows(d, h, qd);
    if (d.flash) {  // the probabilities rebuilt from the log-sum-exp
      k.FlashAttentionBackward(dattn + at, s.q.as<T>() + at, keys.k, keys.v, s.attn.as<T>() + at,
                               s.lse.f() + h * LseElements(a), dq + at, dk_to, dv_to, a);
    } else {
      k.AttentionBackward(dattn + at, s.q.as<T>() + at, keys.k, keys.v, s.probs.as<T>() + h * ProbElements(a),
                          dq + at, dk_to, dv_to, a);
    }
  }
  s.lse.Reset();
  s.probs.Reset();
  keys = Keys<T>();
  if (d.cp.active()) {
    SHARDSIM_RETURN_IF_ERROR(ReduceScatterKeyValueGrads(ctx, d, kvd, dk_all.as<T>(), dv_all.as<T>(), dk, dv));
  }
  return Status::Ok();
}

#define SHARDSIM_INSTANTIATE_ATTENTION_CORE(T)                                                   \
  template void RopeQueriesKeys(ExecContext&, const BlockDims&, T*, T*, bool);                   \
  template Status AttentionCoreForward<T>(ExecContext&, const BlockDims&, BlockSaved&, bool);    \
  template Status AttentionCoreBackward(ExecContext&, const BlockDims&, BlockSaved&, const T*, T*, T*, T*);
SHARDSIM_INSTANTIATE_ATTENTION_CORE(float)
SHARDSIM_INSTANTIATE_ATTENTION_CORE(Bf16)
#undef SHARDSIM_INSTANTIATE_ATTENTION_CORE

}  // namespace shardsim::runtime
