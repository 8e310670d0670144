// TensorParallelModel: one TP rank's shard of a decoder-only transformer under Megatron-style
// tensor parallelism (Shoeybi et al. 2019): its heads' Q/K/V rows and attention-output
// columns, its 1/tp of the MLP's first projection(s) rows and down-projection columns; the
// embeddings, norms, LM head and row-parallel biases replicated. Forward and backward equal
// the single-process Transformer<float> up to floating-point summation order.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "runtime/cpu/param_layout.h"
#include "runtime/cpu/rope.h"
#include "runtime/cpu/token_batch.h"
#include "runtime/cpu/transformer.h"
#include "runtime/cpu/transformer_block.h"
#include "runtime/mpi/communicator.h"
#include "runtime/mpi/tensor_parallel_block.h"
#include "src/model/model_spec.h"
#include "src/util/status.h"

namespace shardsim::runtime {

class TensorParallelModel {
 public:
  // How one tensor of the local layout is cut out of the full one.
  enum class Split { kReplicated, kRows, kCols };

  // Fails unless tp divides heads, kv_heads and ffn_hidden, or for what the single-process
  // runtime rejects (ParamLayout::ForModel). `tp` must outlive the model.
  static StatusOr<TensorParallelModel> Create(const ModelSpec& spec, const Communicator* tp);

  // The single-process initialization (param_init.h) of the whole model with `seed`, of which
  // this rank keeps its shard: identical to Transformer<float>::Init. Zeroes the gradients.
  void Init(uint64_t seed);

  // As Transformer: mean loss over the batch's B*T tokens (identical on every TP rank), and
  // the gradient of loss_scale * loss added into grads().
  StatusOr<float> Forward(const TokenBatch& batch);
  Status Backward(float loss_scale = 1.0f);
  void ZeroGrad();

  // Squared L2 norm of the whole model's gradient (sharded tensors summed over the TP group,
  // replicated ones counted once); every TP rank gets the same value.
  StatusOr<double> GradSquaredNorm();

  // The full model's parameters in the single-process layout (full_layout()), assembled by
  // all-gathers over the TP group; replicated tensors are taken from this rank.
  StatusOr<std::vector<float>> GatherParams() { return Gather(model_.params()); }
  // The same for the gradients.
  StatusOr<std::vector<float>> GatherGrads() { return Gather(model_.grads()); }

  const ModelSpec& spec() const { return spec_; }                // the whole model
  const ModelSpec& local_spec() const { return model_.spec(); }  // heads, kv_heads, ffn / tp
  const ParamLayout& layout() const { return model_.layout(); }  // this rank's tensors
  const ParamLayout& full_layout() const { return full_layout_; }
  Split SplitOf(size_t tensor) const { return splits_[tensor]; }  // index into layout().tensors()
  // Seconds spent in the blocks' TP all-reduces since the last ResetCommTime.
  double tp_comm_s() const { return tp_.comm_s; }
  void ResetCommTime() { tp_.comm_s = 0; }
  // Bytes of the activations the last Forward saved and of Backward's scratch (as Transformer).
  int64_t ActivationBytes() const { return model_.ActivationBytes(); }
  int64_t WorkspaceBytes() const { return model_.WorkspaceBytes(); }

  std::span<float> params() { return model_.params(); }
  std::span<float> grads() { return model_.grads(); }

 private:
  TensorParallelModel(ModelSpec spec, Transformer<float> local_model, ParamLayout full,
                      const Communicator* tp);
  StatusOr<std::vector<float>> Gather(std::span<const float> local_buffer);
  // The TP group's all-reduce as the blocks' partial-sum hook.
  PartialSum<float> Reduce() {
    return [this](float* data, size_t n) { return tp_.AllReduceSum(data, n); };
  }

  ModelSpec spec_;
  // This rank's model: the single-process Transformer over the local spec (heads, kv_heads
  // and ffn_hidden divided by tp), run with Reduce() between the shards.
  Transformer<float> model_;
  ParamLayout full_layout_;
  std::vector<Split> splits_;  // per tensor of layout()
  TpGroup tp_;
};

}  // namespace shardsim::runtime
