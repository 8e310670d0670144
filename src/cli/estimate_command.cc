// `shardsim estimate`: analytical per-rank memory, per-op compute, per-collective time and
// step time of one layout. Text by default; --json for the fixed-key JSON (docs/cli.md).
#include <algorithm>
#include <iostream>

#include "src/cli/commands.h"
#include "src/cli/inputs.h"
#include "src/cost/estimate.h"
#include "src/layout/stack.h"
#include "src/report/estimate_report.h"
#include "src/util/atomic_file.h"
#include "src/util/strings.h"

namespace shardsim::cli {

int RunEstimate(int argc, char** argv) {
  std::vector<FlagSpec> flags = InputFlags();
  flags.push_back({"json", "", "print JSON instead of text", ""});
  flags.push_back({"out", "FILE", "also write the JSON to FILE (whole or not at all)", ""});
  flags.push_back({"help", "", "show this help", ""});
  StatusOr<Args> args = Args::Parse(argc, argv, 2, flags);
  if (!args.ok()) return Fail("estimate", args.status().message(), 2);
  if (args->Has("help")) {
    std::cout << "Usage: shardsim estimate [flags]\n\n"
                 "Analytical estimate of one training iteration: memory per GPU, compute per\n"
                 "operator, time per collective on the cluster graph, and the step time.\n\n"
              << FlagHelp(flags);
    return 0;
  }
  StatusOr<Inputs> in = LoadInputs(*args);
  if (!in.ok()) return Fail("estimate", in.status().message(), 1);
  const Cluster cluster(in->hardware, std::max(in->gpus, in->layout.world()));  // the job's nodes
  Estimate est = EstimateIteration(in->model, cluster, in->layout);
  est.warnings = in->warnings;
  // A launch-bound step without CUDA graphs: what replaying each layer from a graph would
  // save (layer_plan.cc HostFloor), where a framework can (the stack given, else any).
  if (in->layout.cuda_graphs == CudaGraphs::kOff && in->hardware.node.host.launch_s > 0) {
    Layout graphed = in->layout;
    graphed.cuda_graphs = CudaGraphs::kLayers;
    const double with = EstimateIteration(in->model, cluster, graphed).iteration_time_s;
    const bool runs = !in->stack || !StackRefusal(*in->stack, graphed).has_value();
    if (with < est.iteration_time_s * (1 - 1e-3)) {
      est.warnings.push_back(
          "launch-bound: with each layer replayed from a CUDA graph (cuda_graphs=layers; Megatron-Core "
          "--cuda-graph-impl local) the step would take " + Fmt("%.4g", with) + " s instead of " +
          Fmt("%.4g", est.iteration_time_s) + " s" +
          (runs ? std::string("") : " (stack '" + in->stack->name + "' does not run CUDA graphs)") +
          "; the graphs' memory is not priced");
    }
  }
  const std::string json = EstimateJson(in->model, in->hardware, est);
  if (std::optional<std::string> out = args->Get("out")) {
    Status st = WriteFileAtomically(*out, json);
    if (!st.ok()) return Fail("estimate", st.message(), 1);
  }
  std::cout << (args->Has("json") ? json : EstimateText(in->model, in->hardware, est));
  return 0;
}

}  // namespace shardsim::cli
