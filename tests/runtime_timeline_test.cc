// The runtime's measured timeline (runtime/exec/timeline.h): phase names and their simulator
// streams and categories, totals, the fixed-width encoding and its gather over ranks, and the
// Chrome trace that must name ranks and streams as `simulate --trace` does.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/exec/timeline.h"
#include "src/report/sim_report.h"
#include "tests/contains.h"
#include "tests/json_syntax.h"

namespace shardsim::runtime {
namespace {

using testing::Contains;
using testing::IsStrictJson;
using PerRank = std::vector<std::vector<TimelineEvent>>;

TimelineEvent Event(Phase p, int32_t mb, int32_t chunk, int32_t layer, double start_s,
                    double duration_s, double bytes = 0, SpanLabel label = SpanLabel::kNone) {
  TimelineEvent e;
  e.label = label;
  e.phase = p;
  e.microbatch = mb;
  e.chunk = chunk;
  e.layer = layer;
  e.start_s = start_s;
  e.duration_s = duration_s;
  e.bytes = bytes;
  return e;
}

void ExpectSameEvents(const std::vector<TimelineEvent>& a, const std::vector<TimelineEvent>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].phase, b[i].phase) << i;
    EXPECT_EQ(a[i].microbatch, b[i].microbatch) << i;
    EXPECT_EQ(a[i].chunk, b[i].chunk) << i;
    EXPECT_EQ(a[i].layer, b[i].layer) << i;
    EXPECT_EQ(a[i].start_s, b[i].start_s) << i;  // doubles travel unchanged: exact
    EXPECT_EQ(a[i].duration_s, b[i].duration_s) << i;
    EXPECT_EQ(a[i].bytes, b[i].bytes) << i;
    EXPECT_EQ(a[i].label, b[i].label) << i;
  }
}

// The JSON with JsonWriter's line breaks and indentation removed, so one event reads as one
// line: {"ph": "X","name": "forward",...}. Spaces inside strings are kept.
std::string Compact(const std::string& json) {
  std::string out;
  for (size_t i = 0; i < json.size(); ++i) {
    if (json[i] == '\n') {
      while (i + 1 < json.size() && json[i + 1] == ' ') ++i;
      continue;
    }
    out += json[i];
  }
  return out;
}

size_t Count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

TEST(RuntimeTimeline, PhasesMapToTheSimulatorsStreamsAndCategories) {
  EXPECT_STREQ(StreamOf(Phase::kForward), "compute");
  EXPECT_STREQ(CategoryOf(Phase::kForward), "compute");
  EXPECT_STREQ(CategoryOf(Phase::kRecompute), "recompute");
  EXPECT_STREQ(StreamOf(Phase::kTpComm), "tp");
  EXPECT_STREQ(CategoryOf(Phase::kTpComm), "tp_comm");
  EXPECT_STREQ(StreamOf(Phase::kPpSendForward), "pp-forward");
  EXPECT_STREQ(StreamOf(Phase::kPpSendBackward), "pp-backward");
  EXPECT_STREQ(CategoryOf(Phase::kPpSendBackward), "pp_comm");
  EXPECT_STREQ(StreamOf(Phase::kPpWait), "compute");
  EXPECT_STREQ(CategoryOf(Phase::kPpWait), "bubble");
  EXPECT_STREQ(StreamOf(Phase::kDpComm), "dp");
  EXPECT_STREQ(CategoryOf(Phase::kDpComm), "dp_comm");
  EXPECT_STREQ(CategoryOf(Phase::kOptimizer), "optimizer");
  EXPECT_STREQ(StreamOf(Phase::kCpComm), "cp");
  EXPECT_STREQ(CategoryOf(Phase::kCpComm), "cp_comm");
  EXPECT_STREQ(StreamOf(Phase::kEpComm), "ep");
  EXPECT_STREQ(CategoryOf(Phase::kEpComm), "ep_comm");
  for (int p = 0; p < kPhaseCount; ++p) {
    const Phase phase = static_cast<Phase>(p);
    EXPECT_STREQ(StreamOf(phase), StreamName(PhaseStream(phase)));
    EXPECT_STREQ(CategoryOf(phase), CategoryName(PhaseCategory(phase)));
    EXPECT_GT(std::strlen(PhaseName(phase)), 0u);
  }
}

