// The CUDA-graphs advice `estimate`, `simulate` and `plan` print for a launch-bound step
// (docs/cost-model.md, "CUDA graphs"): the step time the same layout would take with each
// layer replayed from a graph (cuda_graphs=layers), by the estimate.
#pragma once

#include <optional>
#include <string>

#include "src/hardware/cluster.h"
#include "src/layout/layout.h"
#include "src/layout/stack.h"
#include "src/model/model_spec.h"

namespace shardsim::cli {

// nullopt unless the layout runs without graphs, its host is priced and graphs would shorten
// the estimated step by more than 0.1 %; else the warning, saying whether `stack` (when
// given) runs graphs. `estimated_s`: the layout's own estimate where the caller has it.
std::optional<std::string> CudaGraphsAdvice(const ModelSpec& m, const Cluster& cluster, const Layout& l,
                                            const std::optional<StackSpec>& stack,
                                            std::optional<double> estimated_s = std::nullopt);

}  // namespace shardsim::cli
