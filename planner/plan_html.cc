// See plan_html.h.
#include "planner/plan_html.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>
#include <sstream>

#include "planner/plan_report.h"
#include "src/report/compute_fit.h"
#include "src/report/error_band.h"
#include "src/util/strings.h"

namespace shardsim::planner {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// A chart's frame: the plot area inside margins; x from 0, y from y_min.
struct Frame {
  double left = 70, top = 20, width = 560, height = 300;
  double x_max = 1, y_min = 0, y_max = 1;
  double X(double v) const { return left + width * v / x_max; }
  double Y(double v) const { return top + height * (1 - (v - y_min) / (y_max - y_min)); }
};

// y's ticks: about 6 at 1-2-5 steps from the first multiple of the step at or above y_min.
std::vector<double> YTicks(const Frame& f) {
  const double step = TickStep(f.y_max - f.y_min, 6);
  std::vector<double> out;
  for (double v = std::ceil(f.y_min / step - 1e-9) * step; v <= f.y_max * (1 + 1e-9); v += step) out.push_back(v);
  return out;
}

// y's grid lines and tick labels (in `y_unit`).
std::string YGrid(const Frame& f, const std::string& y_unit) {
  std::ostringstream o;
  for (double v : YTicks(f)) {
    o << "<line class=\"tick\" x1=\"" << f.left << "\" y1=\"" << Fmt("%.1f", f.Y(v)) << "\" x2=\"" << f.left + f.width
      << "\" y2=\"" << Fmt("%.1f", f.Y(v)) << "\" stroke=\"#e4e4e4\"/><text x=\"" << f.left - 4 << "\" y=\""
      << Fmt("%.1f", f.Y(v) + 3) << "\" font-size=\"10\" text-anchor=\"end\">" << Fmt("%g", v) << y_unit << "</text>\n";
  }
  return o.str();
}

// The axes' titles, x under the plot, y turned along it.
std::string AxisTitles(const Frame& f, const std::string& x_title, const std::string& y_title) {
  std::ostringstream o;
  o << "<text class=\"axis-title\" x=\"" << f.left + f.width / 2 << "\" y=\"" << f.top + f.height + 32
    << "\" font-size=\"12\" text-anchor=\"middle\">" << HtmlEscape(x_title) << "</text>\n";
  o << "<text class=\"axis-title\" x=\"14\" y=\"" << f.top + f.height / 2 << "\" font-size=\"12\" text-anchor=\"middle\" "
    << "transform=\"rotate(-90 14 " << f.top + f.height / 2 << ")\">" << HtmlEscape(y_title) << "</text>\n";
  return o.str();
}

// Both axes with about 6 ticks at 1-2-5 steps, grid lines, tick labels in `x_unit`/`y_unit`
// and the axes' titles.
std::string Axes(const Frame& f, const std::string& x_title, const std::string& x_unit,
                 const std::string& y_title, const std::string& y_unit) {
  std::ostringstream o;
  const double xs = TickStep(f.x_max, 6);
  for (double v = 0; v <= f.x_max * (1 + 1e-9); v += xs) {
    o << "<line class=\"tick\" x1=\"" << Fmt("%.1f", f.X(v)) << "\" y1=\"" << f.top << "\" x2=\"" << Fmt("%.1f", f.X(v))
      << "\" y2=\"" << f.top + f.height << "\" stroke=\"#e4e4e4\"/><text x=\"" << Fmt("%.1f", f.X(v)) << "\" y=\""
      << f.top + f.height + 14 << "\" font-size=\"10\" text-anchor=\"middle\">" << Fmt("%g", v) << x_unit << "</text>\n";
  }
  o << YGrid(f, y_unit);
  o << "<line x1=\"" << f.left << "\" y1=\"" << f.top + f.height << "\" x2=\"" << f.left + f.width << "\" y2=\""
    << f.top + f.height << "\" stroke=\"#444\"/><line x1=\"" << f.left << "\" y1=\"" << f.top << "\" x2=\"" << f.left
    << "\" y2=\"" << f.top + f.height << "\" stroke=\"#444\"/>\n";
  o << AxisTitles(f, x_title, y_title);
  return o.str();
}

std::string SvgOpen(const std::string& id, const Frame& f) {
  return "<svg id=\"" + id + "\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" + Fmt("%.0f", f.left + f.width + 30) +
         "\" height=\"" + Fmt("%.0f", f.top + f.height + 44) + "\">\n";
}

// Iteration time against peak memory of the simulated layouts; the winner larger; the Pareto
// frontier (no layout both faster and smaller) joined; the memory limit dashed.
std::string Scatter(const std::string& id, const PlanResult& r) {
  Frame f;
  double memory = 0, slowest = 0, fastest = INFINITY;
  for (const Candidate& c : r.ranked) {
    memory = std::max(memory, c.sim.peak_memory_bytes / kGiB);
    slowest = std::max(slowest, c.sim.iteration_time_s);
    fastest = std::min(fastest, c.sim.iteration_time_s);
  }
  f.x_max = std::max(memory, r.memory_limit_bytes / kGiB) * 1.05;
  // The times of a ranked list are within a few % of each other: the y axis spans them (at
  // least 5 % of the slowest), not 0 to the top.
  const double pad = std::max(slowest - fastest, 0.05 * slowest) * 0.25;
  f.y_min = std::max(0.0, fastest - pad);
  f.y_max = slowest + pad;
  std::ostringstream o;
  o << SvgOpen(id, f) << Axes(f, "peak memory per GPU", " GiB", "iteration time", " s");
  const double limit = f.X(r.memory_limit_bytes / kGiB);
  o << "<line class=\"memory-limit\" x1=\"" << Fmt("%.1f", limit) << "\" y1=\"" << f.top << "\" x2=\""
    << Fmt("%.1f", limit) << "\" y2=\"" << f.top + f.height << "\" stroke=\"#e15759\" stroke-dasharray=\"5,4\"/>"
    << "<text x=\"" << Fmt("%.1f", limit - 4) << "\" y=\"" << f.top + 12
    << "\" font-size=\"10\" text-anchor=\"end\" fill=\"#e15759\">memory limit</text>\n";
  // The frontier: by memory, each point faster than every smaller one.
  std::vector<const Candidate*> by_memory;
  for (const Candidate& c : r.ranked) by_memory.push_back(&c);
  std::stable_sort(by_memory.begin(), by_memory.end(), [](const Candidate* a, const Candidate* b) {
    return a->sim.peak_memory_bytes < b->sim.peak_memory_bytes;
  });
  std::ostringstream points;
  double best = INFINITY;
  for (const Candidate* c : by_memory) {
    if (c->sim.iteration_time_s >= best) continue;
    best = c->sim.iteration_time_s;
    points << Fmt("%.1f", f.X(c->sim.peak_memory_bytes / kGiB)) << "," << Fmt("%.1f", f.Y(c->sim.iteration_time_s)) << " ";
  }
  o << "<polyline class=\"frontier\" points=\"" << points.str() << "\" fill=\"none\" stroke=\"#59a14f\" stroke-width=\"1.5\"/>\n";
  for (size_t i = 0; i < r.ranked.size(); ++i) {
    const Candidate& c = r.ranked[i];
    o << "<circle class=\"" << (i == 0 ? "winner" : "layout") << "\" cx=\"" << Fmt("%.1f", f.X(c.sim.peak_memory_bytes / kGiB))
      << "\" cy=\"" << Fmt("%.1f", f.Y(c.sim.iteration_time_s)) << "\" r=\"" << (i == 0 ? 7 : 4) << "\" fill=\""
      << (i == 0 ? "#4e79a7" : "#a0cbe8") << "\" stroke=\"#222\"><title>#" << i + 1 << " " << HtmlEscape(ShortLayout(c.layout))
      << "\n" << Fmt("%.4f s", c.sim.iteration_time_s) << ", " << Fmt("%.1f GiB", c.sim.peak_memory_bytes / kGiB)
      << "</title></circle>\n";
  }
  o << "</svg>\n";
  return o.str();
}

// A value of each GPU count's best plan against the counts, evenly spaced.
std::string PerGpuCount(const std::string& id, const std::vector<PlanResult>& results, const std::string& y_title,
                        const std::string& y_unit, const std::function<double(const PlanResult&)>& value) {
  Frame f;
  f.x_max = static_cast<double>(results.size());
  std::vector<std::pair<double, double>> pts;  // (slot, value)
  double top = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    if (results[i].ranked.empty()) continue;
    pts.emplace_back(static_cast<double>(i) + 0.5, value(results[i]));
    top = std::max(top, pts.back().second);
  }
  f.y_max = (top > 0 ? top : 1) * 1.1;
  std::ostringstream o;
  o << SvgOpen(id, f);
  // The y axis as in Axes; the x axis labelled with the GPU counts instead of numbers.
  o << YGrid(f, y_unit);
  for (size_t i = 0; i < results.size(); ++i) {
    o << "<text class=\"gpus\" x=\"" << Fmt("%.1f", f.X(static_cast<double>(i) + 0.5)) << "\" y=\"" << f.top + f.height + 14
      << "\" font-size=\"10\" text-anchor=\"middle\">" << results[i].gpus << "</text>\n";
  }
  o << "<line x1=\"" << f.left << "\" y1=\"" << f.top + f.height << "\" x2=\"" << f.left + f.width << "\" y2=\""
    << f.top + f.height << "\" stroke=\"#444\"/>\n";
  o << AxisTitles(f, "GPUs", y_title);
  std::ostringstream line;
  for (const auto& [x, y] : pts) line << Fmt("%.1f", f.X(x)) << "," << Fmt("%.1f", f.Y(y)) << " ";
  o << "<polyline points=\"" << line.str() << "\" fill=\"none\" stroke=\"#4e79a7\" stroke-width=\"1.5\"/>\n";
  for (const auto& [x, y] : pts) {
    o << "<circle class=\"point\" cx=\"" << Fmt("%.1f", f.X(x)) << "\" cy=\"" << Fmt("%.1f", f.Y(y))
      << "\" r=\"4\" fill=\"#4e79a7\"><title>" << Fmt("%.4g", y) << HtmlEscape(y_unit) << "</title></circle>\n";
  }
  o << "</svg>\n";
  return o.str();
}

