// See moe_block.h. Row orders: a rank's dispatch is its kept slots expert after expert (its
// routing's `order`); the EP member q that holds experts [q E_l, (q + 1) E_l) receives from
// each source p, in member order, p's slots for those experts in p's order; the local experts
// run on that buffer regrouped expert-major (for each local expert, its rows from every source
// in member order). Each EP member knows every source's routing (one host all-gather), so it
// computes the received counts and the regrouping itself.
#include "runtime/exec/moe_block.h"

#include "runtime/exec/te_gemm.h"

#include <algorithm>

#include "src/util/check.h"

namespace shardsim::runtime {
namespace {

constexpr MemoryKind kAct = MemoryKind::kActivations;
constexpr MemoryKind kWork = MemoryKind::kOther;

// Device data read back as floats on the host (bf16 widened).
template <typename T>
std::vector<float> HostFloats(ExecContext& ctx, const T* data, int64_t n) {
  std::vector<T> raw(static_cast<size_t>(n));
  ctx.mem().CopyToHost(raw.data(), data, n * static_cast<int64_t>(sizeof(T)));
  if constexpr (std::is_same_v<T, float>) {
    return raw;
  } else {
    std::vector<float> out(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) out[i] = ToFloat(raw[i]);
    return out;
  }
}

// Host values copied into a new device buffer of `kind`.
template <typename V>
StatusOr<DeviceBuffer> ToDevice(ExecContext& ctx, const std::vector<V>& host, const char* what) {
  const int64_t bytes = static_cast<int64_t>(host.size() * sizeof(V));
  SHARDSIM_ASSIGN_OR_RETURN(DeviceBuffer b, ctx.mem().Allocate(kWork, std::max<int64_t>(bytes, 1), what));
  if (bytes > 0) ctx.mem().CopyToDevice(b.data(), host.data(), bytes);
  return b;
}

// The rows of a, b: a list of per-member counts times the row width.
std::vector<int64_t> Elements(const std::vector<int64_t>& rows, int64_t c) {
  std::vector<int64_t> out(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) out[i] = rows[i] * c;
  return out;
}

int64_t Sum(const std::vector<int64_t>& v) {
  int64_t s = 0;
  for (int64_t x : v) s += x;
  return s;
}

// One source's routing as the host all-gather carries it: per slot (expert, weight, kept).
constexpr int kSlotDoubles = 3;

// Rows of `c` to each EP member and back (the dispatch or the combine, and their gradients'):
// one all-to-all, timed as EP communication; with ep = 1 the rank's own block, copied (there is
// no communication to price or run).
template <typename T>
Status Exchange(ExecContext& ctx, const MoeRank& er, const T* in, const std::vector<int64_t>& send_rows, T* out,
                const std::vector<int64_t>& recv_rows, int64_t c, SpanLabel label) {
  if (er.ep == 1) {
    ctx.mem().Copy(out, in, send_rows[0] * c * static_cast<int64_t>(sizeof(T)));
    return Status::Ok();
  }
  const std::vector<int64_t> send = Elements(send_rows, c), recv = Elements(recv_rows, c);
  return ctx.Comm(Phase::kEpComm, static_cast<double>(Sum(send)) * sizeof(T), [&] {
    return ctx.comm().AllToAllVOf(Group::kEp, in, send.data(), out, recv.data());
  }, label);
}

// x (block, c) of every rank of the experts' TP group, all-gathered into `tmp`: SP's all-gather
// where that group is TP's, else over Group::kEtp.
template <typename T>
StatusOr<const T*> GatherOverExpertTp(ExecContext& ctx, const MoeRank& er, const T* x, DeviceBuffer& tmp, int64_t block,
                                      int64_t c) {
  if (er.expert_tp_group == Group::kTp) return ctx.Gather(x, tmp, block, c);
  const int64_t n = er.expert_tp * block * c;
  SHARDSIM_ASSIGN_OR_RETURN(tmp, ctx.Alloc<T>(kWork, std::max<int64_t>(n, 1), "expert tp all-gather"));
  SHARDSIM_RETURN_IF_ERROR(ctx.Comm(Phase::kTpComm, static_cast<double>(n) * sizeof(T), [&] {
    return ctx.comm().AllGather(Group::kEtp, x, tmp.as<T>(), block * c);
  }, SpanLabel::kTpAllGather));
  return static_cast<const T*>(tmp.as<T>());
}

// The partial sums `pool` (expert_tp x block, c) reduce-scattered over the experts' TP group
// into this rank's block `out` (block, c): SP's reduce-scatter where that group is TP's.
template <typename T>
Status ReduceOverExpertTp(ExecContext& ctx, const MoeRank& er, T* pool, T* out, int64_t block, int64_t c) {
  if (er.expert_tp_group == Group::kTp) return ctx.Reduce(pool, out, block, c);
  return ctx.Comm(Phase::kTpComm, static_cast<double>(er.expert_tp * block * c) * sizeof(T), [&] {
    return ctx.comm().ReduceScatterSum(Group::kEtp, pool, out, block * c);
  }, SpanLabel::kTpReduceScatter);
}

// The rows of `src` this rank's slots send (its dispatch, in expert order), exchanged over EP
// and, under the TP gather, gathered over TP (gather_from_sequence_parallel_region), then
// regrouped expert-major into `out` (rows x c, of `kind`): the experts' rows. ToReceivedRows,
// below, is its inverse. The labels name the send, receive and output buffers.
template <typename T>
Status ToExpertRows(ExecContext& ctx, const MoeRank& er, const MoeSaved& s, const T* src, int64_t c, bool dtp,
                    MemoryKind kind, const char* send_what, const char* received_what, const char* out_what,
                    DeviceBuffer& out) {
  TypedKernels<T>& kt = ctx.kt<T>();
  const int64_t rows = Sum(s.tp_rows), sent = Sum(s.send_rows);
  DeviceBuffer dispatch, received, gathered;
  SHARDSIM_ASSIGN_OR_RETURN(dispatch, ctx.Alloc<T>(kWork, std::max<int64_t>(sent, 1) * c, send_what));
  kt.GatherRows(src, s.slot_token.i32(), dispatch.as<T>(), sent, c);
  // Under the TP gather each TP rank's rows fill a block of the largest count; the padding is zeros.
  const int64_t block = std::max<int64_t>(s.tp_block, 1) * c;
  SHARDSIM_ASSIGN_OR_RETURN(received, dtp ? ctx.Zeros<T>(kWork, block, received_what) : ctx.Alloc<T>(kWork, block, received_what));
  SHARDSIM_RETURN_IF_ERROR(Exchange(ctx, er, dispatch.as<T>(), s.send_rows, received.as<T>(), s.recv_rows, c,
                                    SpanLabel::kEpDispatch));
  dispatch.Reset();
  const T* pool = received.as<T>();
  if (dtp) {
    SHARDSIM_ASSIGN_OR_RETURN(pool, GatherOverExpertTp(ctx, er, received.as<T>(), gathered, s.tp_block, c));
  }
  SHARDSIM_ASSIGN_OR_RETURN(out, ctx.Alloc<T>(kind, std::max<int64_t>(rows, 1) * c, out_what));
  kt.GatherRows(pool, s.regroup.i32(), out.as<T>(), rows, c);
  return Status::Ok();
}

// The experts' rows (rows x c, regrouped expert-major) back in the order this rank received
// them, into `back`: without the TP gather the inverse regrouping; under it, scattered into
// the gathered (tp x block) rows and reduce-scattered over TP, so that this rank's block holds
// its received rows summed over the experts' TP-split MLPs.
template <typename T>
Status ToReceivedRows(ExecContext& ctx, const MoeRank& er, const MoeSaved& s, const T* y, int64_t rows, int64_t c,
                      bool dtp, DeviceBuffer& back) {
  TypedKernels<T>& kt = ctx.kt<T>();
  if (!dtp) {
    SHARDSIM_ASSIGN_OR_RETURN(back, ctx.Alloc<T>(kWork, std::max<int64_t>(rows, 1) * c, "expert rows to send"));
    kt.GatherRows(y, s.ungroup.i32(), back.as<T>(), rows, c);
    return Status::Ok();
  }
  const int64_t tp = static_cast<int64_t>(s.tp_rows.size());
  DeviceBuffer pool;
  SHARDSIM_ASSIGN_OR_RETURN(pool, ctx.Zeros<T>(kWork, std::max<int64_t>(tp * s.tp_block, 1) * c, "expert rows of every TP rank"));
  kt.ScatterAddRows(y, s.regroup.i32(), pool.as<T>(), rows, c);
  SHARDSIM_ASSIGN_OR_RETURN(back, ctx.Alloc<T>(kWork, std::max<int64_t>(s.tp_block, 1) * c, "expert rows to send"));
  return ReduceOverExpertTp(ctx, er, pool.as<T>(), back.as<T>(), s.tp_block, c);
}

}  // namespace

template <typename T>
Status MoeForward(ExecContext& ctx, const BlockDims& d, const MoeRank& er, const T* router,
                  const std::vector<ExpertWeights<T>>& experts, const T* x, T* out, MoeSaved& s) {
  const ModelSpec& m = *d.m;
  const bool split = er.input_split, dtp = er.gathers;
  // The rows this rank routes: its own where the input stays split over TP, else all of them.
  const int64_t n = split ? d.n_local : d.n;
  const int64_t c = m.hidden, e_n = m.moe->experts, k = m.moe->top_k, f = m.moe->ffn_hidden;
  const int64_t local = er.LocalExperts(m), first = er.rank * local;
  const int64_t tps = dtp ? er.expert_tp : 1;  // the expert-TP ranks whose received rows this rank's experts run
  CHECK(static_cast<int64_t>(experts.size()) == local) << experts.size() << " local experts of " << local;
  TypedKernels<T>& kt = ctx.kt<T>();
  s.Clear();
  // The router, then the routing on the host.
  {
    DeviceBuffer logits;
    SHARDSIM_ASSIGN_OR_RETURN(logits, ctx.Alloc<T>(kWork, n * e_n, "router logits"));
    kt.LinearForward(x, router, nullptr, logits.as<T>(), n, c, e_n);
    const std::vector<float> host = HostFloats(ctx, logits.as<T>(), n * e_n);
    s.routing = Route<float>(host.data(), n, e_n, k, er.capacity_factor, m.moe->aux_loss_coeff);
  }
  // The aux loss over the whole sequences: the counts summed over the CP group, and over TP
  // when each TP rank routes its own rows.
  if ((er.cp > 1 || split) && m.moe->aux_loss_coeff > 0) {
    std::vector<double> counts(s.routing.selected.begin(), s.routing.selected.end());
    if (er.cp > 1) {
      SHARDSIM_RETURN_IF_ERROR(ctx.Comm(Phase::kCpComm, 0, [&] {
        return ctx.comm().AllReduceSumHost(Group::kCp, counts.data(), e_n);
      }, SpanLabel::kEpRouting));
    }
    if (split) {
      SHARDSIM_RETURN_IF_ERROR(ctx.Comm(Phase::kTpComm, 0, [&] {
        return ctx.comm().AllReduceSumHost(Group::kTp, counts.data(), e_n);
      }, SpanLabel::kEpRouting));
    }
    SetAuxStatistics(s.routing, std::vector<int64_t>(counts.begin(), counts.end()), n * er.cp * (split ? er.tp : 1));
  }
  const MoeRouting& r = s.routing;
  // Every source's routing, over the EP group (and under the TP gather, every TP rank's too:
  // source (t, p) is TP rank t of EP member p, at t x ep + p).
  const int64_t slots = n * k * kSlotDoubles;
  std::vector<double> mine(static_cast<size_t>(slots)), ep_all(mine.size() * er.ep);
  for (int64_t slot = 0; slot < n * k; ++slot) {
    mine[slot * kSlotDoubles] = r.expert[slot];
    mine[slot * kSlotDoubles + 1] = r.weight[slot];
    mine[slot * kSlotDoubles + 2] = r.kept[slot];
  }
  SHARDSIM_RETURN_IF_ERROR(ctx.Comm(Phase::kEpComm, 0, [&] {
    return ctx.comm().AllGatherHost(Group::kEp, mine.data(), ep_all.data(), static_cast<int64_t>(mine.size()));
  }, SpanLabel::kEpRouting));
  std::vector<double> all = ep_all;
  if (dtp) {
    all.resize(ep_all.size() * tps);
    SHARDSIM_RETURN_IF_ERROR(ctx.Comm(Phase::kTpComm, 0, [&] {
      return ctx.comm().AllGatherHost(er.expert_tp_group, ep_all.data(), all.data(), static_cast<int64_t>(ep_all.size()));
    }, SpanLabel::kEpRouting));
  }
  // What this rank sends: its dispatch, cut at the members' expert ranges.
  s.send_rows.assign(er.ep, 0);
  for (int64_t e = 0; e < e_n; ++e) s.send_rows[e / local] += r.per_expert[e];
  // What each TP rank t of this member receives (this rank's alone without the TP gather): from
  // each source p, its kept slots for the local experts, expert after expert, tokens in order.
  std::vector<std::vector<int64_t>> recv(tps, std::vector<int64_t>(er.ep, 0));
  std::vector<std::vector<std::vector<std::vector<int64_t>>>> from(
      local, std::vector<std::vector<std::vector<int64_t>>>(tps, std::vector<std::vector<int64_t>>(er.ep)));
  for (int64_t t = 0; t < tps; ++t) {
    for (int64_t p = 0; p < er.ep; ++p) {
      const double* src = all.data() + (t * er.ep + p) * slots;
      for (int64_t slot = 0; slot < n * k; ++slot) {
        const int64_t e = static_cast<int64_t>(src[slot * kSlotDoubles]);
        if (src[slot * kSlotDoubles + 2] == 0 || e < first || e >= first + local) continue;
        from[e - first][t][p].push_back(slot);  // tokens ascending: the order the source sends
        ++recv[t][p];
      }
    }
  }
  const int64_t own = dtp ? er.expert_tp_rank : 0;
  s.recv_rows = recv[own];
  s.tp_rows.assign(tps, 0);
  for (int64_t t = 0; t < tps; ++t) s.tp_rows[t] = Sum(recv[t]);
  // Under the TP gather each TP rank's rows sit in a block of the largest count (the
  // all-gather's equal blocks); otherwise the one block is this rank's rows.
  s.tp_block = *std::max_element(s.tp_rows.begin(), s.tp_rows.end());
  const int64_t rows = Sum(s.tp_rows), sent = Sum(s.send_rows);
  // Regrouped expert-major: for each local expert, its rows from every TP rank and source.
  std::vector<int32_t> regroup;
  std::vector<float> weight;
  s.expert_rows.assign(local, 0);
  for (int64_t le = 0; le < local; ++le) {
    for (int64_t t = 0; t < tps; ++t) {
      int64_t start = t * s.tp_block;  // where source p's rows start in TP rank t's block
      for (int64_t p = 0; p < er.ep; ++p) {
        const double* src = all.data() + (t * er.ep + p) * slots;
        // Source p's rows for the experts before le, then this expert's.
        int64_t before = 0;
        for (int64_t pe = 0; pe < le; ++pe) before += static_cast<int64_t>(from[pe][t][p].size());
        int64_t at = start + before;
        for (int64_t slot : from[le][t][p]) {
          regroup.push_back(static_cast<int32_t>(at++));
          weight.push_back(static_cast<float>(src[slot * kSlotDoubles + 1]));
          s.origin.emplace_back(static_cast<int32_t>(t * er.ep + p), slot);
          ++s.expert_rows[le];
        }
        start += recv[t][p];
      }
    }
  }
  std::vector<int32_t> ungroup(static_cast<size_t>(rows));
  if (!dtp) {
    for (size_t i = 0; i < regroup.size(); ++i) ungroup[static_cast<size_t>(regroup[i])] = static_cast<int32_t>(i);
  }
  std::vector<int32_t> tokens;
  for (int64_t slot : r.order) tokens.push_back(static_cast<int32_t>(slot / k));
  SHARDSIM_ASSIGN_OR_RETURN(s.slot_token, ToDevice(ctx, tokens, "moe slot tokens"));
  SHARDSIM_ASSIGN_OR_RETURN(s.regroup, ToDevice(ctx, regroup, "moe regrouping"));
  SHARDSIM_ASSIGN_OR_RETURN(s.ungroup, ToDevice(ctx, ungroup, "moe regrouping"));
  SHARDSIM_ASSIGN_OR_RETURN(s.weight, ToDevice(ctx, weight, "moe combine weights"));
  // Dispatch: this rank's slots in expert order, to the members holding their experts.
  if (ctx.part() == SpanLabel::kRouter) ctx.SetPart(SpanLabel::kExperts);  // the forward's
  SHARDSIM_RETURN_IF_ERROR(ToExpertRows(ctx, er, s, x, c, dtp, kAct, "moe dispatched tokens", "moe received tokens",
                                        "expert inputs", s.input));
  const bool swiglu = m.activation == Activation::kSwiglu;
  SHARDSIM_ASSIGN_OR_RETURN(s.hidden, ctx.Alloc<T>(kAct, std::max<int64_t>(rows, 1) * f, "expert hidden"));
  if (swiglu) {
    SHARDSIM_ASSIGN_OR_RETURN(s.up, ctx.Alloc<T>(kAct, std::max<int64_t>(rows, 1) * f, "expert up projection"));
  }
  SHARDSIM_ASSIGN_OR_RETURN(s.act, ctx.Alloc<T>(kAct, std::max<int64_t>(rows, 1) * f, "expert activation"));
  DeviceBuffer y, scaled;
  SHARDSIM_ASSIGN_OR_RETURN(y, ctx.Alloc<T>(kWork, std::max<int64_t>(rows, 1) * c, "expert outputs"));
  SHARDSIM_ASSIGN_OR_RETURN(scaled, ctx.Alloc<T>(kWork, std::max<int64_t>(rows, 1) * f, "weighted expert activation"));
  int64_t at = 0;
  for (int64_t le = 0; le < local; ++le) {
    const int64_t re = s.expert_rows[le];
    const ExpertWeights<T>& w = experts[le];
    T* h = s.hidden.as<T>() + at * f;
    T* a = s.act.as<T>() + at * f;
    const T* in = s.input.as<T>() + at * c;
    // The grouped fc1 (gate and up: one weight per expert, as TEGroupedLinear keeps it).
    std::vector<TeProj<T>> fc1 = {{w.w_in, nullptr, h, f}};
    if (swiglu) fc1.push_back({w.w_up, nullptr, s.up.as<T>() + at * f, f});
    SHARDSIM_RETURN_IF_ERROR(TeForward(ctx, TeExpertModule(le, false), in, re, c, fc1));
    if (swiglu) {
      kt.SwigluForward(h, s.up.as<T>() + at * f, a, re * f);
    } else {
      kt.GeluForward(h, a, re * f);
    }
    // The combine weight multiplies the activation (moe_mlp.h), then the down projection.
    T* sc = scaled.as<T>() + at * f;
    ctx.mem().Copy(sc, a, re * f * static_cast<int64_t>(sizeof(T)));
    kt.ScaleRows(sc, s.weight.f() + at, re, f);
    SHARDSIM_RETURN_IF_ERROR(TeForward<T>(ctx, TeExpertModule(le, true), sc, re, f, {{w.w_out, nullptr, y.as<T>() + at * c, c}}));
    at += re;
  }
  scaled.Reset();
  // Combine: the outputs back to their sources, added into their tokens; under the TP gather
  // first summed over TP into each TP rank's received rows (reduce_scatter_to_sequence_parallel_region).
  DeviceBuffer back, returned;
  SHARDSIM_RETURN_IF_ERROR(ToReceivedRows(ctx, er, s, y.as<T>(), rows, c, dtp, back));
  y.Reset();
  SHARDSIM_ASSIGN_OR_RETURN(returned, ctx.Alloc<T>(kWork, std::max<int64_t>(sent, 1) * c, "moe returned outputs"));
  SHARDSIM_RETURN_IF_ERROR(Exchange(ctx, er, back.as<T>(), s.recv_rows, returned.as<T>(), s.send_rows, c,
                                      SpanLabel::kEpCombine));
  back.Reset();
  ctx.mem().Zero(out, n * c * static_cast<int64_t>(sizeof(T)));
  kt.ScatterAddRows(returned.as<T>(), s.slot_token.i32(), out, sent, c);
  return Status::Ok();
}

template <typename T>
Status MoeBackward(ExecContext& ctx, const BlockDims& d, const MoeRank& er, const T* router, float* drouter,
                   const std::vector<ExpertWeights<T>>& experts, const std::vector<ExpertWeights<float>>& dexperts,
                   const T* x, MoeSaved& s, const T* dout, T* dx, double aux_scale, WeightGradStash* stash) {
  const ModelSpec& m = *d.m;
  // Zero-bubble: a weight gradient's GEMM deferred to the W pass (its operands kept there).
  auto defer = [&](float* dw, float* BlockWeights<float>::*member, const T* gout, const T* in, int64_t rows,
                   int64_t kk, int64_t mm) {
    WeightGradStash::Gemm g{member, nullptr, gout, in, kk, mm};
    g.rows = rows;
    g.direct = dw;
    stash->gemms.push_back(g);
  };
  const bool split = er.input_split, dtp = er.gathers;
  const int64_t n = split ? d.n_local : d.n;  // as MoeForward
  const int64_t c = m.hidden, e_n = m.moe->experts, k = m.moe->top_k, f = m.moe->ffn_hidden;
  const int64_t local = er.LocalExperts(m);
  const int64_t tps = dtp ? er.expert_tp : 1;
  const int64_t rows = Sum(s.tp_rows), sent = Sum(s.send_rows);
  TypedKernels<T>& kt = ctx.kt<T>();
  const bool swiglu = m.activation == Activation::kSwiglu;
  // The output's gradient to the experts, as the tokens went (under the TP gather, gathered
  // over TP after the all-to-all: the backward of the forward's reduce-scatter).
  DeviceBuffer dy;
  SHARDSIM_RETURN_IF_ERROR(ToExpertRows(ctx, er, s, dout, c, dtp, kWork, "moe output gradients to send",
                                        "moe received output gradients", "expert output gradients", dy));
  // The experts' backward, expert after expert.
  DeviceBuffer dxin, scaled, dscaled, dhidden, dup, dots;
  SHARDSIM_ASSIGN_OR_RETURN(dxin, ctx.Zeros<T>(kWork, std::max<int64_t>(rows, 1) * c, "expert input gradients"));
  SHARDSIM_ASSIGN_OR_RETURN(scaled, ctx.Alloc<T>(kWork, std::max<int64_t>(rows, 1) * f, "weighted expert activation"));
  SHARDSIM_ASSIGN_OR_RETURN(dscaled, ctx.Zeros<T>(kWork, std::max<int64_t>(rows, 1) * f, "expert activation gradient"));
  SHARDSIM_ASSIGN_OR_RETURN(dhidden, ctx.Zeros<T>(kWork, std::max<int64_t>(rows, 1) * f, "expert hidden gradient"));
  if (swiglu) {
    SHARDSIM_ASSIGN_OR_RETURN(dup, ctx.Zeros<T>(kWork, std::max<int64_t>(rows, 1) * f, "expert up gradient"));
  }
  SHARDSIM_ASSIGN_OR_RETURN(dots, ctx.Alloc<double>(kWork, std::max<int64_t>(rows, 1), "combine weight gradients"));
  int64_t at = 0;
  for (int64_t le = 0; le < local; ++le) {
    const int64_t re = s.expert_rows[le];
    const ExpertWeights<T>& w = experts[le];
    const ExpertWeights<float>& dw = dexperts[le];
    const T* a = s.act.as<T>() + at * f;
    const T* in = s.input.as<T>() + at * c;
    T* sc = scaled.as<T>() + at * f;
    T* ds = dscaled.as<T>() + at * f;
    T* dh = dhidden.as<T>() + at * f;
    T* di = dxin.as<T>() + at * c;
    ctx.mem().Copy(sc, a, re * f * static_cast<int64_t>(sizeof(T)));
    kt.ScaleRows(sc, s.weight.f() + at, re, f);
    const T* gy = dy.as<T>() + at * c;
    SHARDSIM_RETURN_IF_ERROR(
        TeBackward<T>(ctx, TeExpertModule(le, true), {{gy, w.w_out, stash == nullptr ? dw.w_out : nullptr, nullptr, c}}, sc, ds, re, f));
    if (stash != nullptr) defer(dw.w_out, nullptr, gy, sc, re, f, c);
    // d weight = d(weighted activation) . activation; d activation = weight d(weighted).
    kt.RowDots(ds, a, dots.as<double>() + at, re, f);
    kt.ScaleRows(ds, s.weight.f() + at, re, f);
    T* du = swiglu ? dup.as<T>() + at * f : nullptr;
    if (swiglu) {
      kt.SwigluBackward(ds, s.hidden.as<T>() + at * f, s.up.as<T>() + at * f, dh, du, re * f);
    } else {
      kt.GeluBackward(ds, s.hidden.as<T>() + at * f, dh, re * f);
    }
    std::vector<TeGrad<T>> fc1;  // up, then gate
    if (swiglu) fc1.push_back({du, w.w_up, stash == nullptr ? dw.w_up : nullptr, nullptr, f, 1});  // forward: gate, up
    fc1.push_back({dh, w.w_in, stash == nullptr ? dw.w_in : nullptr, nullptr, f, swiglu ? 0 : -1});
    SHARDSIM_RETURN_IF_ERROR(TeBackward(ctx, TeExpertModule(le, false), fc1, in, di, re, c));
    if (stash != nullptr) {
      if (swiglu) defer(dw.w_up, nullptr, du, in, re, c, f);
      defer(dw.w_in, nullptr, dh, in, re, c, f);
    }
    at += re;
  }
  dscaled.Reset();
  if (stash != nullptr) {  // what the deferred GEMMs read
    for (DeviceBuffer* b : {&dy, &scaled, &dhidden, &dup, &s.input}) {
      if (!b->empty()) stash->keep.push_back(std::move(*b));
    }
  }
  dy.Reset();
  scaled.Reset();
  dhidden.Reset();
  dup.Reset();
  // The inputs' gradients back to their tokens (under the TP gather, reduce-scattered over TP
  // first: the backward of the forward's all-gather).
  {
    DeviceBuffer back, returned;
    SHARDSIM_RETURN_IF_ERROR(ToReceivedRows(ctx, er, s, dxin.as<T>(), rows, c, dtp, back));
    dxin.Reset();
    SHARDSIM_ASSIGN_OR_RETURN(returned, ctx.Alloc<T>(kWork, std::max<int64_t>(sent, 1) * c, "moe returned input gradients"));
    SHARDSIM_RETURN_IF_ERROR(Exchange(ctx, er, back.as<T>(), s.recv_rows, returned.as<T>(), s.send_rows, c,
                                      SpanLabel::kEpCombine));
    back.Reset();
    kt.ScatterAddRows(returned.as<T>(), s.slot_token.i32(), dx, sent, c);
  }
  // The combine weights' gradients back to their sources (summed over kEp, each slot's from the
  // one member that holds its expert; over TP where the experts split over it, each TP rank's
  // dots covering its slice of the experts' F), then the router's backward. Sources are indexed
  // as MoeSaved::origin.
  std::vector<double> host_dots(static_cast<size_t>(rows));
  if (rows > 0) ctx.mem().CopyToHost(host_dots.data(), dots.data(), rows * static_cast<int64_t>(sizeof(double)));
  dots.Reset();
  std::vector<double> dweights(static_cast<size_t>(tps * er.ep * n * k), 0.0);
  for (int64_t i = 0; i < rows; ++i) dweights[s.origin[i].first * n * k + s.origin[i].second] = host_dots[i];
  SHARDSIM_RETURN_IF_ERROR(ctx.Comm(Phase::kEpComm, 0, [&] {
    return ctx.comm().AllReduceSumHost(Group::kEp, dweights.data(), static_cast<int64_t>(dweights.size()));
  }, SpanLabel::kEpRouting));
  if (er.expert_tp > 1) {  // each expert-TP rank's dots cover its slice of the experts' F: summed
    SHARDSIM_RETURN_IF_ERROR(ctx.Comm(Phase::kTpComm, 0, [&] {
      return ctx.comm().AllReduceSumHost(er.expert_tp_group, dweights.data(), static_cast<int64_t>(dweights.size()));
    }, SpanLabel::kEpRouting));
  }
  std::vector<float> dlogits(static_cast<size_t>(n * e_n));
  const int64_t source = (dtp ? er.expert_tp_rank * er.ep : 0) + er.rank;
  RouteBackward<float>(s.routing, dweights.data() + source * n * k, aux_scale, dlogits.data());
  DeviceBuffer dl;
  if constexpr (std::is_same_v<T, float>) {
    SHARDSIM_ASSIGN_OR_RETURN(dl, ToDevice(ctx, dlogits, "router logit gradients"));
  } else {
    std::vector<T> narrowed(dlogits.size());
    for (size_t i = 0; i < dlogits.size(); ++i) narrowed[i] = ToBf16(dlogits[i]);
    SHARDSIM_ASSIGN_OR_RETURN(dl, ToDevice(ctx, narrowed, "router logit gradients"));
  }
  // Where every TP rank routes all rows dx is partial over TP (the experts' MLPs are split), and
  // the router's input gradient is the same on every TP rank: each adds it for its share of the
  // rows (its SP rows), so the TP sum has it once. The router's weight gradient: from those rows
  // under SP (summed over TP with the norms'), else from all rows on every TP rank (replicated,
  // whole). Where each TP rank routes its own rows dx is those rows', whole (reduce-scattered
  // over TP under the gather; the experts whole under etp=1), and all its rows are its own.
  const bool own_rows = er.tp == 1 || split;
  const int64_t lo = own_rows ? 0 : n * er.tp_rank / er.tp, hi = own_rows ? n : n * (er.tp_rank + 1) / er.tp;
  const int64_t from = own_rows || !er.sp ? 0 : lo, to = own_rows || !er.sp ? n : hi;
  if (stash != nullptr) {  // the router's weight gradient waits for W, with its operands
    kt.LinearBackward(dl.as<T>() + lo * e_n, nullptr, router, dx + lo * c, nullptr, nullptr, hi - lo, c, e_n);
    defer(nullptr, &BlockWeights<float>::router, dl.as<T>() + from * e_n, x + from * c, to - from, c, e_n);
    stash->gemms.back().te = false;  // a torch linear, 16-bit under fp8
    stash->keep.push_back(std::move(dl));
  } else if (own_rows) {
    kt.LinearBackward(dl.as<T>(), x, router, dx, drouter, nullptr, n, c, e_n);
  } else {
    kt.LinearBackward(dl.as<T>() + lo * e_n, nullptr, router, dx + lo * c, nullptr, nullptr, hi - lo, c, e_n);
    kt.LinearBackward(dl.as<T>() + from * e_n, x + from * c, nullptr, nullptr, drouter, nullptr, to - from, c, e_n);
  }
  return Status::Ok();
}

#define SHARDSIM_INSTANTIATE_MOE_BLOCK(T)                                                                       \
  template Status MoeForward(ExecContext&, const BlockDims&, const MoeRank&, const T*,                          \
                             const std::vector<ExpertWeights<T>>&, const T*, T*, MoeSaved&);                    \
  template Status MoeBackward(ExecContext&, const BlockDims&, const MoeRank&, const T*, float*,                 \
                              const std::vector<ExpertWeights<T>>&, const std::vector<ExpertWeights<float>>&,   \
                              const T*, MoeSaved&, const T*, T*, double, WeightGradStash*);
SHARDSIM_INSTANTIATE_MOE_BLOCK(float)
SHARDSIM_INSTANTIATE_MOE_BLOCK(Bf16)
#undef SHARDSIM_INSTANTIATE_MOE_BLOCK

}  // namespace shardsim::runtime
