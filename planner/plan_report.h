// Renders planner results: the ranked table, the explanation, the no-fit advice, the
// GPU-count (Pareto) table, and the JSON with fixed keys (docs/planner.md).
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "planner/planner.h"

namespace shardsim::planner {

// The layout keys that matter for reading a table, in short: "tp8 pp4 dp2 vpp2 mbs1 z1 sp ...".
std::string ShortLayout(const Layout& l);
// The share of a simulated candidate's iteration its critical rank spends in `cats`.
double CriticalShare(const Candidate& c, std::initializer_list<Category> cats);

// `warnings`: what the inputs hold that is not modelled, how the sequence length was chosen.
std::string PlanText(const ModelSpec& m, const HardwareSpec& hw, const PlanOptions& o,
                     const PlanResult& r, const std::vector<std::string>& warnings = {});
// One row per GPU count: the best plan's throughput and scaling efficiency.
std::string ParetoText(const ModelSpec& m, const std::vector<PlanResult>& results);
std::string PlanJson(const ModelSpec& m, const HardwareSpec& hw, const PlanOptions& o,
                     const std::vector<PlanResult>& results, const std::vector<std::string>& warnings = {});

}  // namespace shardsim::planner