std::string Percent(double f) { return Fmt("%.1f %%", 100 * f); }

}  // namespace

std::vector<TimelineSpan> WinnerTimeline(const SimResult& r, size_t max_ranks, size_t max_spans, std::string* note) {
  std::vector<int64_t> ranks;
  for (const RankResult& rr : r.ranks) ranks.push_back(rr.rank);
  std::set<int64_t> drawn(ranks.begin(), ranks.end());
  if (ranks.size() > max_ranks && max_ranks >= 4) {
    drawn = {ranks[0], ranks[1], ranks[ranks.size() / 2], ranks.back()};
  } else if (ranks.size() > max_ranks) {
    drawn = std::set<int64_t>(ranks.begin(), ranks.begin() + static_cast<std::ptrdiff_t>(max_ranks));
  }
  std::vector<TimelineSpan> out;
  for (TimelineSpan& s : TimelineOf(r)) {
    if (drawn.count(s.pid)) out.push_back(std::move(s));
  }
  std::stable_sort(out.begin(), out.end(), [](const TimelineSpan& a, const TimelineSpan& b) { return a.start_us < b.start_us; });
  note->clear();
  if (drawn.size() < ranks.size()) {
    *note = std::to_string(drawn.size()) + " of the " + std::to_string(ranks.size()) + " simulated ranks drawn";
  }
  if (out.size() > max_spans) {
    const double end_ms = out[max_spans].start_us / 1e3;
    out.resize(max_spans);
    *note += std::string(note->empty() ? "" : "; ") + "their first " + std::to_string(max_spans) +
             " tasks, up to " + Fmt("%.3f ms", end_ms) + " of the iteration";
  }
  return out;
}

