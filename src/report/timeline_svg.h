// The drawing pieces the HTML reports share (runtime/report/compare.h's predicted-vs-measured
// report, planner/plan_html.h's plan report): a step's timeline as inline SVG, a row per (rank,
// stream), a colour per breakdown category, a 1-2-5 time axis with grid lines and a tooltip per
// span; its legend; HTML escaping. Self-contained output: no script, no network.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/sim/simulator.h"

namespace shardsim {

// One span of a timeline.
struct TimelineSpan {
  int pid = 0;            // rank
  std::string thread;     // stream name
  std::string category;   // breakdown category (compute, tp_comm, ..., bubble), or the event name
  double start_us = 0, duration_us = 0;
  std::string name;       // the task ("attention forward", "dp gradient all-reduce", ...)
  int64_t layer = -1, microbatch = -1;  // -1 when none
};

std::string HtmlEscape(const std::string& s);
// A fixed colour per breakdown category (forward and backward apart), memory kind (weights,
// gradients, ...; also as "memory weights") and anything else grey.
std::string CategoryColor(std::string category);
// The breakdown category of a simulator task from its stream and name (simulate --trace's
// events carry no category): the stream's communication kind, or on the compute stream
// recompute, bubble (a receive), optimizer or compute.
std::string CategoryOfSpan(const std::string& stream, const std::string& name);
// The colour key a span is drawn with: its category, compute split into forward and backward.
std::string DrawnCategory(const TimelineSpan& s);
// Spacing of about `want` ticks over `span`: 1, 2 or 5 times a power of ten.
double TickStep(double span, int want);

// The categories drawn in `timelines`, each with its swatch, as <p id="legend">, then `note`.
std::string TimelineLegend(const std::vector<const std::vector<TimelineSpan>*>& timelines,
                           const std::string& note);
// One timeline as <svg id="`id`">: spans placed on a scale of `span_us` microseconds from the
// earliest start.
std::string TimelineSvg(const std::string& id, const std::vector<TimelineSpan>& spans, double span_us);
// The longest extent (last end - first start) of the timelines, microseconds, at least 1.
double TimelineExtent(const std::vector<const std::vector<TimelineSpan>*>& timelines);

// The spans of a traced simulation (SimOptions::trace): each task on its rank's stream row.
std::vector<TimelineSpan> TimelineOf(const SimResult& r);

}  // namespace shardsim