TEST(RuntimeTimeline, EncodeDecodeRoundTrip) {
  const std::vector<TimelineEvent> events = {
      Event(Phase::kForward, 0, 1, 7, 12.345678901234, 0.001234567, 0, SpanLabel::kAttention),
      Event(Phase::kPpSendBackward, 3, 0, -1, 1e9 + 0.1, 2.5e-7, 16777216),
      Event(Phase::kOptimizer, -1, -1, -1, 0, 0, 0, SpanLabel::kCpuAdam)};
  const std::vector<double> encoded = Encode(events);
  // 3 events x 9 doubles; the last double of a row tags it as an event.
  ASSERT_EQ(encoded.size(), 3u * kEncodedDoubles);
  EXPECT_EQ(encoded[kEncodedDoubles - 1], 1.0);
  ExpectSameEvents(Decode(encoded), events);

  // Zero rows are padding (how GatherTimelines evens out ranks' counts) and are dropped.
  std::vector<double> padded = encoded;
  padded.resize(encoded.size() + 2 * kEncodedDoubles, 0.0);
  ExpectSameEvents(Decode(padded), events);
  EXPECT_TRUE(Decode({}).empty());
}

TEST(RuntimeTimeline, TotalsSumByCategory) {
  // forward 0.5 + 0.25 and backward 1.0 are both "compute": 1.75 s; recompute 0.125 s;
  // tp_comm 0.0625 + 0.0625 = 0.125 s; two pp sends (either direction) 0.03125 s each =
  // 0.0625 s pp_comm; a pp wait 0.75 s is bubble; dp_comm 0.375 s; optimizer 0.5 s.
  // Every value is a sum of powers of two, so the sums are exact.
  Timeline t;
  t.Record(Event(Phase::kForward, 0, 0, 0, 0, 0.5));
  t.Record(Event(Phase::kForward, 1, 0, 0, 1, 0.25));
  t.Record(Event(Phase::kBackward, 0, 0, 0, 2, 1.0));
  t.Record(Event(Phase::kRecompute, 0, 0, 0, 3, 0.125));
  t.Record(Event(Phase::kTpComm, 0, 0, 0, 4, 0.0625, 1024));
  t.Record(Event(Phase::kTpComm, 0, 0, 1, 5, 0.0625, 1024));
  t.Record(Event(Phase::kPpSendForward, 0, 0, -1, 6, 0.03125, 4096));
  t.Record(Event(Phase::kPpSendBackward, 0, 0, -1, 7, 0.03125, 4096));
  t.Record(Event(Phase::kPpWait, 1, 0, -1, 8, 0.75));
  t.Record(Event(Phase::kDpComm, -1, -1, -1, 9, 0.375, 65536));
  t.Record(Event(Phase::kOptimizer, -1, -1, -1, 10, 0.5));
  const TimelineTotals totals = t.Totals();
  EXPECT_EQ(totals.by_category_s.at("compute"), 1.75);
  EXPECT_EQ(totals.by_category_s.at("recompute"), 0.125);
  EXPECT_EQ(totals.by_category_s.at("tp_comm"), 0.125);
  EXPECT_EQ(totals.by_category_s.at("pp_comm"), 0.0625);
  EXPECT_EQ(totals.by_category_s.at("bubble"), 0.75);
  EXPECT_EQ(totals.by_category_s.at("dp_comm"), 0.375);
  EXPECT_EQ(totals.by_category_s.at("optimizer"), 0.5);
  EXPECT_EQ(totals.forward_s, 0.75);
  EXPECT_EQ(totals.backward_s, 1.0);
  // Every key of simulate --json's time_breakdown is present, 0 where nothing was measured.
  ASSERT_EQ(totals.by_category_s.size(), static_cast<size_t>(kCategoryCount));
  for (int c = 0; c < kCategoryCount; ++c) {
    EXPECT_EQ(totals.by_category_s.count(CategoryName(static_cast<Category>(c))), 1u);
  }
  EXPECT_EQ(totals.by_category_s.at("cp_comm"), 0.0);
  EXPECT_EQ(totals.by_category_s.at("offload"), 0.0);

  t.Clear();
  EXPECT_TRUE(t.events().empty());
  EXPECT_EQ(t.Totals().by_category_s.at("compute"), 0.0);
}

TEST(RuntimeTimeline, SpanTimesItsScopeWithTheGivenClock) {
  // The clock reads 2.0 when the span opens and 2.75 when it closes: start 2.0, 0.75 s.
  std::vector<double> readings = {2.0, 2.75};
  size_t next = 0;
  Timeline t;
  {
    Timeline::Span span(
        t, [&] { return readings[next++]; }, Event(Phase::kTpComm, 1, 0, 3, 0, 0));
    span.event().bytes = 512;
    EXPECT_TRUE(t.events().empty());  // recorded only when it ends
  }
  ASSERT_EQ(t.events().size(), 1u);
  ExpectSameEvents(t.events(), {Event(Phase::kTpComm, 1, 0, 3, 2.0, 0.75, 512)});
}

