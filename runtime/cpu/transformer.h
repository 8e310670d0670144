// Transformer: a decoder-only language model's parameters, gradients and saved activations,
// with the forward pass to the mean cross-entropy loss and the backward pass to the gradients.
// The single-process reference that every sharded layout is checked against.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "runtime/cpu/eigen_types.h"
#include "runtime/cpu/param_layout.h"
#include "runtime/cpu/rope.h"
#include "runtime/cpu/token_batch.h"
#include "runtime/cpu/transformer_block.h"
#include "src/model/model_spec.h"
#include "src/util/status.h"

namespace shardsim::runtime {

// S is the storage and compute type: float for training (fp32 master weights), double for
// gradient checks.
template <typename S>
class Transformer {
 public:
  // Parameters zero until Init; fails for what the runtime does not support (ParamLayout).
  static StatusOr<Transformer> Create(const ModelSpec& spec);

  // Deterministic initialization from `seed` (param_init.h); zeroes the gradients.
  void Init(uint64_t seed);

  // Embedding -> blocks -> final norm -> LM head -> softmax cross-entropy. Returns the mean
  // loss over the batch's B*T tokens (nats) and saves what Backward needs. T <= seq_len.
  S Forward(const TokenBatch& batch);

  // Adds the gradient of loss_scale * (the last Forward's loss + its AuxLoss()) into grads().
  void Backward(S loss_scale = S(1));
  // The last Forward's load-balancing losses, summed over its MoE layers (moe_routing.h; 0 for a
  // dense model or a zero aux_loss_coeff): what training adds to the cross-entropy.
  double AuxLoss() const;

  void ZeroGrad();

  // MoE layers: the layout's expert capacity factor (moe_capacity; 0, the default: dropless).
  void SetMoeCapacity(double factor) { moe_capacity_ = factor; }

  const ModelSpec& spec() const { return spec_; }
  const ParamLayout& layout() const { return layout_; }
  std::span<S> params() { return params_; }
  std::span<const S> params() const { return params_; }
  std::span<S> grads() { return grads_; }
  std::span<const S> grads() const { return grads_; }
  // The last Forward's logits, (B*T, V) row-major, before the softmax.
  std::span<const S> logits() const { return logits_; }
  // Named views (rows, cols) of one tensor of the flat buffers.
  MatrixMap<S> Param(std::string_view name) { return View(params_, name); }
  MatrixMap<S> Grad(std::string_view name) { return View(grads_, name); }

 private:
  Transformer(ModelSpec spec, ParamLayout layout);
  MatrixMap<S> View(std::vector<S>& buffer, std::string_view name);
  void Resize(int64_t b, int64_t t);
  S* HeadWeight(std::vector<S>& buffer);  // lm_head.weight, or embed.tokens when tied
  // Layer l's experts in `buffer` (params_ or grads_), or none for a dense layer.
  std::optional<MoeLayer<S>> MoeOf(int64_t l, std::vector<S>& buffer);
  double moe_capacity_ = 0;

  ModelSpec spec_;
  ParamLayout layout_;
  std::vector<S> params_;  // (layout_.total_size())
  std::vector<S> grads_;   // (layout_.total_size())
  RopeTable<S> rope_;      // (seq_len, head_dim / 2), RoPE models only

  // Saved by Forward for Backward; N = B*T.
  int64_t b_ = 0;
  int64_t t_ = 0;
  std::vector<int32_t> inputs_;              // (N)
  std::vector<int32_t> targets_;             // (N)
  std::vector<std::vector<S>> residual_;     // layers + 1 of (N, C): input of block l, then out
  std::vector<BlockActivations<S>> blocks_;  // one per layer
  std::vector<S> final_norm_;                // (N, C)
  std::vector<S> final_mean_;                // (N)
  std::vector<S> final_rstd_;                // (N)
  std::vector<S> logits_;                    // (N, V)
  std::vector<S> probs_;                     // (N, V)

  // Backward scratch.
  BlockScratch<S> scratch_;
  std::vector<S> dresidual_;  // (N, C)
  std::vector<S> dfinal_;     // (N, C)
  std::vector<S> dlogits_;    // (N, V)
};

}  // namespace shardsim::runtime
