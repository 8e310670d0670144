// Predicted vs measured (runtime/report/compare.h) on hand-made simulate / run documents: the
// errors are (predicted - measured) / measured of the numbers below.
#include <gtest/gtest.h>

#include <string>

#include "runtime/report/compare.h"

namespace shardsim::runtime {
namespace {

// Two stages; the simulator reports rank 1's breakdown (stage 1).
const char* kSim = R"({"model": "tiny", "hardware": "cpu-host", "layout": "L",
  "iteration_time_s": 0.012, "tokens_per_s": 1000, "peak_memory_bytes": 4000,
  "memory_breakdown": {"weights": 1000, "gradients": 1000, "optimizer": 1000, "activations": 800, "other": 200},
  "time_breakdown": {"compute": 0.009, "bubble": 0.003},
  "time_breakdown_rank": 1,
  "ranks": [{"rank": 0, "stage": 0, "peak_memory_bytes": 4000}, {"rank": 1, "stage": 1, "peak_memory_bytes": 3000}]})";
// Measured: the top-level breakdown holds per-category maxima; rank 1's is the comparable one.
const char* kRun = R"({"model": "tiny", "hardware": "cpu-host", "layout": "L", "backend": "cpu",
  "iteration_time_s": 0.010, "tokens_per_s": 1200, "peak_memory_bytes": 5000,
  "memory_breakdown": {"weights": 1000, "gradients": 1000, "optimizer": 1000, "activations": 1500, "other": 500},
  "time_breakdown": {"compute": 0.009, "bubble": 0.004},
  "ranks": [{"rank": 0, "stage": 0, "peak_memory_bytes": 5000, "time_breakdown": {"compute": 0.009, "bubble": 0.001}},
            {"rank": 1, "stage": 1, "peak_memory_bytes": 2500, "time_breakdown": {"compute": 0.008, "bubble": 0.002}}]})";

TEST(Compare, ErrorsOfStepPhasesAndMemory) {
  StatusOr<Comparison> c = Compare(kSim, kRun, "sim.json", "run.json");
  ASSERT_TRUE(c.ok()) << c.status().message();
  // Step: (0.012 - 0.010) / 0.010 = +20 %.
  EXPECT_NEAR(c->step.error(), 0.2, 1e-12);
  // Phases against measured rank 1: compute (0.009 - 0.008) / 0.008 = +12.5 %; bubble
  // (0.003 - 0.002) / 0.002 = +50 % (not the 0.004 maximum over the ranks).
  ASSERT_EQ(c->phases[0].name, "compute");
  EXPECT_NEAR(c->phases[0].error(), 0.125, 1e-12);
  EXPECT_EQ(c->phases[7].name, "bubble");
  EXPECT_NEAR(c->phases[7].error(), 0.5, 1e-12);
  // Memory per rank against the rank's stage: 4000 vs 5000 = -20 %; 3000 vs 2500 = +20 %.
  ASSERT_EQ(c->rank_memory.size(), 2u);
  EXPECT_NEAR(c->rank_memory[0].error(), -0.2, 1e-12);
  EXPECT_NEAR(c->rank_memory[1].error(), 0.2, 1e-12);
  // Activations 800 vs 1500.
  EXPECT_EQ(c->memory_breakdown[3].name, "memory activations");
  EXPECT_NEAR(c->memory_breakdown[3].error(), (800.0 - 1500.0) / 1500.0, 1e-12);
  const std::string md = ComparisonMarkdown(*c);
  EXPECT_NE(md.find("| iteration_time_s | 12.000 ms | 10.000 ms | +20.0 % |"), std::string::npos) << md;
}

TEST(Compare, HtmlHasEveryChartAndNoNetwork) {
  StatusOr<Comparison> c = Compare(kSim, kRun, "sim.json", "run.json");
  ASSERT_TRUE(c.ok());
  const std::vector<TraceSpan> spans = {{0, "compute", "compute", 0, 100, "layer 0 forward", 0, 0},
                                        {1, "compute", "bubble", 50, 25, "receive", -1, 0}};
  const std::string html = ComparisonHtml(*c, spans, spans);
  for (const char* id : {"timeline-predicted", "timeline-measured", "phases", "memory", "rank-memory", "summary"}) {
    EXPECT_NE(html.find(std::string("id=\"") + id + "\""), std::string::npos) << id;
  }
  // Self-contained: every "http" is the SVG namespace (no script, style or image fetched).
  auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t at = html.find(what); at != std::string::npos; at = html.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("http"), count("http://www.w3.org/2000/svg"));
  EXPECT_EQ(count("<script"), 0u);
}

// The timeline's reading aids: a legend of the categories drawn, forward and backward in two
// colours, about 8 ticks at 1-2-5 steps, and tooltips with the name, rank, stream, start,
// duration, layer and micro-batch.
TEST(Compare, TimelineHasALegendTicksAndFullTooltips) {
  StatusOr<Comparison> c = Compare(kSim, kRun, "sim.json", "run.json");
  ASSERT_TRUE(c.ok());
  TraceSpan fwd{0, "compute", "compute", 0, 400, "layer 2 forward", 2, 1};
  TraceSpan bwd{0, "compute", "compute", 400, 600, "layer 2 backward", 2, 1};
  const std::string html = ComparisonHtml(*c, {fwd, bwd}, {fwd});
  EXPECT_NE(html.find("id=\"legend\""), std::string::npos);
  EXPECT_NE(html.find(">forward"), std::string::npos);
  EXPECT_NE(html.find(">backward"), std::string::npos);
  // Forward #4e79a7 and backward #76b7b2 (Color's table), each on a rect.
  EXPECT_NE(html.find("fill=\"#4e79a7\"><title>layer 2 forward (forward)"), std::string::npos) << html;
  EXPECT_NE(html.find("fill=\"#76b7b2\"><title>layer 2 backward (backward)"), std::string::npos);
  EXPECT_NE(html.find("rank 0, compute\nstart 0.400 ms, duration 600.0 us\nlayer 2, micro-batch 1"),
            std::string::npos);
  // A 1,000 us step at about 8 ticks: a 200 us step (125 us rounds up to 2 x 10^2), ticks at
  // 0, 200, ..., 1000 us: 6 in each of the two timelines.
  size_t ticks = 0;
  for (size_t at = html.find("class=\"tick\""); at != std::string::npos; at = html.find("class=\"tick\"", at + 1)) ++ticks;
  EXPECT_EQ(ticks, 12u);
  EXPECT_NE(html.find(">1000 us</text>"), std::string::npos);
}

TEST(Compare, BadInputNamesTheFile) {
  StatusOr<Comparison> c = Compare("{\"model\": 1}", kRun, "sim.json", "run.json");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("sim.json: missing number 'iteration_time_s'"), std::string::npos);
  EXPECT_FALSE(Compare("not json [", kRun, "sim.json", "run.json").ok());
}

}  // namespace
}  // namespace shardsim::runtime
