// See lr_schedule.h.
#include "runtime/cpu/lr_schedule.h"

#include <cmath>
#include <numbers>

namespace shardsim::runtime {

double LearningRate(const LrSchedule& s, int64_t step) {
  const double n = static_cast<double>(step);
  if (s.warmup_steps > 0 && step <= s.warmup_steps) return s.max_lr * n / static_cast<double>(s.warmup_steps);
  if (s.decay == LrDecay::kConstant) return s.max_lr;
  if (step > s.decay_steps) return s.min_lr;
  const double ratio = (n - static_cast<double>(s.warmup_steps)) /
                       static_cast<double>(s.decay_steps - s.warmup_steps);
  const double coeff = s.decay == LrDecay::kLinear ? 1.0 - ratio : 0.5 * (std::cos(std::numbers::pi * ratio) + 1.0);
  return s.min_lr + coeff * (s.max_lr - s.min_lr);
}

StatusOr<LrDecay> ParseLrDecay(const std::string& name) {
  if (name == "constant") return LrDecay::kConstant;
  if (name == "linear") return LrDecay::kLinear;
  if (name == "cosine") return LrDecay::kCosine;
  return Status::Error("--lr-schedule: expected constant, linear or cosine, found '" + name + "'");
}

const char* LrDecayName(LrDecay d) {
  switch (d) {
    case LrDecay::kConstant: return "constant";
    case LrDecay::kLinear: return "linear";
    case LrDecay::kCosine: return "cosine";
  }
  return "?";
}

}  // namespace shardsim::runtime
