// See engine.h.
#include "src/sim/engine.h"

#include <algorithm>
#include <cmath>

#include "src/util/check.h"

namespace shardsim {
namespace {

// Min-heap order: the earlier (time, seq) first.
struct Later {
  bool operator()(const Event& a, const Event& b) const {
    return a.time != b.time ? a.time > b.time : a.seq > b.seq;
  }
};

}  // namespace

SimTime ToSimTime(double seconds) {
  CHECK(seconds >= 0 && std::isfinite(seconds)) << "bad duration " << seconds;
  // Up to the next picosecond, but a product that is a whole number up to floating-point
  // error (1e-9 s -> 1000.0000000000001 ps) is that number.
  const double ps = seconds * static_cast<double>(kPicosPerSecond);
  const double nearest = std::round(ps);
  if (std::fabs(ps - nearest) <= 1e-9 * std::max(1.0, ps)) return static_cast<SimTime>(nearest);
  return static_cast<SimTime>(std::ceil(ps));
}

void Engine::Schedule(SimTime at, uint32_t kind, uint32_t target, uint64_t tag) {
  CHECK(at >= now_) << "event scheduled in the past: " << at << " < " << now_;
  heap_.push_back(Event{at, seq_++, kind, target, tag});
  std::push_heap(heap_.begin(), heap_.end(), Later());
}

bool Engine::Next(Event* out) {
  if (heap_.empty()) return false;
  std::pop_heap(heap_.begin(), heap_.end(), Later());
  *out = heap_.back();
  heap_.pop_back();
  CHECK(out->time >= now_) << "time went backwards";
  now_ = out->time;
  ++processed_;
  return true;
}

}  // namespace shardsim
