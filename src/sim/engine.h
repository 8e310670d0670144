// Engine: a deterministic discrete-event core. Simulated time is an integer count of
// picoseconds; events are ordered by (time, sequence number), so equal times run in the
// order they were scheduled (ns-3's scheduler). An object, never a global: each simulation
// and each test builds its own. Time never goes backwards (CHECKed).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace shardsim {

using SimTime = int64_t;  // picoseconds
inline constexpr SimTime kPicosPerSecond = 1'000'000'000'000;

// Seconds to simulated time, rounded up so a non-zero duration never becomes zero.
SimTime ToSimTime(double seconds);
inline double ToSeconds(SimTime t) { return static_cast<double>(t) / kPicosPerSecond; }

struct Event {
  SimTime time = 0;
  uint64_t seq = 0;
  uint32_t kind = 0;    // the owner's event type
  uint32_t target = 0;  // the owner's object index
  uint64_t tag = 0;     // free payload (e.g. a version to drop stale events)
};

class Engine {
 public:
  // Schedules an event at absolute time `at` (>= now).
  void Schedule(SimTime at, uint32_t kind, uint32_t target, uint64_t tag = 0);
  // Pops the earliest event into `out` and advances now(); false when none is left.
  bool Next(Event* out);

  SimTime now() const { return now_; }
  uint64_t events_processed() const { return processed_; }
  size_t pending() const { return heap_.size(); }

 private:
  std::vector<Event> heap_;  // binary min-heap on (time, seq)
  SimTime now_ = 0;
  uint64_t seq_ = 0;
  uint64_t processed_ = 0;
};

}  // namespace shardsim
