// AdamW update over the flat buffers, one tensor range at a time so weight decay can be
// switched per tensor. Moments are stored in S (fp32 when training); the bias-correction
// factors are computed in double.
#include "runtime/cpu/adamw.h"

#include <algorithm>
#include <cmath>

#include "src/util/check.h"

namespace shardsim::runtime {

template <typename S>
double GradNorm(std::span<const S> grads) {
  double sum = 0;
  for (S g : grads) sum += static_cast<double>(g) * static_cast<double>(g);
  return std::sqrt(sum);
}

template <typename S>
AdamW<S>::AdamW(const ParamLayout& layout, AdamWConfig config)
    : config_(config), m_(layout.total_size(), S(0)), v_(layout.total_size(), S(0)) {
  for (const ParamTensor& t : layout.tensors()) {
    ranges_.push_back({t.offset, t.size(), t.weight_decay});
  }
}

template <typename S>
double AdamW<S>::Step(std::span<S> params, std::span<S> grads) {
  CHECK(params.size() == m_.size() && grads.size() == m_.size())
      << params.size() << " params, " << grads.size() << " grads, " << m_.size() << " state";
  const double norm = GradNorm<S>(grads);
  StepRange(params, grads, 0, static_cast<int64_t>(m_.size()), norm);
  return norm;
}

template <typename S>
void AdamW<S>::StepRange(std::span<S> params, std::span<S> grads, int64_t begin, int64_t end,
                         double norm) {
  CHECK(params.size() == m_.size() && grads.size() == m_.size() && begin >= 0 && begin <= end &&
        end <= static_cast<int64_t>(m_.size()))
      << "range [" << begin << ", " << end << ") of " << m_.size();
  if (config_.max_grad_norm > 0 && norm > config_.max_grad_norm) {
    const S clip = static_cast<S>(config_.max_grad_norm / norm);
    for (int64_t i = begin; i < end; ++i) grads[i] *= clip;
  }
  ++step_;
  const S b1 = static_cast<S>(config_.beta1);
  const S b2 = static_cast<S>(config_.beta2);
  const S c1 = static_cast<S>(1.0 / (1.0 - std::pow(config_.beta1, step_)));
  const S c2 = static_cast<S>(1.0 / (1.0 - std::pow(config_.beta2, step_)));
  const S lr = static_cast<S>(config_.lr);
  const S eps = static_cast<S>(config_.eps);
  for (const Range& r : ranges_) {
    const S decay = r.decay ? static_cast<S>(config_.weight_decay) : S(0);
    const int64_t from = std::max(begin, r.offset), to = std::min(end, r.offset + r.size);
    for (int64_t i = from; i < to; ++i) {
      const S g = grads[i];
      m_[i] = b1 * m_[i] + (S(1) - b1) * g;
      v_[i] = b2 * v_[i] + (S(1) - b2) * g * g;
      const S m_hat = m_[i] * c1;
      const S v_hat = v_[i] * c2;
      params[i] -= lr * (m_hat / (std::sqrt(v_hat) + eps) + decay * params[i]);
    }
  }
}

template double GradNorm<float>(std::span<const float>);
template double GradNorm<double>(std::span<const double>);
template class AdamW<float>;
template class AdamW<double>;

}  // namespace shardsim::runtime
