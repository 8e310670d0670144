// See moe_mlp.h. Each expert's rows are gathered into a (r_e, C) block, run through the dense
// MLP operators (linear.h, swiglu.h, gelu.h) and added back weighted; the backward visits the
// same experts in the same order.
#include "runtime/cpu/moe_mlp.h"

#include <algorithm>

#include "runtime/backend/bf16.h"
#include "runtime/cpu/eigen_types.h"
#include "runtime/cpu/gelu.h"
#include "runtime/cpu/linear.h"
#include "runtime/cpu/row_ops.h"
#include "runtime/cpu/swiglu.h"
#include "src/util/check.h"

namespace shardsim::runtime {

template <typename S>
ExpertWeights<S> ExpertWeightsAt(const ParamLayout& layout, const ModelSpec& m, int64_t layer, int64_t expert,
                                 S* base) {
  auto at = [&](std::string_view suffix) -> S* {
    const int64_t offset = layout.OffsetOf(ExpertParamName(layer, expert, suffix));
    return offset < 0 ? nullptr : base + offset;
  };
  const bool swiglu = m.activation == Activation::kSwiglu;
  ExpertWeights<S> w;
  w.w_in = at(swiglu ? "gate.weight" : "fc.weight");
  w.w_up = swiglu ? at("up.weight") : nullptr;
  w.w_out = at(swiglu ? "down.weight" : "proj.weight");
  CHECK(w.w_in && w.w_out && (!swiglu || w.w_up)) << "layout lacks expert " << expert << " of layer " << layer;
  return w;
}

// The slots of expert e's rows (its run of the dispatch order), their tokens and weights.
struct ExpertRows {
  std::vector<int32_t> token;
  std::vector<double> weight;
};

ExpertRows RowsOf(const MoeRouting& r, int64_t at, int64_t rows) {
  ExpertRows x;
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t slot = r.order[at + i];
    x.token.push_back(static_cast<int32_t>(slot / r.top_k));
    x.weight.push_back(r.weight[slot]);
  }
  return x;
}

template <typename S>
void MoeMlpForward(const ModelSpec& m, const S* router, const MoeLayer<S>& layer, const S* x, S* out,
                   MoeActivations<S>& a, int64_t n) {
  const int64_t c = m.hidden, e_n = m.moe->experts, k = m.moe->top_k, f = m.moe->ffn_hidden;
  CHECK(static_cast<int64_t>(layer.experts.size()) == e_n) << layer.experts.size() << " experts of " << e_n;
  std::vector<S> logits(n * e_n);
  LinearForward<S>(x, router, nullptr, logits.data(), n, c, e_n);
  a.routing = Route<S>(logits.data(), n, e_n, k, layer.capacity_factor, m.moe->aux_loss_coeff);
  const MoeRouting& r = a.routing;
  for (auto* v : {&a.hidden, &a.up, &a.act}) v->assign(e_n, {});
  std::fill(out, out + n * c, S(0));
  int64_t at = 0;
  for (int64_t e = 0; e < e_n; ++e) {
    const int64_t rows = r.per_expert[e];
    const ExpertRows slots = RowsOf(r, at, rows);
    std::vector<S> xin(rows * c), scaled(rows * f), y(rows * c);
    GatherRows(x, slots.token.data(), xin.data(), rows, c);
    const ExpertWeights<S>& w = layer.experts[e];
    a.hidden[e].resize(rows * f);
    a.act[e].resize(rows * f);
    LinearForward<S>(xin.data(), w.w_in, nullptr, a.hidden[e].data(), rows, c, f);
    if (m.activation == Activation::kSwiglu) {
      a.up[e].resize(rows * f);
      LinearForward<S>(xin.data(), w.w_up, nullptr, a.up[e].data(), rows, c, f);
      SwigluForward(a.hidden[e].data(), a.up[e].data(), a.act[e].data(), rows * f);
    } else {
      GeluForward(a.hidden[e].data(), a.act[e].data(), rows * f);
    }
    // The combine weight applied to the activation, before the down projection (Megatron-Core
    // v0.13's memory-efficient permutation: the probs multiply the experts' activation, so the
    // combine adds the outputs as they are and keeps no (slots, C) tensor for their gradient).
    std::copy(a.act[e].begin(), a.act[e].end(), scaled.begin());
    ScaleRows(scaled.data(), slots.weight.data(), rows, f);
    LinearForward<S>(scaled.data(), w.w_out, nullptr, y.data(), rows, f, c);
    ScatterAddRows(y.data(), slots.token.data(), out, rows, c);
    at += rows;
  }
}

