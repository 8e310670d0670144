// See graphs_advice.h.
#include "src/cli/graphs_advice.h"

#include "src/cost/estimate.h"
#include "src/util/strings.h"

namespace shardsim::cli {

std::optional<std::string> CudaGraphsAdvice(const ModelSpec& m, const Cluster& cluster, const Layout& l,
                                            const std::optional<StackSpec>& stack, std::optional<double> estimated_s) {
  if (l.cuda_graphs != CudaGraphs::kOff || cluster.hardware().node.host.launch_s <= 0) return std::nullopt;
  const double without = estimated_s ? *estimated_s : EstimateIteration(m, cluster, l).iteration_time_s;
  Layout graphed = l;
  graphed.cuda_graphs = CudaGraphs::kLayers;
  const double with = EstimateIteration(m, cluster, graphed).iteration_time_s;
  if (!(with < without * (1 - 1e-3))) return std::nullopt;
  const bool runs = !stack || !StackRefusal(*stack, graphed).has_value();
  return "launch-bound: with each layer replayed from a CUDA graph (cuda_graphs=layers; Megatron-Core "
         "--cuda-graph-impl local) the step would take " + Fmt("%.4g", with) + " s instead of " + Fmt("%.4g", without) +
         " s (estimated)" + (runs ? std::string() : " (stack '" + stack->name + "' does not run CUDA graphs)") +
         "; the graphs' memory is not priced";
}

}  // namespace shardsim::cli
