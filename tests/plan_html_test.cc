// The plan as an HTML page (planner/plan_html.h, `plan --html`): for a real plan over a GPU
// range, the page holds a ranked table per GPU count with a row per simulated layout (the
// winner first and marked), a scatter with a point per row and the memory limit, the winner's
// timeline with its legend, and the scaling chart with a point per GPU count; the timeline's
// choice of ranks and spans; and every text escaped. (HtmlReportRendersInChromium renders the
// page that `plan --html` writes.)
#include <gtest/gtest.h>

#include <string>

#include "planner/plan_html.h"
#include "src/hardware/cluster.h"
#include "src/sim/simulator.h"
#include "tests/test_models.h"

namespace shardsim::planner {
namespace {

int Count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + what.size())) ++n;
  return n;
}

// The text between `open` (first occurrence) and the next `close`.
std::string Between(const std::string& s, const std::string& open, const std::string& close) {
  const size_t a = s.find(open);
  if (a == std::string::npos) return "";
  const size_t b = s.find(close, a);
  return s.substr(a, b == std::string::npos ? std::string::npos : b - a);
}

TEST(PlanHtml, TablesScattersTimelineAndScalingOfARealPlan) {
  // 2 nodes x 4 GPUs (test_models.h's figures); a small Llama-style model whose name needs
  // escaping.
  const HardwareSpec hw = testing::TestCluster(2, 4, "300 GB/s", "3 us", "200 Gb/s", "5 us", 4, 2, "8 us");
  const Cluster cluster(hw);
  ModelSpec m = testing::GqaTestModel();
  m.name = "tiny<&>";
  PlanOptions o;
  o.global_batch = 32;
  o.top_k = 3;
  o.threads = 2;
  std::vector<PlanResult> results;
  for (int64_t gpus : {4, 8}) {
    o.gpus = gpus;
    StatusOr<PlanResult> r = Plan(m, cluster, o);
    ASSERT_TRUE(r.ok()) << r.status().message();
    ASSERT_GE(r->ranked.size(), 3u);  // --top 3, and ties may add more
    results.push_back(*r);
  }
  SimOptions so;
  so.trace = true;
  so.critical_path = false;
  StatusOr<SimResult> traced = Simulate(m, cluster, results[1].ranked.front().layout, so);
  ASSERT_TRUE(traced.ok());
  std::string note;
  const std::vector<TimelineSpan> spans = WinnerTimeline(*traced, 4, 100000, &note);
  const std::string html = PlanHtml(m, hw, o, results, spans, note);

  // The model's name appears escaped only.
  EXPECT_EQ(Count(html, "tiny<&>"), 0);
  EXPECT_GE(Count(html, "tiny&lt;&amp;&gt;"), 2);  // title and heading
  for (const PlanResult& r : results) {
    const std::string n = std::to_string(r.gpus);
    // One header row and one row per simulated layout, the first the winner.
    const std::string table = Between(html, "<table id=\"ranked-" + n + "\">", "</table>");
    ASSERT_FALSE(table.empty()) << n;
    EXPECT_EQ(Count(table, "<tr"), 1 + static_cast<int>(r.ranked.size())) << n;
    EXPECT_EQ(Count(table, "<tr class=\"winner\">"), 1) << n;
    EXPECT_LT(table.find("<tr class=\"winner\">"), table.find("<td>2</td>")) << n;
    EXPECT_NE(table.find(FormatLayout(r.ranked.front().layout)), std::string::npos) << n;  // the row's tooltip
    // A point per simulated layout (one of them the winner's), the memory limit and both axes.
    const std::string scatter = Between(html, "<svg id=\"scatter-" + n + "\"", "</svg>");
    ASSERT_FALSE(scatter.empty()) << n;
    EXPECT_EQ(Count(scatter, "<circle"), static_cast<int>(r.ranked.size())) << n;
    EXPECT_EQ(Count(scatter, "<circle class=\"winner\""), 1) << n;
    EXPECT_EQ(Count(scatter, "class=\"memory-limit\""), 1) << n;
    EXPECT_EQ(Count(scatter, "class=\"axis-title\""), 2) << n;
    EXPECT_GE(Count(scatter, "class=\"tick\""), 4) << n;
  }
  // The timeline: every span drawn (a symmetric run of 2 stages at most here: all its ranks),
  // the legend naming forward and backward.
  EXPECT_TRUE(note.empty()) << note;
  EXPECT_EQ(spans.size(), traced->trace.size());
  const std::string timeline = Between(html, "<svg id=\"timeline-winner\"", "</svg>");
  EXPECT_EQ(Count(timeline, "<rect"), static_cast<int>(spans.size()));
  const std::string legend = Between(html, "<p id=\"legend\">", "</p>");
  EXPECT_NE(legend.find("forward"), std::string::npos);
  EXPECT_NE(legend.find("backward"), std::string::npos);
  // Scaling: a point per GPU count, labelled with the counts.
  const std::string scaling = Between(html, "<svg id=\"scaling\"", "</svg>");
  EXPECT_EQ(Count(scaling, "<circle"), 2);
  EXPECT_EQ(Count(scaling, "<text class=\"gpus\""), 2);
  // Without --tokens there is no time-to-train chart.
  EXPECT_EQ(Count(html, "id=\"time-to-train\""), 0);
}

// Of 6 ranks at most 4 are drawn (stages 0, 1, the middle and the last), and of their spans
// the first `max_spans` by start; the note says so.
TEST(PlanHtml, TheTimelineDrawsAFewRanksAndTheFirstSpans) {
  SimResult r;
  for (int64_t rank : {0, 10, 20, 30, 40, 50}) {
    RankResult rr;
    rr.rank = rank;
    r.ranks.push_back(rr);
  }
  r.names = {{"attention forward"}};
  for (int i = 0; i < 6; ++i) {
    for (int k = 0; k < 3; ++k) {
      TraceSpan t;
      t.rank = 10 * i;
      t.stage = 0;
      t.name = 0;
      t.start = ToSimTime(1e-6 * (3 * k + i));  // ranks interleaved in time
      t.end = t.start + ToSimTime(1e-6);
      r.trace.push_back(t);
    }
  }
  std::string note;
  const std::vector<TimelineSpan> all = WinnerTimeline(r, 4, 100, &note);
  // Ranks 0, 10 (the first two), 30 (index 6 / 2 = 3) and 50 (the last): 4 x 3 spans.
  EXPECT_EQ(all.size(), 12u);
  for (const TimelineSpan& s : all) EXPECT_TRUE(s.pid == 0 || s.pid == 10 || s.pid == 30 || s.pid == 50) << s.pid;
  EXPECT_EQ(note, "4 of the 6 simulated ranks drawn");
  const std::vector<TimelineSpan> first = WinnerTimeline(r, 4, 5, &note);
  ASSERT_EQ(first.size(), 5u);
  for (size_t i = 1; i < first.size(); ++i) EXPECT_LE(first[i - 1].start_us, first[i].start_us);
  EXPECT_NE(note.find("their first 5 tasks"), std::string::npos) << note;
  EXPECT_EQ(first.front().category, "compute");
  EXPECT_EQ(DrawnCategory(first.front()), "forward");
}

}  // namespace
}  // namespace shardsim::planner