template <typename S>
void MoeMlpBackward(const ModelSpec& m, const S* router, S* drouter, const MoeLayer<S>& layer,
                    const MoeLayer<S>& dlayer, const S* x, const MoeActivations<S>& a, const S* dout, S* dx,
                    double aux_scale, int64_t n) {
  const int64_t c = m.hidden, e_n = m.moe->experts, f = m.moe->ffn_hidden;
  const MoeRouting& r = a.routing;
  std::vector<double> dweight(r.tokens * r.top_k, 0.0);
  int64_t at = 0;
  for (int64_t e = 0; e < e_n; ++e) {
    const int64_t rows = r.per_expert[e];
    const ExpertRows slots = RowsOf(r, at, rows);
    std::vector<S> xin(rows * c), dy(rows * c), scaled(a.act[e]), dscaled(rows * f, S(0));
    GatherRows(x, slots.token.data(), xin.data(), rows, c);
    GatherRows(dout, slots.token.data(), dy.data(), rows, c);
    ScaleRows(scaled.data(), slots.weight.data(), rows, f);
    const ExpertWeights<S>& w = layer.experts[e];
    const ExpertWeights<S>& dw = dlayer.experts[e];
    LinearBackward<S>(dy.data(), scaled.data(), w.w_out, dscaled.data(), dw.w_out, nullptr, rows, f, c);
    // d weight = d(scaled) . act; d act = weight d(scaled).
    std::vector<double> dots(rows);
    RowDots(dscaled.data(), a.act[e].data(), dots.data(), rows, f);
    for (int64_t i = 0; i < rows; ++i) dweight[r.order[at + i]] = dots[i];
    ScaleRows(dscaled.data(), slots.weight.data(), rows, f);
    std::vector<S> dhidden(rows * f, S(0)), dup, dxin(rows * c, S(0));
    if (m.activation == Activation::kSwiglu) {
      dup.assign(rows * f, S(0));
      SwigluBackward(dscaled.data(), a.hidden[e].data(), a.up[e].data(), dhidden.data(), dup.data(), rows * f);
      LinearBackward<S>(dup.data(), xin.data(), w.w_up, dxin.data(), dw.w_up, nullptr, rows, c, f);
    } else {
      GeluBackward(dscaled.data(), a.hidden[e].data(), dhidden.data(), rows * f);
    }
    LinearBackward<S>(dhidden.data(), xin.data(), w.w_in, dxin.data(), dw.w_in, nullptr, rows, c, f);
    ScatterAddRows(dxin.data(), slots.token.data(), dx, rows, c);
    at += rows;
  }
  std::vector<S> dlogits(n * e_n);
  RouteBackward<S>(r, dweight.data(), aux_scale, dlogits.data());
  LinearBackward<S>(dlogits.data(), x, router, dx, drouter, nullptr, n, c, e_n);
}

#define SHARDSIM_INSTANTIATE_MOE(S)                                                                     \
  template ExpertWeights<S> ExpertWeightsAt<S>(const ParamLayout&, const ModelSpec&, int64_t, int64_t, S*); \
  template void MoeMlpForward<S>(const ModelSpec&, const S*, const MoeLayer<S>&, const S*, S*,             \
                                 MoeActivations<S>&, int64_t);                                             \
  template void MoeMlpBackward<S>(const ModelSpec&, const S*, S*, const MoeLayer<S>&, const MoeLayer<S>&,  \
                                  const S*, const MoeActivations<S>&, const S*, S*, double, int64_t);
SHARDSIM_INSTANTIATE_MOE(float)
SHARDSIM_INSTANTIATE_MOE(double)
#undef SHARDSIM_INSTANTIATE_MOE
template ExpertWeights<Bf16> ExpertWeightsAt<Bf16>(const ParamLayout&, const ModelSpec&, int64_t, int64_t, Bf16*);

}  // namespace shardsim::runtime
