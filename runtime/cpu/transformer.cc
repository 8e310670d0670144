// The whole model's forward and backward (see transformer.h): embedding, blocks
// (transformer_block.cc), final norm, LM head, cross-entropy, and the same in reverse.
#include "runtime/cpu/transformer.h"

#include <algorithm>

#include "runtime/cpu/cross_entropy.h"
#include "runtime/cpu/embedding.h"
#include "runtime/cpu/linear.h"
#include "runtime/cpu/norm.h"
#include "runtime/cpu/param_init.h"
#include "src/util/check.h"

namespace shardsim::runtime {

template <typename S>
Transformer<S>::Transformer(ModelSpec spec, ParamLayout layout)
    : spec_(std::move(spec)),
      layout_(std::move(layout)),
      params_(layout_.total_size(), S(0)),
      grads_(layout_.total_size(), S(0)) {
  if (spec_.position == Position::kRope) {
    rope_ = MakeRopeTable<S>(spec_.seq_len, spec_.head_dim, RopeBaseOf(spec_.rotary_base));
  }
}

template <typename S>
StatusOr<Transformer<S>> Transformer<S>::Create(const ModelSpec& spec) {
  SHARDSIM_ASSIGN_OR_RETURN(ParamLayout layout, ParamLayout::ForModel(spec));
  return Transformer(spec, std::move(layout));
}

template <typename S>
void Transformer<S>::Init(uint64_t seed) {
  InitParams<S>(layout_, seed, params_);
  ZeroGrad();
}

template <typename S>
void Transformer<S>::ZeroGrad() {
  std::fill(grads_.begin(), grads_.end(), S(0));
}

template <typename S>
MatrixMap<S> Transformer<S>::View(std::vector<S>& buffer, std::string_view name) {
  const ParamTensor& t = layout_.Get(name);
  return MatrixMap<S>(buffer.data() + t.offset, t.rows, t.cols);
}

template <typename S>
S* Transformer<S>::HeadWeight(std::vector<S>& buffer) {
  const char* name = spec_.tied_embeddings ? "embed.tokens" : "lm_head.weight";
  return buffer.data() + layout_.Get(name).offset;
}

template <typename S>
std::optional<MoeLayer<S>> Transformer<S>::MoeOf(int64_t l, std::vector<S>& buffer) {
  if (!spec_.IsMoeLayer(l)) return std::nullopt;
  MoeLayer<S> moe;
  moe.capacity_factor = moe_capacity_;
  for (int64_t e = 0; e < spec_.moe->experts; ++e) {
    moe.experts.push_back(ExpertWeightsAt(layout_, spec_, l, e, buffer.data()));
  }
  return moe;
}

template <typename S>
double Transformer<S>::AuxLoss() const {
  double sum = 0;
  for (const BlockActivations<S>& a : blocks_) sum += a.moe.routing.aux_loss;
  return sum;
}

template <typename S>
void Transformer<S>::Resize(int64_t b, int64_t t) {
  if (b == b_ && t == t_) return;
  b_ = b;
  t_ = t;
  const int64_t n = b * t, c = spec_.hidden, v = spec_.vocab;
  residual_.assign(spec_.layers + 1, std::vector<S>(n * c));
  blocks_.resize(spec_.layers);
  for (BlockActivations<S>& a : blocks_) a.Resize(spec_, b, t);
  for (auto* buf : {&final_norm_, &dresidual_, &dfinal_}) buf->resize(n * c);
  for (auto* buf : {&final_mean_, &final_rstd_}) buf->resize(n);
  for (auto* buf : {&logits_, &probs_, &dlogits_}) buf->resize(n * v);
  scratch_.Resize(spec_, b, t);
}

template <typename S>
S Transformer<S>::Forward(const TokenBatch& batch) {
  CHECK(batch.batch > 0 && batch.seq > 0 && batch.seq <= spec_.seq_len)
      << "batch (" << batch.batch << ", " << batch.seq << ") vs seq_len " << spec_.seq_len;
  CHECK(static_cast<int64_t>(batch.inputs.size()) == batch.tokens() &&
        static_cast<int64_t>(batch.targets.size()) == batch.tokens());
  Resize(batch.batch, batch.seq);
  inputs_ = batch.inputs;
  targets_ = batch.targets;
  const int64_t n = b_ * t_, c = spec_.hidden, v = spec_.vocab;
  S* p = params_.data();

  const S* wpe =
      spec_.position == Position::kLearned ? p + layout_.Get("embed.positions").offset : nullptr;
  EmbeddingForward(inputs_.data(), p + layout_.Get("embed.tokens").offset, wpe, residual_[0].data(),
                   b_, t_, c, v);
  for (int64_t l = 0; l < spec_.layers; ++l) {
    const std::optional<MoeLayer<S>> moe = MoeOf(l, params_);
    BlockForward(spec_, BlockWeightsAt(layout_, spec_, l, p), rope_, residual_[l].data(),
                 residual_[l + 1].data(), blocks_[l], b_, t_, moe ? &*moe : nullptr);
  }
  const int64_t bias = layout_.OffsetOf("final_norm.bias");
  NormForward(spec_.norm, residual_[spec_.layers].data(), p + layout_.Get("final_norm.gain").offset,
              bias < 0 ? nullptr : p + bias, final_norm_.data(), final_mean_.data(),
              final_rstd_.data(), n, c);
  LinearForward<S>(final_norm_.data(), HeadWeight(params_), nullptr, logits_.data(), n, c, v);
  return CrossEntropyForward(logits_.data(), targets_.data(), probs_.data(), n, v);
}

template <typename S>
void Transformer<S>::Backward(S loss_scale) {
  CHECK(b_ > 0) << "Backward before Forward";
  const int64_t n = b_ * t_, c = spec_.hidden, v = spec_.vocab;
  S* p = params_.data();
  S* g = grads_.data();

  std::fill(dlogits_.begin(), dlogits_.end(), S(0));
  CrossEntropyBackward(probs_.data(), targets_.data(), loss_scale, dlogits_.data(), n, v);
  std::fill(dfinal_.begin(), dfinal_.end(), S(0));
  LinearBackward<S>(dlogits_.data(), final_norm_.data(), HeadWeight(params_), dfinal_.data(),
                    HeadWeight(grads_), nullptr, n, c, v);
  std::fill(dresidual_.begin(), dresidual_.end(), S(0));
  const int64_t gain = layout_.Get("final_norm.gain").offset;
  const int64_t bias = layout_.OffsetOf("final_norm.bias");
  NormBackward(spec_.norm, dfinal_.data(), residual_[spec_.layers].data(), p + gain,
               final_mean_.data(), final_rstd_.data(), dresidual_.data(), g + gain,
               bias < 0 ? nullptr : g + bias, n, c);
  for (int64_t l = spec_.layers - 1; l >= 0; --l) {
    // The aux loss weighs as the cross-entropy does: loss_scale, the micro-batch's share.
    const std::optional<MoeLayer<S>> moe = MoeOf(l, params_), dmoe = MoeOf(l, grads_);
    BlockBackward(spec_, BlockWeightsAt(layout_, spec_, l, p), BlockWeightsAt(layout_, spec_, l, g),
                  rope_, residual_[l].data(), blocks_[l], dresidual_.data(), scratch_, b_, t_,
                  moe ? &*moe : nullptr, dmoe ? &*dmoe : nullptr, static_cast<double>(loss_scale));
  }
  const int64_t wpe = layout_.OffsetOf("embed.positions");
  EmbeddingBackward(dresidual_.data(), inputs_.data(), g + layout_.Get("embed.tokens").offset,
                    wpe < 0 ? nullptr : g + wpe, b_, t_, c, v);
}

template class Transformer<float>;
template class Transformer<double>;

}  // namespace shardsim::runtime
