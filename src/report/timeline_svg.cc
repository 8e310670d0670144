// See timeline_svg.h.
#include "src/report/timeline_svg.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <utility>

#include "src/util/strings.h"

namespace shardsim {

std::string HtmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string CategoryColor(std::string category) {
  if (category.rfind("memory ", 0) == 0) category = category.substr(7);
  static const std::map<std::string, std::string> kColors = {
      {"compute", "#4e79a7"}, {"forward", "#4e79a7"}, {"backward", "#76b7b2"},
      {"recompute", "#59a14f"}, {"tp_comm", "#f28e2b"}, {"cp_comm", "#edc948"},
      {"ep_comm", "#b07aa1"}, {"pp_comm", "#ff9da7"}, {"dp_comm", "#e15759"},
      {"bubble", "#bab0ac"}, {"optimizer", "#9c755f"}, {"offload", "#d37295"},
      {"weights", "#4e79a7"}, {"gradients", "#f28e2b"}, {"activations", "#59a14f"},
      {"other", "#bab0ac"}};
  auto it = kColors.find(category);
  return it == kColors.end() ? "#888888" : it->second;
}

std::string CategoryOfSpan(const std::string& stream, const std::string& name) {
  static const std::map<std::string, std::string> kByStream = {
      {"tp", "tp_comm"}, {"cp", "cp_comm"}, {"ep", "ep_comm"}, {"pp-forward", "pp_comm"},
      {"pp-backward", "pp_comm"}, {"dp", "dp_comm"}, {"offload", "offload"}};
  auto it = kByStream.find(stream);
  if (it != kByStream.end()) return it->second;
  if (name.find("recompute") != std::string::npos) return "recompute";
  if (name.rfind("receive", 0) == 0) return "bubble";  // waiting for the previous stage
  if (name.find("optimizer") != std::string::npos || name.find("adam") != std::string::npos) return "optimizer";
  return "compute";
}

std::string DrawnCategory(const TimelineSpan& s) {
  if (s.category != "compute") return s.category;
  if (s.name.find("backward") != std::string::npos) return "backward";
  if (s.name.find("forward") != std::string::npos) return "forward";
  return s.category;
}

double TickStep(double span, int want) {
  const double raw = span / want;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0}) {
    if (m * p >= raw) return m * p;
  }
  return 10 * p;
}

std::string TimelineLegend(const std::vector<const std::vector<TimelineSpan>*>& timelines,
                           const std::string& note) {
  std::vector<std::string> seen;
  for (const std::vector<TimelineSpan>* spans : timelines) {
    for (const TimelineSpan& s : *spans) {
      const std::string c = DrawnCategory(s);
      if (std::find(seen.begin(), seen.end(), c) == seen.end()) seen.push_back(c);
    }
  }
  std::sort(seen.begin(), seen.end());
  std::ostringstream o;
  o << "<p id=\"legend\">";
  for (const std::string& c : seen) {
    o << "<span style=\"display:inline-block;width:12px;height:12px;background:" << CategoryColor(c)
      << ";margin:0 4px 0 12px;vertical-align:middle\"></span>" << HtmlEscape(c);
  }
  if (!note.empty()) o << "<br><small>" << note << "</small>";
  o << "</p>\n";
  return o.str();
}

double TimelineExtent(const std::vector<const std::vector<TimelineSpan>*>& timelines) {
  double extent = 1;
  for (const std::vector<TimelineSpan>* spans : timelines) {
    if (spans->empty()) continue;
    double lo = spans->front().start_us, hi = 0;
    for (const TimelineSpan& s : *spans) {
      lo = std::min(lo, s.start_us);
      hi = std::max(hi, s.start_us + s.duration_us);
    }
    extent = std::max(extent, hi - lo);
  }
  return extent;
}

