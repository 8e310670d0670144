// `shardsim estimate`: analytical per-rank memory, per-op compute, per-collective time and
// step time of one layout. Text by default; --json for the fixed-key JSON (docs/cli.md).
#include <algorithm>
#include <iostream>

#include "src/cli/commands.h"
#include "src/cli/graphs_advice.h"
#include "src/cli/inputs.h"
#include "src/cost/estimate.h"
#include "src/report/estimate_report.h"
#include "src/util/atomic_file.h"

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
  if (std::optional<std::string> advice = CudaGraphsAdvice(in->model, cluster, in->layout, in->stack, est.iteration_time_s)) {
    est.warnings.push_back(*advice);
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