// Two ranks (stage 0 and stage 1) against the origin t0 = 100 s. Times are binary fractions,
// so (start - t0) * 1e6 and duration * 1e6 are exact integers of microseconds:
//   rank 0  forward, mlp   mb 0 layer 0   100.5   + 0.25    -> ts  500000, dur 250000, tid 0
//   rank 0  pp_send_fwd    mb 0 4096 B    100.75  + 0.125   -> ts  750000, dur 125000, tid 4
//   rank 1  pp_wait        mb 0           100     + 0.875   -> ts       0, dur 875000, tid 0
//   rank 1  dp_comm        1024 B         101     + 0.0625  -> ts 1000000, dur  62500, tid 6
// (tid is the simulator's Stream index: compute 0, tp 1, cp 2, ep 3, pp-forward 4, ...).
// Named as the simulator names its tasks (src/cost/layer_plan.cc): a compute span by its part
// and pass ("mlp forward"), a pipeline send as "pp send activations" whatever its label, the
// receive's wait by its label; a span without a label by its phase ("dp_comm").
PerRank TwoRanks() {
  return {{Event(Phase::kForward, 0, 0, 0, 100.5, 0.25, 0, SpanLabel::kMlp),
           Event(Phase::kPpSendForward, 0, 0, -1, 100.75, 0.125, 4096)},
          {Event(Phase::kPpWait, 0, 0, -1, 100.0, 0.875, 0, SpanLabel::kReceiveActivations),
           Event(Phase::kDpComm, -1, -1, -1, 101.0, 0.0625, 1024)}};
}

TEST(RuntimeTimeline, ChromeTraceHasEveryEventInMicroseconds) {
  const std::string text = MeasuredChromeTrace(TwoRanks(), {0, 1}, 100.0);
  EXPECT_TRUE(IsStrictJson(text));
  const std::string c = Compact(text);
  EXPECT_EQ(Count(c, "\"ph\": \"X\""), 4u);
  EXPECT_TRUE(
      Contains(c, R"({"ph": "X","name": "mlp forward","cat": "compute","pid": 0,"tid": 0,"ts": 500000,)"
                  R"("dur": 250000,"args": {"layer": 0,"microbatch": 0,"chunk": 0}})"));
  EXPECT_TRUE(Contains(
      c, R"({"ph": "X","name": "pp send activations","cat": "pp_comm","pid": 0,"tid": 4,"ts": 750000,)"
         R"("dur": 125000,"args": {"layer": -1,"microbatch": 0,"chunk": 0,"bytes": 4096}})"));
  EXPECT_TRUE(Contains(c,
                       R"({"ph": "X","name": "receive activations","cat": "bubble","pid": 1,"tid": 0,"ts": 0,)"
                       R"("dur": 875000,"args": {"layer": -1,"microbatch": 0,"chunk": 0}})"));
  EXPECT_TRUE(Contains(
      c, R"({"ph": "X","name": "dp_comm","cat": "dp_comm","pid": 1,"tid": 6,"ts": 1000000,)"
         R"("dur": 62500,"args": {"layer": -1,"microbatch": -1,"chunk": -1,"bytes": 1024}})"));
  // Same input, same bytes.
  EXPECT_EQ(text, MeasuredChromeTrace(TwoRanks(), {0, 1}, 100.0));
}

TEST(RuntimeTimeline, ChromeTraceNamesRanksAndStreamsAsTheSimulatorDoes) {
  const std::string c = Compact(MeasuredChromeTrace(TwoRanks(), {0, 1}, 100.0));
  // One process_name and kStreamCount thread_names per rank: 2 x (1 + 8) = 18.
  EXPECT_EQ(Count(c, "\"ph\": \"M\""), 2u * (1 + kStreamCount));
  EXPECT_TRUE(Contains(
      c, R"j({"ph": "M","name": "process_name","pid": 1,"args": {"name": "rank 1 (stage 1)"}})j"));
  EXPECT_TRUE(Contains(c, std::string(R"({"ph": "M","name": "thread_name","pid": 1,"tid": 4,)") +
                              R"("args": {"name": ")" + StreamName(Stream::kPpForward) + "\"}}"));

  // The simulator's trace of the same two ranks with no tasks is, byte for byte, the measured
  // trace with no spans: the process and thread metadata are the same events.
  SimResult sim;
  sim.ranks.resize(2);
  sim.ranks[0].rank = 0;
  sim.ranks[0].stage = 0;
  sim.ranks[1].rank = 1;
  sim.ranks[1].stage = 1;
  EXPECT_EQ(MeasuredChromeTrace({{}, {}}, {0, 1}, 0.0), ChromeTrace(sim));
}

