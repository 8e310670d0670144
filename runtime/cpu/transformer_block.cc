// Forward and backward of one decoder block (see transformer_block.h), composed from the
// operators in runtime/cpu. Backward visits the forward's steps in reverse.
#include "runtime/cpu/transformer_block.h"

#include <algorithm>

#include "runtime/backend/bf16.h"
#include "runtime/cpu/attention.h"
#include "runtime/cpu/eigen_types.h"
#include "runtime/cpu/gelu.h"
#include "runtime/cpu/linear.h"
#include "runtime/cpu/norm.h"
#include "runtime/cpu/swiglu.h"
#include "src/util/check.h"

namespace shardsim::runtime {

template <typename S>
BlockWeights<S> BlockWeightsAt(const ParamLayout& layout, const ModelSpec& m, int64_t layer,
                               S* base) {
  auto at = [&](std::string_view suffix) -> S* {
    const int64_t offset = layout.OffsetOf(BlockParamName(layer, suffix));
    return offset < 0 ? nullptr : base + offset;
  };
  const bool swiglu = m.activation == Activation::kSwiglu;
  BlockWeights<S> w;
  w.attn_norm_gain = at("attn_norm.gain");
  w.attn_norm_bias = at("attn_norm.bias");
  w.wq = at("attn.q.weight");
  w.bq = at("attn.q.bias");
  w.wk = at("attn.k.weight");
  w.bk = at("attn.k.bias");
  w.wv = at("attn.v.weight");
  w.bv = at("attn.v.bias");
  w.wo = at("attn.out.weight");
  w.bo = at("attn.out.bias");
  w.mlp_norm_gain = at("mlp_norm.gain");
  w.mlp_norm_bias = at("mlp_norm.bias");
  w.w_in = at(swiglu ? "mlp.gate.weight" : "mlp.fc.weight");
  w.b_in = at(swiglu ? "mlp.gate.bias" : "mlp.fc.bias");
  w.w_up = swiglu ? at("mlp.up.weight") : nullptr;
  w.b_up = swiglu ? at("mlp.up.bias") : nullptr;
  w.w_out = at(swiglu ? "mlp.down.weight" : "mlp.proj.weight");
  w.b_out = at(swiglu ? "mlp.down.bias" : "mlp.proj.bias");
  w.router = at("moe.router.weight");
  CHECK(w.attn_norm_gain && w.wq && w.wk && w.wv && w.wo && w.mlp_norm_gain &&
        (w.router != nullptr || (w.w_in && w.w_out && (!swiglu || w.w_up))))
      << "layout lacks a tensor of layer " << layer;
  return w;
}

template <typename S>
void BlockActivations<S>::Resize(const ModelSpec& m, int64_t b, int64_t t) {
  const int64_t n = b * t;
  for (auto* buf : {&norm1, &mid, &norm2}) buf->resize(n * m.hidden);
  for (auto* buf : {&norm1_mean, &norm1_rstd, &norm2_mean, &norm2_rstd}) buf->resize(n);
  for (auto* buf : {&q, &attn}) buf->resize(n * m.q_dim());
  for (auto* buf : {&k, &v}) buf->resize(n * m.kv_dim());
  probs.resize(b * m.heads * t * t);
  for (auto* buf : {&hidden, &act}) buf->resize(n * m.ffn_hidden);
  up.resize(m.activation == Activation::kSwiglu ? n * m.ffn_hidden : 0);
}

template <typename S>
void BlockScratch<S>::Resize(const ModelSpec& m, int64_t b, int64_t t) {
  const int64_t n = b * t;
  dnorm.resize(n * m.hidden);
  for (auto* buf : {&dattn, &dq}) buf->resize(n * m.q_dim());
  for (auto* buf : {&dk, &dv}) buf->resize(n * m.kv_dim());
  for (auto* buf : {&dhidden, &dup, &dact}) buf->resize(n * m.ffn_hidden);
}

namespace {

template <typename S>
void Zero(std::vector<S>& v) {
  std::fill(v.begin(), v.end(), S(0));
}

// dst += src, both (N, C).
template <typename S>
void AddInto(S* dst, const S* src, int64_t size) {
  Eigen::Map<Eigen::Matrix<S, Eigen::Dynamic, 1>>(dst, size) +=
      Eigen::Map<const Eigen::Matrix<S, Eigen::Dynamic, 1>>(src, size);
}

// out = in (N, k) x wt^T + bias, then + residual (N, c).
template <typename S>
void ProjectAndAdd(const S* in, const S* wt, const S* bias, S* out, int64_t n, int64_t k,
                   int64_t c, const S* residual) {
  LinearForward(in, wt, bias, out, n, k, c);
  AddInto(out, residual, n * c);
}

}  // namespace

template <typename S>
void BlockForward(const ModelSpec& m, const BlockWeights<S>& w, const RopeTable<S>& rope,
                  const S* x, S* out, BlockActivations<S>& a, int64_t b, int64_t t, const MoeLayer<S>* moe) {
  const int64_t n = b * t, c = m.hidden, f = m.ffn_hidden;
  const int64_t qd = m.q_dim(), kvd = m.kv_dim();
  // Attention branch.
  NormForward(m.norm, x, w.attn_norm_gain, w.attn_norm_bias, a.norm1.data(), a.norm1_mean.data(),
              a.norm1_rstd.data(), n, c);
  LinearForward(a.norm1.data(), w.wq, w.bq, a.q.data(), n, c, qd);
  LinearForward(a.norm1.data(), w.wk, w.bk, a.k.data(), n, c, kvd);
  LinearForward(a.norm1.data(), w.wv, w.bv, a.v.data(), n, c, kvd);
  if (m.position == Position::kRope) {
    RopeForward(a.q.data(), rope, b, t, m.heads);
    RopeForward(a.k.data(), rope, b, t, m.kv_heads);
  }
  const AttentionShape shape{b, t, m.heads, m.kv_heads, m.head_dim};
  AttentionForward(a.q.data(), a.k.data(), a.v.data(), a.probs.data(), a.attn.data(), shape);
  ProjectAndAdd(a.attn.data(), w.wo, w.bo, a.mid.data(), n, qd, c, x);
  // MLP branch.
  NormForward(m.norm, a.mid.data(), w.mlp_norm_gain, w.mlp_norm_bias, a.norm2.data(),
              a.norm2_mean.data(), a.norm2_rstd.data(), n, c);
  if (w.router != nullptr) {
    CHECK(moe != nullptr) << "an MoE layer without its experts";
    MoeMlpForward(m, w.router, *moe, a.norm2.data(), out, a.moe, n);
    AddInto(out, a.mid.data(), n * c);
    return;
  }
  LinearForward(a.norm2.data(), w.w_in, w.b_in, a.hidden.data(), n, c, f);
  if (m.activation == Activation::kSwiglu) {
    LinearForward(a.norm2.data(), w.w_up, w.b_up, a.up.data(), n, c, f);
    SwigluForward(a.hidden.data(), a.up.data(), a.act.data(), n * f);
  } else {
    GeluForward(a.hidden.data(), a.act.data(), n * f);
  }
  ProjectAndAdd(a.act.data(), w.w_out, w.b_out, out, n, f, c, a.mid.data());
}

template <typename S>
void BlockBackward(const ModelSpec& m, const BlockWeights<S>& w, const BlockWeights<S>& dw,
                   const RopeTable<S>& rope, const S* x, const BlockActivations<S>& a, S* dresid,
                   BlockScratch<S>& s, int64_t b, int64_t t, const MoeLayer<S>* moe, const MoeLayer<S>* dmoe,
                   double aux_scale) {
  const int64_t n = b * t, c = m.hidden, f = m.ffn_hidden;
  const int64_t qd = m.q_dim(), kvd = m.kv_dim();
  // MLP branch; dresid already holds the residual path's share of d(mid).
  if (w.router != nullptr) {
    CHECK(moe != nullptr && dmoe != nullptr) << "an MoE layer without its experts";
    Zero(s.dnorm);
    MoeMlpBackward(m, w.router, dw.router, *moe, *dmoe, a.norm2.data(), a.moe, dresid, s.dnorm.data(), aux_scale, n);
  } else {
  Zero(s.dact);
  LinearBackward(dresid, a.act.data(), w.w_out, s.dact.data(), dw.w_out, dw.b_out, n, f, c);
  Zero(s.dhidden);
  Zero(s.dnorm);
  if (m.activation == Activation::kSwiglu) {
    Zero(s.dup);
    SwigluBackward(s.dact.data(), a.hidden.data(), a.up.data(), s.dhidden.data(), s.dup.data(),
                   n * f);
    LinearBackward(s.dup.data(), a.norm2.data(), w.w_up, s.dnorm.data(), dw.w_up, dw.b_up, n, c, f);
  } else {
    GeluBackward(s.dact.data(), a.hidden.data(), s.dhidden.data(), n * f);
  }
  LinearBackward(s.dhidden.data(), a.norm2.data(), w.w_in, s.dnorm.data(), dw.w_in, dw.b_in, n, c,
                 f);
  }
  NormBackward(m.norm, s.dnorm.data(), a.mid.data(), w.mlp_norm_gain, a.norm2_mean.data(),
               a.norm2_rstd.data(), dresid, dw.mlp_norm_gain, dw.mlp_norm_bias, n, c);
  // dresid is now d(mid). Attention branch.
  Zero(s.dattn);
  LinearBackward(dresid, a.attn.data(), w.wo, s.dattn.data(), dw.wo, dw.bo, n, qd, c);
  Zero(s.dq);
  Zero(s.dk);
  Zero(s.dv);
  const AttentionShape shape{b, t, m.heads, m.kv_heads, m.head_dim};
  AttentionBackward(s.dattn.data(), a.q.data(), a.k.data(), a.v.data(), a.probs.data(), s.dq.data(),
                    s.dk.data(), s.dv.data(), shape);
  if (m.position == Position::kRope) {
    RopeBackward(s.dq.data(), rope, b, t, m.heads);
    RopeBackward(s.dk.data(), rope, b, t, m.kv_heads);
  }
  Zero(s.dnorm);
  LinearBackward(s.dq.data(), a.norm1.data(), w.wq, s.dnorm.data(), dw.wq, dw.bq, n, c, qd);
  LinearBackward(s.dk.data(), a.norm1.data(), w.wk, s.dnorm.data(), dw.wk, dw.bk, n, c, kvd);
  LinearBackward(s.dv.data(), a.norm1.data(), w.wv, s.dnorm.data(), dw.wv, dw.bv, n, c, kvd);
  NormBackward(m.norm, s.dnorm.data(), x, w.attn_norm_gain, a.norm1_mean.data(),
               a.norm1_rstd.data(), dresid, dw.attn_norm_gain, dw.attn_norm_bias, n, c);
  // dresid is now d(x).
}

// The executor's working weights under mixed precision (runtime/exec/zero_buckets.h).
template BlockWeights<Bf16> BlockWeightsAt<Bf16>(const ParamLayout&, const ModelSpec&, int64_t, Bf16*);

#define SHARDSIM_INSTANTIATE_BLOCK(S)                                                            \
  template BlockWeights<S> BlockWeightsAt<S>(const ParamLayout&, const ModelSpec&, int64_t, S*); \
  template struct BlockActivations<S>;                                                           \
  template struct BlockScratch<S>;                                                               \
  template void BlockForward<S>(const ModelSpec&, const BlockWeights<S>&, const RopeTable<S>&,   \
                                const S*, S*, BlockActivations<S>&, int64_t, int64_t,            \
                                const MoeLayer<S>*);                                             \
  template void BlockBackward<S>(const ModelSpec&, const BlockWeights<S>&,                       \
                                 const BlockWeights<S>&, const RopeTable<S>&, const S*,          \
                                 const BlockActivations<S>&, S*, BlockScratch<S>&, int64_t,      \
                                 int64_t, const MoeLayer<S>*, const MoeLayer<S>*, double);
SHARDSIM_INSTANTIATE_BLOCK(float)
SHARDSIM_INSTANTIATE_BLOCK(double)
#undef SHARDSIM_INSTANTIATE_BLOCK

}  // namespace shardsim::runtime
