// Event engine: ordering, tie-breaking, monotone time.
#include <gtest/gtest.h>

#include "src/sim/engine.h"

namespace shardsim {
namespace {

// Events come out by time; equal times in the order they were scheduled (sequence number).
TEST(EngineTest, OrdersByTimeThenSequence) {
  Engine e;
  e.Schedule(30, 0, 1);
  e.Schedule(10, 0, 2);
  e.Schedule(20, 0, 3);
  e.Schedule(10, 0, 4);  // same time as target 2, scheduled later
  Event ev;
  std::vector<uint32_t> order;
  std::vector<SimTime> times;
  while (e.Next(&ev)) {
    order.push_back(ev.target);
    times.push_back(ev.time);
  }
  EXPECT_EQ(order, (std::vector<uint32_t>{2, 4, 3, 1}));
  EXPECT_EQ(times, (std::vector<SimTime>{10, 10, 20, 30}));
  EXPECT_EQ(e.now(), 30);
  EXPECT_EQ(e.events_processed(), 4u);
}

// An event scheduled while handling one at the same time runs after those already queued.
TEST(EngineTest, SameTimeEventsScheduledLaterRunLater) {
  Engine e;
  e.Schedule(5, 0, 1);
  e.Schedule(5, 0, 2);
  Event ev;
  ASSERT_TRUE(e.Next(&ev));
  EXPECT_EQ(ev.target, 1u);
  e.Schedule(5, 0, 3);
  ASSERT_TRUE(e.Next(&ev));
  EXPECT_EQ(ev.target, 2u);
  ASSERT_TRUE(e.Next(&ev));
  EXPECT_EQ(ev.target, 3u);
  EXPECT_FALSE(e.Next(&ev));
}

// Seconds round up to whole picoseconds: 1 ns = 1000 ps; 1e-13 s is still 1 ps, not 0.
TEST(EngineTest, ToSimTimeRoundsUp) {
  EXPECT_EQ(ToSimTime(1e-9), 1000);
  EXPECT_EQ(ToSimTime(1e-13), 1);
  EXPECT_EQ(ToSimTime(0), 0);
  EXPECT_DOUBLE_EQ(ToSeconds(kPicosPerSecond), 1.0);
}

TEST(EngineDeathTest, SchedulingInThePastAborts) {
  Engine e;
  e.Schedule(10, 0, 0);
  Event ev;
  ASSERT_TRUE(e.Next(&ev));
  EXPECT_DEATH(e.Schedule(5, 0, 0), "event scheduled in the past");
}

}  // namespace
}  // namespace shardsim
