// See tensor_parallel_trainer.h.
#include "runtime/mpi/tensor_parallel_trainer.h"

#include <chrono>
#include <cmath>
#include <string>

namespace shardsim::runtime {

TensorParallelTrainer::TensorParallelTrainer(TensorParallelModel* model, AdamW<float>* optimizer,
                                             const Communicator* dp, int64_t micro_batch_size)
    : model_(model), optimizer_(optimizer), dp_(dp), mbs_(micro_batch_size) {}

StatusOr<float> TensorParallelTrainer::Step(const TokenBatch& global) {
  const int64_t d = dp_->size();
  if (mbs_ <= 0 || global.batch % d != 0 || (global.batch / d) % mbs_ != 0) {
    return Status::Error("global batch " + std::to_string(global.batch) +
                         " is not divisible by dp x mbs = " + std::to_string(d * mbs_));
  }
  const int64_t rows = global.batch / d;
  const TokenBatch local = global.Rows(dp_->rank() * rows, rows);
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };
  times_ = Times{};
  model_->ResetCommTime();
  const auto t0 = Clock::now();
  // Gradient accumulation as runtime/cpu/train_step.cc: micro-batch m's backward scaled by its
  // share n_m / N of the replica's tokens, so the sum is the gradient of the replica's mean.
  model_->ZeroGrad();
  double loss = 0;
  for (int64_t m = 0; m < rows / mbs_; ++m) {
    const TokenBatch micro = local.Rows(m * mbs_, mbs_);
    const double share = static_cast<double>(micro.tokens()) / static_cast<double>(local.tokens());
    SHARDSIM_ASSIGN_OR_RETURN(float micro_loss, model_->Forward(micro));
    loss += share * static_cast<double>(micro_loss);
    SHARDSIM_RETURN_IF_ERROR(model_->Backward(static_cast<float>(share)));
  }
  const auto t1 = Clock::now();
  times_.tp_comm_s = model_->tp_comm_s();
  times_.compute_s = seconds(t0, t1) - times_.tp_comm_s;
  std::span<float> grads = model_->grads();
  if (d > 1) {
    // Equal replica shares: the global mean loss and its gradient are the replicas' means.
    const float scale = 1.0f / static_cast<float>(d);
    for (float& g : grads) g *= scale;
    SHARDSIM_RETURN_IF_ERROR(dp_->AllReduceSum(grads.data(), grads.size()));
    SHARDSIM_RETURN_IF_ERROR(dp_->AllReduceSum(&loss, 1));
    loss /= static_cast<double>(d);
  }
  SHARDSIM_ASSIGN_OR_RETURN(double sumsq, model_->GradSquaredNorm());
  const auto t2 = Clock::now();
  times_.dp_comm_s = seconds(t1, t2);
  optimizer_->StepRange(model_->params(), grads, 0, static_cast<int64_t>(grads.size()),
                        std::sqrt(sumsq));
  times_.optimizer_s = seconds(t2, Clock::now());
  return static_cast<float>(loss);
}

}  // namespace shardsim::runtime
