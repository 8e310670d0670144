// AdamW (Loshchilov & Hutter 2019, "Decoupled Weight Decay Regularization", Algorithm 2) with
// bias correction (Kingma & Ba 2015, Algorithm 1) and global gradient-norm clipping
// (Pascanu et al. 2013, Algorithm 1). The parameters it updates are the fp32 master weights.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/cpu/param_layout.h"

namespace shardsim::runtime {

struct AdamWConfig {
  double lr = 1e-3;            // alpha, constant (no schedule yet)
  double beta1 = 0.9;          // first-moment decay
  double beta2 = 0.95;         // second-moment decay (GPT-3 / Llama use 0.95)
  double eps = 1e-8;           // added to sqrt(v_hat)
  double weight_decay = 0.1;   // lambda, decoupled; only on tensors with weight_decay set
  double max_grad_norm = 1.0;  // clip threshold for the global L2 norm; <= 0 disables
};

template <typename S>
class AdamW {
 public:
  AdamW(const ParamLayout& layout, AdamWConfig config);

  // One update, t <- t + 1:
  //   norm = ||g||_2 over all tensors; if norm > max_grad_norm: g <- g * max_grad_norm / norm
  //   m <- beta1 m + (1 - beta1) g;   v <- beta2 v + (1 - beta2) g^2
  //   m_hat = m / (1 - beta1^t);      v_hat = v / (1 - beta2^t)
  //   p <- p - lr (m_hat / (sqrt(v_hat) + eps) + lambda p)   (lambda = 0 for norms, biases)
  // Clips `grads` in place. Returns the norm before clipping.
  double Step(std::span<S> params, std::span<S> grads);

  // The same update on elements [begin, end) only, given the global gradient norm (which a
  // sharded optimizer computes across ranks): ZeRO's per-rank step. Counts as one step.
  void StepRange(std::span<S> params, std::span<S> grads, int64_t begin, int64_t end,
                 double global_norm);

  int64_t steps() const { return step_; }
  const AdamWConfig& config() const { return config_; }

 private:
  struct Range {
    int64_t offset = 0;
    int64_t size = 0;
    bool decay = false;
  };

  AdamWConfig config_;
  std::vector<Range> ranges_;  // one per tensor of the layout
  std::vector<S> m_;           // first moment, (total_size)
  std::vector<S> v_;           // second moment, (total_size)
  int64_t step_ = 0;
};

// Global L2 norm of `grads`, accumulated in double.
template <typename S>
double GradNorm(std::span<const S> grads);

}  // namespace shardsim::runtime
