// See data_parallel.h.
#include "runtime/mpi/data_parallel.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "runtime/cpu/train_step.h"

namespace shardsim::runtime {

DataParallelTrainer::DataParallelTrainer(Transformer<float>* model, AdamW<float>* optimizer,
                                         const Communicator* dp, int zero, int64_t micro_batch_size)
    : model_(model), optimizer_(optimizer), dp_(dp), zero_(zero), mbs_(micro_batch_size) {
  const int64_t n = static_cast<int64_t>(model_->params().size());
  const int64_t d = dp_->size();
  padded_ = (n + d - 1) / d * d;
  scratch_.assign(padded_, 0.0f);
  shard_.assign(padded_ / d, 0.0f);
}

int64_t DataParallelTrainer::shard_begin() const {
  return std::min<int64_t>(dp_->rank() * (padded_ / dp_->size()), model_->params().size());
}

int64_t DataParallelTrainer::shard_end() const {
  return std::min<int64_t>((dp_->rank() + 1) * (padded_ / dp_->size()), model_->params().size());
}

StatusOr<float> DataParallelTrainer::Step(const TokenBatch& global) {
  const int64_t d = dp_->size();
  if (global.batch % d != 0 || (global.batch / d) % mbs_ != 0) {
    return Status::Error("global batch " + std::to_string(global.batch) + " is not divisible by dp x mbs = " +
                         std::to_string(d * mbs_));
  }
  const int64_t rows = global.batch / d;
  const TokenBatch local = global.Rows(dp_->rank() * rows, rows);
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
  times_ = Times{};
  const auto t0 = Clock::now();
  // Equal shares: the global mean loss is the mean of the ranks' means, and its gradient the
  // mean of their gradients.
  float loss = AccumulateGradients(*model_, local, mbs_);
  std::span<float> grads = model_->grads();
  std::span<float> params = model_->params();
  const float scale = 1.0f / static_cast<float>(d);
  for (float& g : grads) g *= scale;
  const auto t1 = Clock::now();
  times_.compute_s = seconds(t0, t1);
  double loss_sum = loss;
  SHARDSIM_RETURN_IF_ERROR(dp_->AllReduceSum(&loss_sum, 1));
  loss = static_cast<float>(loss_sum / static_cast<double>(d));

  if (zero_ == 0) {
    SHARDSIM_RETURN_IF_ERROR(dp_->AllReduceSum(grads.data(), grads.size()));
    const auto t2 = Clock::now();
    optimizer_->Step(params, grads);
    times_.comm_s = seconds(t1, t2);
    times_.optimizer_s = seconds(t2, Clock::now());
    return loss;
  }
  // ZeRO >= 1: reduce-scatter the gradients, step this rank's shard with the global norm,
  // all-gather the parameters.
  const int64_t n = static_cast<int64_t>(grads.size());
  const int64_t per = padded_ / d;
  std::fill(scratch_.begin(), scratch_.end(), 0.0f);
  std::copy(grads.begin(), grads.end(), scratch_.begin());
  SHARDSIM_RETURN_IF_ERROR(dp_->ReduceScatterSum(scratch_.data(), shard_.data(), static_cast<size_t>(per)));
  const int64_t begin = shard_begin(), end = shard_end();
  double sumsq = 0;
  for (int64_t i = begin; i < end; ++i) {
    const double g = shard_[i - begin];
    sumsq += g * g;
    grads[i] = shard_[i - begin];
  }
  SHARDSIM_RETURN_IF_ERROR(dp_->AllReduceSum(&sumsq, 1));
  const auto t2 = Clock::now();
  optimizer_->StepRange(params, grads, begin, end, std::sqrt(sumsq));
  const auto t3 = Clock::now();
  times_.optimizer_s = seconds(t2, t3);
  std::fill(shard_.begin(), shard_.end(), 0.0f);
  std::copy(params.begin() + begin, params.begin() + end, shard_.begin());
  SHARDSIM_RETURN_IF_ERROR(dp_->AllGather(shard_.data(), scratch_.data(), static_cast<size_t>(per)));
  std::copy(scratch_.begin(), scratch_.begin() + n, params.begin());
  times_.comm_s = seconds(t1, t2) + seconds(t3, Clock::now());
  return loss;
}

}  // namespace shardsim::runtime
