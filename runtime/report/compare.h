// Predicted (simulate --json) against measured (run --json): step time, throughput, each
// phase, peak memory per rank, with errors in percent (issue 7), and the renderings of the
// comparison: a Markdown table and a self-contained HTML report (inline SVG, no network):
// the predicted and measured timelines of one step (from the two Chrome traces, when given),
// per-phase bars, the memory breakdown, the layout and hardware.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "src/report/timeline_svg.h"
#include "src/util/status.h"

namespace shardsim::runtime {

// One compared figure: predicted, measured, error = (predicted - measured) / measured.
struct ComparedValue {
  std::string name;  // "iteration_time_s", "compute", "rank 1 peak_memory_bytes", ...
  double predicted = 0, measured = 0;
  double error() const { return measured != 0 ? (predicted - measured) / measured : 0; }
};

struct Comparison {
  std::string model, hardware, layout, backend;
  ComparedValue step;                        // iteration_time_s
  ComparedValue tokens_per_s;
  std::vector<ComparedValue> phases;         // simulate's time_breakdown keys, seconds
  std::vector<ComparedValue> rank_memory;    // per measured rank: its peak vs its stage's
  ComparedValue peak_memory;                 // the most loaded rank's, both sides
  std::vector<ComparedValue> memory_breakdown;  // weights..other of the most loaded ranks
  std::vector<std::string> notes;            // e.g. an emulated rank
};

// Parses both JSON documents (the fixed keys of docs/cli.md). Errors name the file and key.
StatusOr<Comparison> Compare(const std::string& sim_json, const std::string& run_json,
                             const std::string& sim_name, const std::string& run_name);

std::string ComparisonMarkdown(const Comparison& c);
std::string ComparisonJson(const Comparison& c);

// One span of a timeline for the report, from a Chrome trace's complete events
// (src/report/timeline_svg.h).
using TraceSpan = ::shardsim::TimelineSpan;
// The complete ("X") events of a Chrome trace JSON with their thread names resolved.
StatusOr<std::vector<TraceSpan>> ReadTrace(const std::string& trace_json, const std::string& name);

// The HTML report. Traces may be empty (the timeline section then says they were not given).
std::string ComparisonHtml(const Comparison& c, const std::vector<TraceSpan>& predicted,
                           const std::vector<TraceSpan>& measured);

}  // namespace shardsim::runtime
