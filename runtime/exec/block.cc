// See block.h. The backward pass visits the forward's steps in reverse; buffers that only the
// backward pass needs are allocated there and freed when the layer is done.
#include "runtime/exec/block.h"

#include "runtime/exec/attention_core.h"
#include "runtime/exec/moe_block.h"
#include "runtime/exec/te_gemm.h"

#include <optional>
#include <utility>
#include <vector>

namespace shardsim::runtime {
namespace {

constexpr MemoryKind kAct = MemoryKind::kActivations;
constexpr MemoryKind kWork = MemoryKind::kOther;

// out (n_local, C) = g(in (n, k) w^T) + bias + residual.
template <typename T>
Status RowParallel(ExecContext& ctx, const BlockDims& d, int32_t module, const T* in, const T* w,
                   const T* bias, int64_t k, const T* residual, T* out, Fp8Saved* save) {
  const int64_t c = d.m->hidden;
  DeviceBuffer tmp;
  SHARDSIM_ASSIGN_OR_RETURN(T* partial, ctx.PartialTarget(out, tmp, d.n_local, c));
  SHARDSIM_RETURN_IF_ERROR(TeForward<T>(ctx, module, in, d.n, k, {{w, nullptr, partial, c}}, {save, 0, d.n}));
  SHARDSIM_RETURN_IF_ERROR(ctx.Reduce(partial, out, d.n_local, c));
  if (bias != nullptr) ctx.kt<T>().AddRowBias(out, bias, d.n_local, c);
  ctx.kt<T>().Add(out, residual, d.n_local * c);
  return Status::Ok();
}

// Under fp8, a column-parallel module's saved input: this rank's rows of the gathered input
// (all of them without SP), as TE keeps its local fp8 input and re-gathers it in backward.
TeSave OwnRows(ExecContext& ctx, const BlockDims& d, Fp8Saved* to) {
  if (!ctx.fp8()) return {};
  const int64_t from = ctx.sp() ? ctx.comm().rank(Group::kTp) * d.n_local : 0;
  return {to, from, d.n_local};
}

// A column-parallel module's input for its weight gradient, all rows: the saved 16-bit rows
// `rows`, or under fp8 the saved codes `fp8`, re-gathered into `tmp` under SP (fp8 codes travel
// as pairs of bytes in 16-bit elements, C even: UnsupportedLayout). `pending`: StartGather's
// handle (overlap_tp; the rows are there after FinishGather), or null for a blocking gather.
template <typename T>
StatusOr<TeIn<T>> RegatherInput(ExecContext& ctx, const BlockDims& d, const DeviceBuffer& rows, const Fp8Saved& fp8,
                                DeviceBuffer& tmp, int64_t* pending) {
  const int64_t c = d.m->hidden;
  if (fp8.empty()) {
    if (pending != nullptr) {
      SHARDSIM_ASSIGN_OR_RETURN(const T* x, ctx.StartGather(rows.as<T>(), tmp, d.n_local, c, pending));
      return TeIn<T>(x);
    }
    SHARDSIM_ASSIGN_OR_RETURN(const T* x, ctx.Gather(rows.as<T>(), tmp, d.n_local, c));
    return TeIn<T>(x);
  }
  const Bf16* pairs = fp8.codes.as<Bf16>();
  if (pending != nullptr) {
    SHARDSIM_ASSIGN_OR_RETURN(pairs, ctx.StartGather(pairs, tmp, d.n_local, c / 2, pending));
  } else {
    SHARDSIM_ASSIGN_OR_RETURN(pairs, ctx.Gather(pairs, tmp, d.n_local, c / 2));
  }
  return TeIn<T>(reinterpret_cast<const uint8_t*>(pairs), fp8.scale_inv);
}

// One column-parallel projection out (n, m) = in (n, c) w^T + b, for its backward.
template <typename T>
struct ColumnProj {
  const T* dout;  // (n, m)
  const T* w;     // (m, c)
  float* dw;      // (m, c)
  float* db;      // (m), or null without a bias
  int64_t m;
  int32_t slot = -1;  // TeGrad::slot
};

// overlap_tp: the backward of the column-parallel projections that share the input `in`
// (n, c), as Megatron-LM's LinearWithGradAccumulationAndAsyncCommunication.backward
// (megatron/core/tensor_parallel/layers.py): the input gradients first, accumulated into
// din_full (n, c) in the order given; then the re-gathered input is waited for (SP: started by
// the caller, `gather`), f's backward reduction of din_full started (all-reduce in place, or
// reduce-scatter into `rows` (n_local, c), allocated here, with SP), the weight gradients
// computed while it is in flight, and the reduction waited for. Returns this rank's rows of the
// reduced gradient. The same sums in the same order as one LinearBackward per projection then
// ExecContext::Reduce, so the same results bitwise.
template <typename T>
StatusOr<T*> ColumnParallelBackwardOverlapped(ExecContext& ctx, const BlockDims& d, int32_t module,
                                              const std::vector<ColumnProj<T>>& projs,
                                              TeIn<T> in, int64_t gather, T* din_full,
                                              DeviceBuffer& rows, const char* rows_what) {
  const int64_t c = d.m->hidden;
  std::vector<TeGrad<T>> data, weight;
  for (const ColumnProj<T>& p : projs) {
    data.push_back({p.dout, p.w, nullptr, nullptr, p.m, p.slot});
    weight.push_back({p.dout, p.w, p.dw, p.db, p.m, p.slot});
  }
  SHARDSIM_RETURN_IF_ERROR(TeBackward(ctx, module, data, static_cast<const T*>(nullptr), din_full, d.n, c));
  SHARDSIM_RETURN_IF_ERROR(ctx.FinishGather(gather));
  T* dn = din_full;
  if (ctx.sp()) {
    SHARDSIM_ASSIGN_OR_RETURN(rows, ctx.Alloc<T>(kWork, d.n_local * c, rows_what));
    dn = rows.as<T>();
  }
  int64_t reduce = -1;
  SHARDSIM_RETURN_IF_ERROR(ctx.StartReduce(din_full, dn, d.n_local, c, &reduce));
  SHARDSIM_RETURN_IF_ERROR(TeBackward(ctx, module, weight, in, static_cast<T*>(nullptr), d.n, c));
  SHARDSIM_RETURN_IF_ERROR(ctx.FinishReduce(reduce));
  return dn;
}

// An MoE layer whose input stays split over TP (moe_block.h, MoeRank::input_split: its
// dispatcher gathers over TP itself, or its experts are whole): it takes and returns this rank's
// rows, with no f or g around it.
template <typename T>
bool MoeInputSplit(const BlockWeights<T>& w, const MoeArgs<T>* moe) {
  return w.router != nullptr && moe != nullptr && moe->rank.input_split;
}

}  // namespace

template <typename T>
Status BlockForward(ExecContext& ctx, const BlockDims& d, const BlockWeights<T>& w,
                    const T* x, T* out, BlockSaved& s, bool keep_probs, const MoeArgs<T>* moe) {
  const ModelSpec& m = *d.m;
  const int64_t c = m.hidden, f = m.ffn_hidden, qd = m.q_dim(), kvd = m.kv_dim();
  TypedKernels<T>& k = ctx.kt<T>();
  auto alloc = [&](DeviceBuffer& b, int64_t n, const char* what) -> Status {  // T elements
    SHARDSIM_ASSIGN_OR_RETURN(b, ctx.Alloc<T>(kAct, n, what));
    return Status::Ok();
  };
  auto stats = [&](DeviceBuffer& b, int64_t n, const char* what) -> Status {  // fp32
    SHARDSIM_ASSIGN_OR_RETURN(b, ctx.Alloc(kAct, n, what));
    return Status::Ok();
  };
  // Attention branch.
  ctx.SetPart(SpanLabel::kAttention);
  SHARDSIM_RETURN_IF_ERROR(alloc(s.norm1, d.n_local * c, "attention norm output"));
  SHARDSIM_RETURN_IF_ERROR(stats(s.norm1_rstd, d.n_local, "attention norm statistics"));
  if (m.norm == Norm::kLayerNorm) SHARDSIM_RETURN_IF_ERROR(stats(s.norm1_mean, d.n_local, "attention norm statistics"));
  k.NormForward(m.norm, x, w.attn_norm_gain, w.attn_norm_bias, s.norm1.as<T>(), s.norm1_mean.f(),
                s.norm1_rstd.f(), d.n_local, c);
  DeviceBuffer gathered;
  SHARDSIM_ASSIGN_OR_RETURN(const T* in, ctx.Gather(s.norm1.as<T>(), gathered, d.n_local, c));
  SHARDSIM_RETURN_IF_ERROR(alloc(s.q, d.n * qd, "queries"));
  SHARDSIM_RETURN_IF_ERROR(alloc(s.k, d.n * kvd, "keys"));
  SHARDSIM_RETURN_IF_ERROR(alloc(s.v, d.n * kvd, "values"));
  SHARDSIM_RETURN_IF_ERROR(TeForward<T>(
      ctx, kTeQkv, in, d.n, c,
      {{w.wq, w.bq, s.q.as<T>(), qd}, {w.wk, w.bk, s.k.as<T>(), kvd}, {w.wv, w.bv, s.v.as<T>(), kvd}},
      OwnRows(ctx, d, &s.qkv_in)));
  gathered.Reset();
  if (ctx.fp8()) s.norm1.Reset();  // its codes are kept instead (the norm's backward reads x)
  RopeQueriesKeys(ctx, d, s.q.as<T>(), s.k.as<T>(), /*backward=*/false);
  SHARDSIM_RETURN_IF_ERROR(AttentionCoreForward<T>(ctx, d, s, keep_probs));
  SHARDSIM_RETURN_IF_ERROR(alloc(s.mid, d.n_local * c, "attention residual"));
  SHARDSIM_RETURN_IF_ERROR(RowParallel(ctx, d, kTeProj, s.attn.as<T>(), w.wo, w.bo, qd, x, s.mid.as<T>(),
                                       ctx.fp8() ? &s.proj_in : nullptr));
  if (ctx.fp8() && !d.flash) s.attn.Reset();  // unfused attention's backward reads the softmax, not its output
  // MLP branch (an MoE layer's: the router, the experts and the residual, as the simulator
  // names them).
  ctx.SetPart(w.router != nullptr ? SpanLabel::kRouter : SpanLabel::kMlp);
  SHARDSIM_RETURN_IF_ERROR(alloc(s.norm2, d.n_local * c, "mlp norm output"));
  SHARDSIM_RETURN_IF_ERROR(stats(s.norm2_rstd, d.n_local, "mlp norm statistics"));
  if (m.norm == Norm::kLayerNorm) SHARDSIM_RETURN_IF_ERROR(stats(s.norm2_mean, d.n_local, "mlp norm statistics"));
  k.NormForward(m.norm, s.mid.as<T>(), w.mlp_norm_gain, w.mlp_norm_bias, s.norm2.as<T>(), s.norm2_mean.f(),
                s.norm2_rstd.f(), d.n_local, c);
  if (MoeInputSplit(w, moe)) {
    // An MoE layer whose input stays split over TP (moe_block.h): this rank's rows in and out,
    // no f or g around it.
    SHARDSIM_RETURN_IF_ERROR(MoeForward(ctx, d, moe->rank, w.router, moe->experts, s.norm2.as<T>(), out, s.moe));
    ctx.SetPart(SpanLabel::kMlpResidual);
    k.Add(out, s.mid.as<T>(), d.n_local * c);
    return Status::Ok();
  }
  if (w.router != nullptr) {  // an MoE layer (moe_block.h): f, the experts, g, as a dense MLP
    CHECK(moe != nullptr) << "an MoE layer's forward needs its experts";
    SHARDSIM_ASSIGN_OR_RETURN(in, ctx.Gather(s.norm2.as<T>(), gathered, d.n_local, c));
    DeviceBuffer tmp;
    SHARDSIM_ASSIGN_OR_RETURN(T* partial, ctx.PartialTarget(out, tmp, d.n_local, c));
    SHARDSIM_RETURN_IF_ERROR(MoeForward(ctx, d, moe->rank, w.router, moe->experts, in, partial, s.moe));
    gathered.Reset();
    SHARDSIM_RETURN_IF_ERROR(ctx.Reduce(partial, out, d.n_local, c));
    ctx.SetPart(SpanLabel::kMlpResidual);
    k.Add(out, s.mid.as<T>(), d.n_local * c);
    return Status::Ok();
  }
  SHARDSIM_ASSIGN_OR_RETURN(in, ctx.Gather(s.norm2.as<T>(), gathered, d.n_local, c));
  SHARDSIM_RETURN_IF_ERROR(alloc(s.hidden, d.n * f, "mlp hidden"));
  SHARDSIM_RETURN_IF_ERROR(alloc(s.act, d.n * f, "mlp activation"));
  std::vector<TeProj<T>> fc1 = {{w.w_in, w.b_in, s.hidden.as<T>(), f}};
  if (m.activation == Activation::kSwiglu) {
    SHARDSIM_RETURN_IF_ERROR(alloc(s.up, d.n * f, "mlp up projection"));
    fc1.push_back({w.w_up, w.b_up, s.up.as<T>(), f});
  }
  SHARDSIM_RETURN_IF_ERROR(TeForward(ctx, kTeFc1, in, d.n, c, fc1, OwnRows(ctx, d, &s.fc1_in)));  // gate and up
  if (m.activation == Activation::kSwiglu) {
    k.SwigluForward(s.hidden.as<T>(), s.up.as<T>(), s.act.as<T>(), d.n * f);
  } else {
    k.GeluForward(s.hidden.as<T>(), s.act.as<T>(), d.n * f);
  }
  gathered.Reset();
  if (ctx.fp8()) s.norm2.Reset();
  SHARDSIM_RETURN_IF_ERROR(RowParallel(ctx, d, kTeFc2, s.act.as<T>(), w.w_out, w.b_out, f, s.mid.as<T>(), out,
                                       ctx.fp8() ? &s.fc2_in : nullptr));
  if (ctx.fp8()) s.act.Reset();  // the activation's backward reads its inputs (hidden, up)
  return Status::Ok();
}

// Zero-bubble's B pass: where a layer's gradients go meanwhile. The linear weights' and the
// column-parallel biases' are left null (LinearBackward then computes the input gradient
// alone). The norms' and the row-parallel biases', computed in B where their inputs are at
// hand (as Megatron-LM's and Transformer Engine's split backward leave them in B), go straight
// into `dw` when the gradients are there (not sharded: the same sums in the same order as an
// unsplit backward, so a bf16 run stays bitwise that run); under ZeRO-2/3, whose bucket opens
// only in W, into the stash's `small` rows, for the tensors the layer has (w's non-null ones).
template <typename T>
StatusOr<BlockWeights<float>> StashGrads(ExecContext& ctx, const BlockDims& d, const BlockWeights<T>& w,
                                         const BlockWeights<float>& dw, WeightGradStash& stash) {
  const int64_t c = d.m->hidden;
  BlockWeights<float> g;
  if (dw.attn_norm_gain != nullptr) {  // the gradients are at hand
    g.attn_norm_gain = dw.attn_norm_gain;
    g.attn_norm_bias = dw.attn_norm_bias;
    g.mlp_norm_gain = dw.mlp_norm_gain;
    g.mlp_norm_bias = dw.mlp_norm_bias;
    g.bo = dw.bo;
    g.b_out = dw.b_out;
    return g;
  }
  SHARDSIM_ASSIGN_OR_RETURN(stash.small, ctx.Zeros(MemoryKind::kGradients, 6 * c, "deferred small gradients"));
  float* row = stash.small.f();
  auto at = [&](const T* param, int i) { return param != nullptr ? row + i * c : nullptr; };
  g.attn_norm_gain = at(w.attn_norm_gain, 0);
  g.attn_norm_bias = at(w.attn_norm_bias, 1);
  g.mlp_norm_gain = at(w.mlp_norm_gain, 2);
  g.mlp_norm_bias = at(w.mlp_norm_bias, 3);
  g.bo = at(w.bo, 4);
  g.b_out = at(w.b_out, 5);
  return g;
}

// A copy of `src` (n_local, C) kept for the W pass when a GEMM's output gradient is dresid
// itself, which the rest of the backward overwrites.
template <typename T>
StatusOr<const T*> Keep(ExecContext& ctx, const BlockDims& d, const T* src, DeviceBuffer& gathered,
                        WeightGradStash& stash) {
  if (!gathered.empty()) {  // SP's gathered rows: the buffer itself is kept
    const T* p = gathered.as<T>();
    stash.keep.push_back(std::move(gathered));
    return p;
  }
  const int64_t bytes = d.n * d.m->hidden * static_cast<int64_t>(sizeof(T));
  SHARDSIM_ASSIGN_OR_RETURN(DeviceBuffer copy, ctx.Alloc<T>(MemoryKind::kOther, d.n * d.m->hidden, "deferred output gradient"));
  ctx.mem().Copy(copy.data(), src, bytes);
  const T* p = copy.as<T>();
  stash.keep.push_back(std::move(copy));
  return p;
}

template <typename T>
Status BlockBackward(ExecContext& ctx, const BlockDims& d, const BlockWeights<T>& w,
                     const BlockWeights<float>& dw_given, const T* x, BlockSaved& s,
                     T* dresid, WeightGradStash* stash, const MoeArgs<T>* moe) {
  const ModelSpec& m = *d.m;
  const int64_t c = m.hidden, f = m.ffn_hidden, qd = m.q_dim(), kvd = m.kv_dim();
  TypedKernels<T>& k = ctx.kt<T>();
  auto zeros = [&](DeviceBuffer& b, int64_t n, const char* what) -> Status {  // T elements
    SHARDSIM_ASSIGN_OR_RETURN(b, ctx.Zeros<T>(kWork, n, what));
    return Status::Ok();
  };
  BlockWeights<float> dw = dw_given;
  if (stash != nullptr) {
    SHARDSIM_ASSIGN_OR_RETURN(dw, StashGrads(ctx, d, w, dw_given, *stash));
  }
  // Zero-bubble: a GEMM's weight gradient deferred, and a buffer it reads kept.
  using G = BlockWeights<float>;
  auto defer = [&](float* G::*weight, float* G::*bias, const T* dout, TeIn<T> in, int64_t kk, int64_t mm) {
    WeightGradStash::Gemm g{weight, bias, dout, in.codes != nullptr ? static_cast<const void*>(in.codes) : in.x, kk, mm};
    g.in_fp8 = in.codes != nullptr;
    g.in_scale_inv = in.scale_inv;
    stash->gemms.push_back(g);
  };
  // A row-parallel module's saved input: the 16-bit tensor, or under fp8 its codes.
  auto saved_in = [](const DeviceBuffer& x, const Fp8Saved& fp8) {
    return fp8.empty() ? TeIn<T>(x.as<T>()) : TeIn<T>(fp8.codes.as<uint8_t>(), fp8.scale_inv);
  };
  auto keep = [&](DeviceBuffer& b) {
    if (stash != nullptr && !b.empty()) {
      stash->keep.push_back(std::move(b));
    } else {
      b.Reset();
    }
  };
  const bool overlap = ctx.overlap_tp() && stash == nullptr;
  // Row-parallel biases are added after g, to this rank's rows: their gradient is the column
  // sum of d(out) over those rows (summed over the TP group later under SP).
  DeviceBuffer gathered, dfull, dnorm_full, dnorm, norm_in;
  // overlap_tp with SP: the norm output's re-gather for the weight gradients is started right
  // after the output gradient's (blocking) gather, queued behind it as in Megatron-LM, and
  // waited for just before the weight gradients, so it runs under the input-gradient GEMMs
  // (without SP StartGather is `x` itself). The input gradient's reduction then runs under the
  // weight-gradient GEMMs (ColumnParallelBackwardOverlapped).
  int64_t pending = -1;
  std::optional<TeIn<T>> norm2;  // fc1's input: s.norm2's rows or fp8 codes, gathered under SP
  // MLP branch; dresid holds d(out), which is also the residual path's share of d(mid).
  ctx.SetPart(SpanLabel::kMlp);
  // An MoE layer whose input stays split over TP (moe_block.h) takes this rank's rows.
  const bool dispatch_tp = MoeInputSplit(w, moe);
  const T* dout = dresid;
  if (!dispatch_tp) {
    SHARDSIM_ASSIGN_OR_RETURN(dout, ctx.Gather(dresid, gathered, d.n_local, c));
  }
  if (overlap && !dispatch_tp) {
    SHARDSIM_ASSIGN_OR_RETURN(norm2, RegatherInput<T>(ctx, d, s.norm2, s.fc1_in, norm_in, &pending));
  }
  T* dn = nullptr;
  bool gathered2 = false;  // SP: w_in's and w_up's input is the re-gathered copy, not s.norm2
  if (dispatch_tp) {
    SHARDSIM_RETURN_IF_ERROR(zeros(dnorm, d.n_local * c, "mlp norm gradient rows"));
    SHARDSIM_RETURN_IF_ERROR(MoeBackward(ctx, d, moe->rank, w.router, dw.router, moe->experts, moe->grads,
                                         s.norm2.as<T>(), s.moe, dout, dnorm.as<T>(), moe->aux_scale, stash));
    s.moe.Clear();
    dn = dnorm.as<T>();
  } else if (w.router != nullptr) {  // an MoE layer (moe_block.h; no stash: the executor's rule)
    CHECK(moe != nullptr) << "an MoE layer's backward needs its experts";
    if (!norm2) {
      SHARDSIM_ASSIGN_OR_RETURN(norm2, RegatherInput<T>(ctx, d, s.norm2, s.fc1_in, norm_in, nullptr));
    } else {  // overlap_tp started the re-gather above: the experts need it at once
      SHARDSIM_RETURN_IF_ERROR(ctx.FinishGather(std::exchange(pending, -1)));
    }
    SHARDSIM_RETURN_IF_ERROR(zeros(dnorm_full, d.n * c, "mlp norm gradient"));
    SHARDSIM_RETURN_IF_ERROR(MoeBackward(ctx, d, moe->rank, w.router, dw.router, moe->experts, moe->grads, norm2->x,
                                         s.moe, static_cast<const T*>(dout), dnorm_full.as<T>(), moe->aux_scale,
                                         stash));
    s.moe.Clear();
    gathered.Reset();
    gathered2 = !norm_in.empty();
    keep(norm_in);  // zero-bubble: the router's deferred weight gradient reads the gathered rows
    // f's backward: d(norm2) summed over the group (into this rank's rows with SP).
    dn = dnorm_full.as<T>();
    if (ctx.sp() && ctx.tp() > 1) {
      SHARDSIM_ASSIGN_OR_RETURN(dnorm, ctx.Alloc<T>(kWork, d.n_local * c, "mlp norm gradient rows"));
      dn = dnorm.as<T>();
    }
    SHARDSIM_RETURN_IF_ERROR(ctx.Reduce(dnorm_full.as<T>(), dn, d.n_local, c));
  } else {
  DeviceBuffer dact, dhidden, dup;
  SHARDSIM_RETURN_IF_ERROR(zeros(dact, d.n * f, "mlp activation gradient"));
  SHARDSIM_RETURN_IF_ERROR(
      TeBackward<T>(ctx, kTeFc2, {{dout, w.w_out, dw.w_out, nullptr, c}}, saved_in(s.act, s.fc2_in), dact.as<T>(), d.n, f));
  if (dw.b_out != nullptr) k.AddColumnSums(dresid, dw.b_out, d.n_local, c);
  if (stash != nullptr) {
    SHARDSIM_ASSIGN_OR_RETURN(dout, Keep(ctx, d, dout, gathered, *stash));
    defer(&G::w_out, nullptr, dout, saved_in(s.act, s.fc2_in), f, c);
  }
  gathered.Reset();
  keep(s.act);
  keep(s.fc2_in.codes);
  SHARDSIM_RETURN_IF_ERROR(zeros(dhidden, d.n * f, "mlp hidden gradient"));
  if (!norm2) {
    SHARDSIM_ASSIGN_OR_RETURN(norm2, RegatherInput<T>(ctx, d, s.norm2, s.fc1_in, norm_in, nullptr));
  }
  SHARDSIM_RETURN_IF_ERROR(zeros(dnorm_full, d.n * c, "mlp norm gradient"));
  if (m.activation == Activation::kSwiglu) {
    SHARDSIM_RETURN_IF_ERROR(zeros(dup, d.n * f, "mlp up gradient"));
    k.SwigluBackward(dact.as<T>(), s.hidden.as<T>(), s.up.as<T>(), dhidden.as<T>(), dup.as<T>(), d.n * f);
  } else {
    k.GeluBackward(dact.as<T>(), s.hidden.as<T>(), dhidden.as<T>(), d.n * f);
  }
  dn = dnorm_full.as<T>();
  if (overlap) {  // w_up's and w_in's input gradients, reduced under their dW GEMMs
    dact.Reset();
    s.up.Reset();
    s.hidden.Reset();
    std::vector<ColumnProj<T>> projs;
    if (!dup.empty()) projs.push_back({dup.as<T>(), w.w_up, dw.w_up, dw.b_up, f, 1});  // the forward's order: gate, up
    projs.push_back({dhidden.as<T>(), w.w_in, dw.w_in, dw.b_in, f, dup.empty() ? -1 : 0});
    SHARDSIM_ASSIGN_OR_RETURN(
        dn, ColumnParallelBackwardOverlapped(ctx, d, kTeFc1, projs, *norm2, std::exchange(pending, -1),
                                             dnorm_full.as<T>(), dnorm, "mlp norm gradient rows"));
    dup.Reset();
    dhidden.Reset();
    norm_in.Reset();
  } else {
    // linear_fc1's backward (up, then gate): what the activation's backward read is done with.
    dact.Reset();
    s.up.Reset();
    std::vector<TeGrad<T>> fc1;
    if (!dup.empty()) fc1.push_back({dup.as<T>(), w.w_up, dw.w_up, dw.b_up, f, 1});  // the forward's order: gate, up
    fc1.push_back({dhidden.as<T>(), w.w_in, dw.w_in, dw.b_in, f, dup.empty() ? -1 : 0});
    SHARDSIM_RETURN_IF_ERROR(TeBackward(ctx, kTeFc1, fc1, *norm2, dnorm_full.as<T>(), d.n, c));
    if (stash != nullptr) {
      if (!dup.empty()) defer(&G::w_up, &G::b_up, dup.as<T>(), *norm2, c, f);
      defer(&G::w_in, &G::b_in, dhidden.as<T>(), *norm2, c, f);
    }
    keep(dup);
    keep(dhidden);
    s.hidden.Reset();
    gathered2 = !norm_in.empty();
    keep(norm_in);
    // f's backward: sum d(norm2) over the group (into this rank's rows with SP).
    if (ctx.sp() && ctx.tp() > 1) {
      SHARDSIM_ASSIGN_OR_RETURN(dnorm, ctx.Alloc<T>(kWork, d.n_local * c, "mlp norm gradient rows"));
      dn = dnorm.as<T>();
    }
    SHARDSIM_RETURN_IF_ERROR(ctx.Reduce(dnorm_full.as<T>(), dn, d.n_local, c));
  }
  }
  k.NormBackward(m.norm, dn, s.mid.as<T>(), w.mlp_norm_gain, s.norm2_mean.f(), s.norm2_rstd.f(),
                 dresid, dw.mlp_norm_gain, dw.mlp_norm_bias, d.n_local, c);
  dnorm.Reset();
  dnorm_full.Reset();
  if (gathered2) {
    s.norm2.Reset();
  } else {
    keep(s.norm2);  // the W pass's input of w_in / w_up without SP (norm2 points into it)
    keep(s.fc1_in.codes);
  }
  s.norm2_mean.Reset();
  s.norm2_rstd.Reset();
  s.mid.Reset();

  // dresid is now d(mid). Attention branch.
  ctx.SetPart(SpanLabel::kAttention);
  SHARDSIM_ASSIGN_OR_RETURN(dout, ctx.Gather(dresid, gathered, d.n_local, c));
  std::optional<TeIn<T>> norm1;  // as norm2, for Q, K and V
  if (overlap) {  // under the output projection's and the attention's backward
    SHARDSIM_ASSIGN_OR_RETURN(norm1, RegatherInput<T>(ctx, d, s.norm1, s.qkv_in, norm_in, &pending));
  }
  DeviceBuffer dattn, dq, dk, dv;
  SHARDSIM_RETURN_IF_ERROR(zeros(dattn, d.n * qd, "attention output gradient"));
  SHARDSIM_RETURN_IF_ERROR(
      TeBackward<T>(ctx, kTeProj, {{dout, w.wo, dw.wo, nullptr, c}}, saved_in(s.attn, s.proj_in), dattn.as<T>(), d.n, qd));
  if (dw.bo != nullptr) k.AddColumnSums(dresid, dw.bo, d.n_local, c);
  if (stash != nullptr) {
    SHARDSIM_ASSIGN_OR_RETURN(dout, Keep(ctx, d, dout, gathered, *stash));
    defer(&G::wo, nullptr, dout, saved_in(s.attn, s.proj_in), qd, c);
  }
  gathered.Reset();
  keep(s.proj_in.codes);
  if (!d.flash) keep(s.attn);  // flash's backward needs the output (D = rowsum(dO o O))
  SHARDSIM_RETURN_IF_ERROR(zeros(dq, d.n * qd, "query gradient"));
  SHARDSIM_RETURN_IF_ERROR(zeros(dk, d.n * kvd, "key gradient"));
  SHARDSIM_RETURN_IF_ERROR(zeros(dv, d.n * kvd, "value gradient"));
  SHARDSIM_RETURN_IF_ERROR(AttentionCoreBackward(ctx, d, s, static_cast<const T*>(dattn.as<T>()), dq.as<T>(),
                                                 dk.as<T>(), dv.as<T>()));
  if (d.flash) keep(s.attn);
  dattn.Reset();
  RopeQueriesKeys(ctx, d, dq.as<T>(), dk.as<T>(), /*backward=*/true);
  if (!norm1) {
    SHARDSIM_ASSIGN_OR_RETURN(norm1, RegatherInput<T>(ctx, d, s.norm1, s.qkv_in, norm_in, nullptr));
  }
  SHARDSIM_RETURN_IF_ERROR(zeros(dnorm_full, d.n * c, "attention norm gradient"));
  dn = dnorm_full.as<T>();
  bool gathered1 = false;  // as gathered2, for Q, K and V
  if (overlap) {  // Q's, K's and V's input gradients, reduced under their dW GEMMs
    s.q.Reset();
    s.k.Reset();
    s.v.Reset();
    const std::vector<ColumnProj<T>> projs = {{dq.as<T>(), w.wq, dw.wq, dw.bq, qd},
                                              {dk.as<T>(), w.wk, dw.wk, dw.bk, kvd},
                                              {dv.as<T>(), w.wv, dw.wv, dw.bv, kvd}};
    SHARDSIM_ASSIGN_OR_RETURN(
        dn, ColumnParallelBackwardOverlapped(ctx, d, kTeQkv, projs, *norm1, std::exchange(pending, -1),
                                             dnorm_full.as<T>(), dnorm, "attention norm gradient rows"));
    dq.Reset();
    dk.Reset();
    dv.Reset();
    norm_in.Reset();
  } else {
    SHARDSIM_RETURN_IF_ERROR(TeBackward<T>(ctx, kTeQkv,
                                           {{dq.as<T>(), w.wq, dw.wq, dw.bq, qd},
                                            {dk.as<T>(), w.wk, dw.wk, dw.bk, kvd},
                                            {dv.as<T>(), w.wv, dw.wv, dw.bv, kvd}},
                                           *norm1, dnorm_full.as<T>(), d.n, c));
    if (stash != nullptr) {
      defer(&G::wq, &G::bq, dq.as<T>(), *norm1, c, qd);
      defer(&G::wk, &G::bk, dk.as<T>(), *norm1, c, kvd);
      defer(&G::wv, &G::bv, dv.as<T>(), *norm1, c, kvd);
    }
    keep(dq);
    keep(dk);
    keep(dv);
    gathered1 = !norm_in.empty();
    keep(norm_in);
    s.q.Reset();
    s.k.Reset();
    s.v.Reset();
    if (ctx.sp() && ctx.tp() > 1) {
      SHARDSIM_ASSIGN_OR_RETURN(dnorm, ctx.Alloc<T>(kWork, d.n_local * c, "attention norm gradient rows"));
      dn = dnorm.as<T>();
    }
    SHARDSIM_RETURN_IF_ERROR(ctx.Reduce(dnorm_full.as<T>(), dn, d.n_local, c));
  }
  k.NormBackward(m.norm, dn, x, w.attn_norm_gain, s.norm1_mean.f(), s.norm1_rstd.f(), dresid,
                 dw.attn_norm_gain, dw.attn_norm_bias, d.n_local, c);
  if (!gathered1) {  // the W pass's input of Q, K and V without SP
    keep(s.norm1);
    keep(s.qkv_in.codes);
  }
  s.Clear();
  return Status::Ok();
}

template <typename T>
Status BlockWeightGrad(ExecContext& ctx, const BlockDims& d, WeightGradStash& stash,
                     const BlockWeights<float>& dw) {
  TypedKernels<T>& k = ctx.kt<T>();
  // One TE module's GEMMs at a time: consecutive ones over the same input (Q, K and V; up and
  // gate), which share their output gradients' scale under fp8.
  for (size_t i = 0; i < stash.gemms.size();) {
    const WeightGradStash::Gemm& first = stash.gemms[i];
    const int64_t rows = first.rows >= 0 ? first.rows : d.n;
    auto dweight = [&](const WeightGradStash::Gemm& g) { return g.direct != nullptr ? g.direct : dw.*g.weight; };
    if (!first.te) {
      k.LinearBackward(static_cast<const T*>(first.dout), static_cast<const T*>(first.in), nullptr, nullptr,
                       dweight(first), first.bias != nullptr ? dw.*first.bias : nullptr, rows, first.k, first.m);
      ++i;
      continue;
    }
    std::vector<TeGrad<T>> module;
    size_t j = i;
    for (; j < stash.gemms.size(); ++j) {
      const WeightGradStash::Gemm& g = stash.gemms[j];
      if (!g.te || g.in != first.in || g.rows != first.rows || g.k != first.k) break;
      module.push_back({static_cast<const T*>(g.dout), nullptr, dweight(g), g.bias != nullptr ? dw.*g.bias : nullptr, g.m});
    }
    const TeIn<T> in = first.in_fp8 ? TeIn<T>(static_cast<const uint8_t*>(first.in), first.in_scale_inv)
                                    : TeIn<T>(static_cast<const T*>(first.in));
    SHARDSIM_RETURN_IF_ERROR(TeBackward(ctx, /*module=*/-1, module, in, static_cast<T*>(nullptr), rows, first.k));
    i = j;
  }
  const int64_t c = d.m->hidden;
  using G = BlockWeights<float>;
  using Member = float* G::*;
  const Member small[] = {&G::attn_norm_gain, &G::attn_norm_bias, &G::mlp_norm_gain, &G::mlp_norm_bias, &G::bo, &G::b_out};
  for (int i = 0; !stash.small.empty() && i < 6; ++i) {  // StashGrads' rows, if it used them
    if (dw.*small[i] != nullptr) ctx.k().f32().Add(dw.*small[i], stash.small.f() + i * c, c);
  }
  stash = WeightGradStash();
  return Status::Ok();
}

#define SHARDSIM_INSTANTIATE_BLOCK(T)                                                        \
  template Status BlockForward(ExecContext&, const BlockDims&, const BlockWeights<T>&, const T*, \
                               T*, BlockSaved&, bool, const MoeArgs<T>*);                       \
  template Status BlockBackward(ExecContext&, const BlockDims&, const BlockWeights<T>&,          \
                                const BlockWeights<float>&, const T*, BlockSaved&, T*,           \
                                WeightGradStash*, const MoeArgs<T>*);                            \
  template Status BlockWeightGrad<T>(ExecContext&, const BlockDims&, WeightGradStash&,             \
                                   const BlockWeights<float>&);
SHARDSIM_INSTANTIATE_BLOCK(float)
SHARDSIM_INSTANTIATE_BLOCK(Bf16)
#undef SHARDSIM_INSTANTIATE_BLOCK

}  // namespace shardsim::runtime
