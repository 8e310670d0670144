// Gradient accumulation and the optimizer step (see train_step.h).
#include "runtime/cpu/train_step.h"

#include "src/util/check.h"

namespace shardsim::runtime {

template <typename S>
S AccumulateGradients(Transformer<S>& model, const TokenBatch& batch, int64_t micro_batch_size) {
  CHECK(micro_batch_size > 0 && batch.batch % micro_batch_size == 0)
      << "micro-batch " << micro_batch_size << " does not divide batch " << batch.batch;
  model.ZeroGrad();
  const int64_t micro_batches = batch.batch / micro_batch_size;
  if (micro_batches == 1) {
    const S loss = model.Forward(batch);
    model.Backward(S(1));
    return loss;
  }
  double loss = 0;
  for (int64_t m = 0; m < micro_batches; ++m) {
    const TokenBatch micro = batch.Rows(m * micro_batch_size, micro_batch_size);
    const double share = static_cast<double>(micro.tokens()) / static_cast<double>(batch.tokens());
    loss += share * static_cast<double>(model.Forward(micro));
    model.Backward(static_cast<S>(share));
  }
  return static_cast<S>(loss);
}

template <typename S>
S TrainStep(Transformer<S>& model, AdamW<S>& optimizer, const TokenBatch& batch,
            int64_t micro_batch_size) {
  const S loss = AccumulateGradients(model, batch, micro_batch_size);
  optimizer.Step(model.params(), model.grads());
  return loss;
}

template float AccumulateGradients<float>(Transformer<float>&, const TokenBatch&, int64_t);
template double AccumulateGradients<double>(Transformer<double>&, const TokenBatch&, int64_t);
template float TrainStep<float>(Transformer<float>&, AdamW<float>&, const TokenBatch&, int64_t);
template double TrainStep<double>(Transformer<double>&, AdamW<double>&, const TokenBatch&, int64_t);

}  // namespace shardsim::runtime
