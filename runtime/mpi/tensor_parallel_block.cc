// Forward and backward of one tensor-parallel block (see tensor_parallel_block.h), the same
// steps as runtime/cpu/transformer_block.cc on this rank's shard, plus one all-reduce after
// each row-parallel projection (forward) and before each norm's backward.
#include "runtime/mpi/tensor_parallel_block.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "runtime/cpu/attention.h"
#include "runtime/cpu/eigen_types.h"
#include "runtime/cpu/gelu.h"
#include "runtime/cpu/linear.h"
#include "runtime/cpu/norm.h"
#include "runtime/cpu/swiglu.h"

namespace shardsim::runtime {

Status TpGroup::AllReduceSum(float* data, size_t n) {
  const auto t0 = std::chrono::steady_clock::now();
  Status st = comm->AllReduceSum(data, n);
  comm_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return st;
}

namespace {

void Zero(std::vector<float>& v) { std::fill(v.begin(), v.end(), 0.0f); }

using Vector = Eigen::Map<Eigen::VectorXf>;
using ConstVector = Eigen::Map<const Eigen::VectorXf>;

// y (N, C) holds the partial output of a row-parallel projection: sum it over the TP group,
// then add the bias (C, or nullptr) once and the residual x (N, C).
Status ReduceAddBiasResidual(TpGroup& tp, float* y, const float* bias, const float* x, int64_t n,
                             int64_t c) {
  SHARDSIM_RETURN_IF_ERROR(tp.AllReduceSum(y, static_cast<size_t>(n * c)));
  if (bias != nullptr) MatrixMap<float>(y, n, c).rowwise() += ConstRowVectorMap<float>(bias, c);
  Vector(y, n * c) += ConstVector(x, n * c);
  return Status::Ok();
}

}  // namespace

Status TpBlockForward(const ModelSpec& m, const BlockWeights<float>& w,
                      const RopeTable<float>& rope, TpGroup& tp, const float* x, float* out,
                      BlockActivations<float>& a, int64_t b, int64_t t) {
  const int64_t n = b * t, c = m.hidden, f = m.ffn_hidden;  // f = F/tp
  const int64_t qd = m.q_dim(), kvd = m.kv_dim();           // this rank's heads
  // Attention: column-parallel Q, K, V over heads; attention is per head, so local.
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
  // Row-parallel output projection: partial sums, then g.
  LinearForward<float>(a.attn.data(), w.wo, nullptr, a.mid.data(), n, qd, c);
  SHARDSIM_RETURN_IF_ERROR(ReduceAddBiasResidual(tp, a.mid.data(), w.bo, x, n, c));
  // MLP: column-parallel first projection(s), elementwise activation, row-parallel down.
  NormForward(m.norm, a.mid.data(), w.mlp_norm_gain, w.mlp_norm_bias, a.norm2.data(),
              a.norm2_mean.data(), a.norm2_rstd.data(), n, c);
  LinearForward(a.norm2.data(), w.w_in, w.b_in, a.hidden.data(), n, c, f);
  if (m.activation == Activation::kSwiglu) {
    LinearForward(a.norm2.data(), w.w_up, w.b_up, a.up.data(), n, c, f);
    SwigluForward(a.hidden.data(), a.up.data(), a.act.data(), n * f);
  } else {
    GeluForward(a.hidden.data(), a.act.data(), n * f);
  }
  LinearForward<float>(a.act.data(), w.w_out, nullptr, out, n, f, c);
  return ReduceAddBiasResidual(tp, out, w.b_out, a.mid.data(), n, c);
}

Status TpBlockBackward(const ModelSpec& m, const BlockWeights<float>& w,
                       const BlockWeights<float>& dw, const RopeTable<float>& rope, TpGroup& tp,
                       const float* x, const BlockActivations<float>& a, float* dresid,
                       BlockScratch<float>& s, int64_t b, int64_t t) {
  const int64_t n = b * t, c = m.hidden, f = m.ffn_hidden;
  const int64_t qd = m.q_dim(), kvd = m.kv_dim();
  // MLP. d(out) is replicated, so the row-parallel layer's bias gradient is full here and its
  // input gradient d(act) is exactly this rank's columns: no communication.
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
  // f's backward: d(norm2) summed over this rank's F/tp columns -> over all F.
  SHARDSIM_RETURN_IF_ERROR(tp.AllReduceSum(s.dnorm.data(), s.dnorm.size()));
  NormBackward(m.norm, s.dnorm.data(), a.mid.data(), w.mlp_norm_gain, a.norm2_mean.data(),
               a.norm2_rstd.data(), dresid, dw.mlp_norm_gain, dw.mlp_norm_bias, n, c);
  // Attention.
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
  // f's backward for Q, K, V's shared input.
  SHARDSIM_RETURN_IF_ERROR(tp.AllReduceSum(s.dnorm.data(), s.dnorm.size()));
  NormBackward(m.norm, s.dnorm.data(), x, w.attn_norm_gain, a.norm1_mean.data(),
               a.norm1_rstd.data(), dresid, dw.attn_norm_gain, dw.attn_norm_bias, n, c);
  return Status::Ok();
}

}  // namespace shardsim::runtime