std::string PlanHtml(const ModelSpec& m, const HardwareSpec& hw, const PlanOptions& o,
                     const std::vector<PlanResult>& results, const std::vector<TimelineSpan>& winner_timeline,
                     const std::string& timeline_note, const std::vector<std::string>& warnings) {
  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>shardsim plan: " << HtmlEscape(m.name)
    << "</title>\n<style>body{font-family:sans-serif;margin:20px}table{border-collapse:collapse}"
       "td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}td.layout{text-align:left;font-family:monospace}"
       "tr.winner{font-weight:bold;background:#eef4fb}code{word-break:break-all}p{max-width:1150px;overflow-wrap:anywhere}</style>\n</head><body>\n";
  h << "<h1>shardsim plan: " << HtmlEscape(m.name) << " on " << HtmlEscape(hw.name) << "</h1>\n";
  h << "<p id=\"inputs\">" << HtmlEscape(hw.gpu.name) << "; global batch " << o.global_batch << " sequences of "
    << m.seq_len << " tokens; objective " << (o.objective == Objective::kThroughput ? "throughput"
                                              : o.objective == Objective::kTimeToTrain ? "time to train" : "cost")
    << (o.stack ? "; stack " + HtmlEscape(o.stack->name) : "; every layout (no stack)") << "<br>"
    << HtmlEscape(ComputeFitText(hw)) << "</p>\n";
  for (const std::string& w : warnings) h << "<p class=\"warning\">warning: " << HtmlEscape(w) << "</p>\n";
  const Candidate* overall = nullptr;
  for (const PlanResult& r : results) {
    if (!r.ranked.empty() && (!overall || Score(r.ranked.front(), m, hw, o) < Score(*overall, m, hw, o))) {
      overall = &r.ranked.front();
    }
  }
  for (const PlanResult& r : results) {
    const std::string n = std::to_string(r.gpus);
    h << "<h2 id=\"gpus-" << n << "\">" << n << " GPUs</h2>\n";
    h << "<p class=\"counts\">" << r.enumerated << " layouts enumerated"
      << (r.stack.empty() ? "" : " (" + std::to_string(r.stack_refused) + " left out: the stack cannot run them)") << ", "
      << r.invalid << " invalid, " << r.pruned_memory << " over memory (limit " << Fmt("%.1f GiB", r.memory_limit_bytes / kGiB)
      << "), " << r.dominated << " dominated; " << r.bounded << " bounded, " << r.estimated << " estimated, "
      << r.simulated << " simulated.</p>\n";
    if (r.ranked.empty()) {
      h << "<p><b>No layout fits.</b> Closest (least over memory):</p>\n<ul>\n";
      for (const Candidate& c : r.closest) {
        h << "<li>" << Fmt("%.1f GiB", c.memory_bytes / kGiB) << " <code>" << HtmlEscape(FormatLayout(c.layout)) << "</code></li>\n";
      }
      h << "</ul>\n<p>What would help the closest one:</p>\n<ul>\n";
      for (const std::string& a : r.advice) h << "<li>" << HtmlEscape(a) << "</li>\n";
      h << "</ul>\n";
      continue;
    }
    h << "<table id=\"ranked-" << n << "\"><tr><th>#</th><th>layout</th><th>iteration (s)</th><th>TFLOP/s per GPU</th>"
      << "<th>MFU</th><th>peak memory (GiB)</th><th>headroom</th><th>bubble</th><th>exposed comm</th></tr>\n";
    for (size_t i = 0; i < r.ranked.size(); ++i) {
      const Candidate& c = r.ranked[i];
      h << "<tr" << (i == 0 ? " class=\"winner\"" : "") << "><td>" << i + 1 << "</td><td class=\"layout\" title=\""
        << HtmlEscape(FormatLayout(c.layout)) << "\">" << HtmlEscape(ShortLayout(c.layout)) << "</td><td>"
        << Fmt("%.4f", c.sim.iteration_time_s) << "</td><td>" << Fmt("%.1f", c.sim.model_tflops_per_gpu) << "</td><td>"
        << Percent(c.sim.mfu) << "</td><td>" << Fmt("%.1f", c.sim.peak_memory_bytes / kGiB) << "</td><td>"
        << Percent(1 - c.sim.peak_memory_bytes / r.memory_limit_bytes) << "</td><td>"
        << Percent(CriticalShare(c, {Category::kBubble})) << "</td><td>" << Percent(ExposedCommFraction(c)) << "</td></tr>\n";
    }
    h << "</table>\n";
    if (r.ties > 1) {
      h << "<p>" << r.ties << " layouts within " << Fmt("%.1f %%", 100 * o.tie_tolerance)
        << " of the fastest are ties; row 1 is the most robust of them.</p>\n";
    }
    const Candidate& w = r.ranked.front();
    h << "<p class=\"winner\">winner: <code>" << HtmlEscape(FormatLayout(w.layout)) << "</code><br>"
      << HtmlEscape(ErrorBandText(hw, w.layout.dtype, w.sim.iteration_time_s)) << "</p>\n";
    if (!r.why.empty()) h << "<p class=\"why\">why: " << HtmlEscape(r.why) << "</p>\n";
    h << "<h3>Iteration time against peak memory (the simulated layouts; green: no other is both faster and "
         "smaller)</h3>\n"
      << Scatter("scatter-" + n, r);
  }
  if (overall) {
    h << "<h2>The winner's iteration, simulated</h2>\n<p><code>" << HtmlEscape(FormatLayout(overall->layout))
      << "</code>" << (timeline_note.empty() ? "" : "<br>" + HtmlEscape(timeline_note)) << "</p>\n";
    if (!winner_timeline.empty()) {
      h << TimelineLegend({&winner_timeline}, "A pipeline bubble is a gap on the compute row.")
        << TimelineSvg("timeline-winner", winner_timeline, TimelineExtent({&winner_timeline}));
    }
  }
  if (results.size() > 1) {
    h << "<h2>Scaling: the best plan at each GPU count</h2>\n"
      << PerGpuCount("scaling", results, "tokens/s per GPU", "", [&](const PlanResult& r) {
           return r.ranked.front().sim.tokens_per_s / static_cast<double>(r.gpus);
         });
    if (o.tokens > 0) {
      h << PerGpuCount("time-to-train", results, "days to train " + Fmt("%.3g tokens", o.tokens), " d",
                       [&](const PlanResult& r) { return o.tokens / r.ranked.front().sim.tokens_per_s / 86400; });
    }
  }
  h << "</body></html>\n";
  return h.str();
}

}  // namespace shardsim::planner
