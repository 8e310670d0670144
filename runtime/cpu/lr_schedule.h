// The learning rate of each step: linear warm-up, then constant, linear or cosine decay to a
// floor, as Megatron-LM's OptimizerParamScheduler.get_lr
// (megatron/core/optimizer_param_scheduler.py; --lr-warmup-iters, --lr-decay-style,
// --lr-decay-iters, --min-lr) with its warm-up starting from 0 (--lr-warmup-init 0):
//   s <= W (W > 0):  lr = max_lr * s / W
//   constant:        lr = max_lr
//   s > D:           lr = min_lr
//   otherwise, r = (s - W) / (D - W):
//     linear  lr = min_lr + (1 - r) (max_lr - min_lr)
//     cosine  lr = min_lr + (cos(pi r) + 1) / 2 (max_lr - min_lr)
// s counts the steps already taken (0 for the first, as Megatron-LM's num_steps before its first
// increment: with warm-up the first step's rate is 0).
#pragma once

#include <cstdint>
#include <string>

#include "src/util/status.h"

namespace shardsim::runtime {

enum class LrDecay { kConstant, kLinear, kCosine };

struct LrSchedule {
  double max_lr = 0;
  double min_lr = 0;          // Megatron-LM's --min-lr default
  int64_t warmup_steps = 0;   // W
  int64_t decay_steps = 0;    // D, the run's steps by default (Megatron-LM: --train-iters)
  LrDecay decay = LrDecay::kConstant;
};

double LearningRate(const LrSchedule& s, int64_t step);

// "constant", "linear" or "cosine".
StatusOr<LrDecay> ParseLrDecay(const std::string& name);
const char* LrDecayName(LrDecay d);

}  // namespace shardsim::runtime
