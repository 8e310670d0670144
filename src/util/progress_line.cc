// See progress_line.h.
#include "src/util/progress_line.h"

#include <algorithm>
#include <cstdio>
#include <utility>

namespace shardsim {

ProgressLine::ProgressLine(std::string command, bool tty, std::string final_stage)
    : command_(std::move(command)),
      final_stage_(std::move(final_stage)),
      tty_(tty),
      last_draw_(std::chrono::steady_clock::now() - std::chrono::seconds(1)) {}

void ProgressLine::Update(const std::string& prefix, const std::string& stage, double fraction) {
  const auto now = std::chrono::steady_clock::now();
  const bool changed = stage != last_stage_;
  last_stage_ = stage;
  if (!tty_) {
    if (changed) std::fprintf(stderr, "%s: %s%s\n", command_.c_str(), prefix.c_str(), stage.c_str());
    return;
  }
  const double f = std::clamp(fraction, 0.0, 1.0);
  if (!changed && f < 1 && now - last_draw_ < std::chrono::milliseconds(200)) return;
  last_draw_ = now;
  std::fprintf(stderr, "\r%s%-9s [%-30s] %3.0f%%", prefix.c_str(), stage.c_str(),
               std::string(static_cast<size_t>(30 * f), '#').c_str(), 100 * f);
  if (f >= 1 && stage == final_stage_) std::fprintf(stderr, "\n");
}

}  // namespace shardsim
