// Renders planner results: the ranked table, the explanation, the no-fit advice, the
// GPU-count (Pareto) table, and the JSON with fixed keys (docs/planner.md).
#pragma once

#include <string>
#include <vector>

#include "planner/planner.h"

namespace shardsim::planner {

// `warnings`: what the inputs hold that is not modelled, how the sequence length was chosen.
std::string PlanText(const ModelSpec& m, const HardwareSpec& hw, const PlanOptions& o,
                     const PlanResult& r, const std::vector<std::string>& warnings = {});
// One row per GPU count: the best plan's throughput and scaling efficiency.
std::string ParetoText(const ModelSpec& m, const std::vector<PlanResult>& results);
std::string PlanJson(const ModelSpec& m, const HardwareSpec& hw, const PlanOptions& o,
                     const std::vector<PlanResult>& results, const std::vector<std::string>& warnings = {});

}  // namespace shardsim::planner