std::string TimelineSvg(const std::string& id, const std::vector<TimelineSpan>& spans, double span_us) {
  std::vector<std::pair<int, std::string>> rows;
  for (const TimelineSpan& s : spans) {
    const std::pair<int, std::string> key{s.pid, s.thread};
    if (std::find(rows.begin(), rows.end(), key) == rows.end()) rows.push_back(key);
  }
  std::sort(rows.begin(), rows.end());
  double t0 = spans.empty() ? 0 : spans.front().start_us;
  for (const TimelineSpan& s : spans) t0 = std::min(t0, s.start_us);
  const double left = 170, width = 900, row_h = 16;
  const double height = 24 + row_h * static_cast<double>(rows.size());
  std::ostringstream o;
  o << "<svg id=\"" << id << "\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << left + width + 40
    << "\" height=\"" << height << "\">\n";
  // The time axis: about 8 ticks at 1-2-5 steps, each with a faint grid line.
  const double step_us = TickStep(span_us, 8);
  for (double t = 0; t <= span_us * (1 + 1e-9); t += step_us) {
    const double x = left + width * t / span_us;
    o << "<line class=\"tick\" x1=\"" << Fmt("%.2f", x) << "\" y1=\"12\" x2=\"" << Fmt("%.2f", x) << "\" y2=\""
      << height << "\" stroke=\"#dddddd\"/><text x=\"" << Fmt("%.2f", x) << "\" y=\"10\" font-size=\"10\" "
      << "text-anchor=\"middle\">"
      << (step_us >= 1e6 ? Fmt("%g s", t / 1e6) : step_us >= 1000 ? Fmt("%g ms", t / 1e3) : Fmt("%g us", t))
      << "</text>\n";
  }
  for (size_t r = 0; r < rows.size(); ++r) {
    o << "<text x=\"4\" y=\"" << 12 + row_h * static_cast<double>(r) + 12 << "\" font-size=\"11\">rank "
      << rows[r].first << " " << HtmlEscape(rows[r].second) << "</text>\n";
  }
  for (const TimelineSpan& s : spans) {
    const size_t r = std::find(rows.begin(), rows.end(), std::pair<int, std::string>{s.pid, s.thread}) - rows.begin();
    const double x = left + width * (s.start_us - t0) / span_us;
    const double w = std::max(0.5, width * s.duration_us / span_us);
    // The tooltip: what ran, where, when and for how long.
    std::string tip = s.name.empty() ? s.category : s.name + " (" + DrawnCategory(s) + ")";
    tip += "\nrank " + std::to_string(s.pid) + ", " + s.thread + Fmt("\nstart %.3f ms, ", (s.start_us - t0) / 1e3) +
           Fmt("duration %.1f us", s.duration_us);
    if (s.layer >= 0) tip += "\nlayer " + std::to_string(s.layer);
    if (s.microbatch >= 0) tip += ", micro-batch " + std::to_string(s.microbatch);
    o << "<rect x=\"" << Fmt("%.2f", x) << "\" y=\"" << 12 + row_h * static_cast<double>(r) + 2 << "\" width=\""
      << Fmt("%.2f", w) << "\" height=\"" << row_h - 4 << "\" fill=\"" << CategoryColor(DrawnCategory(s))
      << "\"><title>" << HtmlEscape(tip) << "</title></rect>\n";
  }
  o << "</svg>\n";
  return o.str();
}

std::vector<TimelineSpan> TimelineOf(const SimResult& r) {
  std::vector<TimelineSpan> out;
  out.reserve(r.trace.size());
  for (const TraceSpan& t : r.trace) {
    TimelineSpan s;
    s.pid = t.rank;
    s.thread = StreamName(t.stream);
    const std::vector<std::string>& names = r.names[static_cast<size_t>(t.stage)];
    s.name = t.name >= 0 && static_cast<size_t>(t.name) < names.size() ? names[static_cast<size_t>(t.name)] : "";
    s.category = CategoryOfSpan(s.thread, s.name);
    s.start_us = ToSeconds(t.start) * 1e6;
    s.duration_us = ToSeconds(t.end - t.start) * 1e6;
    s.layer = t.layer;
    s.microbatch = t.microbatch;
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace shardsim
