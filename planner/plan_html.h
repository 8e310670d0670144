// The plan as a self-contained HTML page (`plan --html FILE`; inline SVG, no script, no
// network): for each GPU count the search's counts, the ranked table (the winner first, the
// full layout in each row's tooltip), a time-against-memory scatter of the simulated layouts
// with their Pareto frontier (no other layout both faster and smaller) and the memory limit,
// and why the winner wins; the overall winner's simulated iteration as a timeline (one row per
// rank and stream, the colours of the breakdown, a time axis); and for a GPU range, throughput
// per GPU (and with --tokens, time to train) against the GPU count.
#pragma once

#include <string>
#include <vector>

#include "planner/planner.h"
#include "src/report/timeline_svg.h"

namespace shardsim::planner {

// `winner_timeline`: the overall winner's traced simulation (TimelineOf), empty when it was
// not traced; `timeline_note` says what the timeline shows or why it is missing.
std::string PlanHtml(const ModelSpec& m, const HardwareSpec& hw, const PlanOptions& o,
                     const std::vector<PlanResult>& results, const std::vector<TimelineSpan>& winner_timeline,
                     const std::string& timeline_note, const std::vector<std::string>& warnings = {});

// The spans of `r` (a traced simulation) the page draws: at most `max_ranks` ranks (the first
// two stages, the middle one and the last, when there are more) and on them at most
// `max_spans` spans, the earliest first. *note says what was left out ("" when nothing).
std::vector<TimelineSpan> WinnerTimeline(const SimResult& r, size_t max_ranks, size_t max_spans, std::string* note);

}  // namespace shardsim::planner