// A Collectives of `size` world ranks seen from rank 0, for the host all-gather only. The other
// ranks each contribute `peers[i]`: counts first (n == 1), then the events padded to n / 8.
class FakeWorld : public Collectives {
 public:
  explicit FakeWorld(PerRank peers) : peers_(std::move(peers)) {}
  int rank(Group) const override { return 0; }
  int size(Group) const override { return 1 + static_cast<int>(peers_.size()); }
  Status AllGatherHost(Group g, const double* in, double* out, int64_t n) override {
    EXPECT_EQ(g, Group::kWorld);
    ++calls_;
    std::copy(in, in + n, out);
    for (size_t i = 0; i < peers_.size(); ++i) {
      std::vector<double> block = calls_ == 1
                                      ? std::vector<double>{static_cast<double>(peers_[i].size())}
                                      : Encode(peers_[i]);
      EXPECT_LE(static_cast<int64_t>(block.size()), n);
      block.resize(n, 0.0);
      std::copy(block.begin(), block.end(), out + (i + 1) * n);
    }
    return Status::Ok();
  }
  int calls() const { return calls_; }

  Status AllReduce(Group, void*, int64_t, DType) override { return Unused(); }
  Status AllReduceSumHost(Group, double*, int64_t) override { return Unused(); }
  Status AllReduceMaxHost(Group, double*, int64_t) override { return Unused(); }
  Status ReduceScatter(Group, const void*, void*, int64_t, DType) override { return Unused(); }
  Status AllGatherOf(Group, const void*, void*, int64_t, DType) override { return Unused(); }
  Status AllToAllV(Group, const void*, const int64_t*, void*, const int64_t*, DType) override { return Unused(); }
  StatusOr<int64_t> Send(Group, const void*, int64_t, DType, int, int) override {
    return Unused();
  }
  StatusOr<int64_t> IallReduce(Group, void*, int64_t, DType) override { return Unused(); }
  StatusOr<int64_t> IreduceScatter(Group, const void*, void*, int64_t, DType) override { return Unused(); }
  StatusOr<int64_t> IallGatherOf(Group, const void*, void*, int64_t, DType) override { return Unused(); }
  Status Wait(int64_t) override { return Unused(); }
  StatusOr<bool> Test(int64_t) override { return Unused(); }
  Status Receive(Group, void*, int64_t, DType, int, int) override { return Unused(); }
  Status Barrier(Group) override { return Unused(); }

 private:
  static Status Unused() { return Status::Error("not used by GatherTimelines"); }
  PerRank peers_;
  int calls_ = 0;
};

TEST(RuntimeTimeline, GatherTimelinesOnOneRankReturnsItsOwnEvents) {
  FakeWorld world(PerRank{});  // no peers: size 1
  const std::vector<TimelineEvent> mine = TwoRanks()[0];
  StatusOr<PerRank> all = GatherTimelines(world, mine);
  ASSERT_TRUE(all.ok()) << all.status().message();
  ASSERT_EQ(all->size(), 1u);
  ExpectSameEvents((*all)[0], mine);
  EXPECT_EQ(world.calls(), 2);  // counts, then events
}

TEST(RuntimeTimeline, GatherTimelinesPadsToTheLongestRank) {
  // Rank 0 has 2 events, rank 1 has 3, rank 2 none: every rank sends 3 rows (24 doubles), and
  // each rank's slice is cut back to its own count.
  const std::vector<TimelineEvent> mine = TwoRanks()[0];
  std::vector<TimelineEvent> longer = TwoRanks()[1];
  longer.push_back(Event(Phase::kOptimizer, -1, -1, -1, 101.5, 0.25));
  FakeWorld world(PerRank{longer, {}});
  StatusOr<PerRank> all = GatherTimelines(world, mine);
  ASSERT_TRUE(all.ok()) << all.status().message();
  ASSERT_EQ(all->size(), 3u);
  ExpectSameEvents((*all)[0], mine);
  ExpectSameEvents((*all)[1], longer);
  EXPECT_TRUE((*all)[2].empty());
}

TEST(RuntimeTimeline, GatherTimelinesWithNoEventsSkipsTheSecondGather) {
  FakeWorld world(PerRank(1));  // one peer, no events
  StatusOr<PerRank> all = GatherTimelines(world, {});
  ASSERT_TRUE(all.ok()) << all.status().message();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_TRUE((*all)[0].empty() && (*all)[1].empty());
  EXPECT_EQ(world.calls(), 1);
}

}  // namespace
}  // namespace shardsim::runtime
