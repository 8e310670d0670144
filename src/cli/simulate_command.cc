// `shardsim simulate`: a discrete-event simulation of one training iteration (src/sim/):
// iteration time, throughput, MFU, a breakdown summing to the iteration time, peak memory
// per rank from the schedule, and optionally a Chrome/Perfetto trace.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>

#include "src/cli/commands.h"
#include "src/cli/graphs_advice.h"
#include "src/layout/placement.h"
#include "src/util/strings.h"
#include "src/cli/inputs.h"
#include "src/report/sim_report.h"
#include "src/sim/simulator.h"
#include "src/util/atomic_file.h"
#include "src/util/progress_line.h"

namespace shardsim::cli {

int RunSimulate(int argc, char** argv) {
  std::vector<FlagSpec> flags = InputFlags();
  flags.push_back({"full", "", "simulate every rank (default: one rank per pipeline stage)", ""});
  flags.push_back({"json", "", "print JSON instead of text", ""});
  flags.push_back({"out", "FILE", "also write the JSON to FILE (whole or not at all)", ""});
  flags.push_back({"trace", "FILE", "write a Chrome trace-event JSON (Perfetto) to FILE", ""});
  flags.push_back({"trace-ranks", "R,R,...|stages|all",
                   "with --full --trace: the ranks traced (default stages: one rank per pipeline stage, tp = cp = dp = 0)", ""});
  flags.push_back({"progress", "", "a progress line per stage on stderr even when it is not a terminal (on a terminal one redrawn line is the default, off under --json)", ""});
  flags.push_back({"help", "", "show this help", ""});
  StatusOr<Args> args = Args::Parse(argc, argv, 2, flags);
  if (!args.ok()) return Fail("simulate", args.status().message(), 2);
  if (args->Has("help")) {
    std::cout << "Usage: shardsim simulate [flags]\n\n"
                 "Discrete-event simulation of one training iteration: every rank's streams,\n"
                 "every collective on the links it crosses (shared max-min fairly), pipeline\n"
                 "bubbles and memory over time.\n\n"
              << FlagHelp(flags);
    return 0;
  }
  StatusOr<Inputs> in = LoadInputs(*args);
  if (!in.ok()) return Fail("simulate", in.status().message(), 1);
  const Cluster cluster(in->hardware, std::max(in->gpus, in->layout.world()));  // the job's nodes
  SimOptions options;
  options.full = args->Has("full");
  options.trace = args->Get("trace").has_value();
  if (const std::optional<std::string> which = args->Get("trace-ranks"); which && (!options.trace || !options.full)) {
    return Fail("simulate", "--trace-ranks needs --full and --trace (without --full every simulated rank, one per stage, is traced)", 2);
  }
  if (options.trace && options.full) {
    const std::string which = args->Get("trace-ranks").value_or("stages");
    if (which == "stages") {
      for (int32_t s = 0; s < in->layout.pp; ++s) options.trace_ranks.push_back(RankOf(in->layout, RankCoord{0, 0, 0, s}));
    } else if (which != "all") {
      for (const std::string& item : Split(which, ',')) {
        char* end = nullptr;
        const long long r = std::strtoll(item.c_str(), &end, 10);
        if (item.empty() || *end != '\0' || r < 0 || r >= in->layout.world()) {
          return Fail("simulate", "--trace-ranks: expected stages, all or ranks 0 to " + std::to_string(in->layout.world() - 1) +
                                      " separated by commas, found '" + item + "'", 2);
        }
        if (std::find(options.trace_ranks.begin(), options.trace_ranks.end(), r) == options.trace_ranks.end()) {
          options.trace_ranks.push_back(r);
        }
      }
    }
  }
  // Progress on stderr (src/util/progress_line.h): the share of the simulated tasks done.
  const bool tty = !args->Has("json") && ::isatty(2);
  ProgressLine line("simulate", tty, "running");
  if (tty || args->Has("progress")) options.progress = [&](double f) { line.Update("", "running", f); };
  StatusOr<SimResult> result = Simulate(in->model, cluster, in->layout, options);
  if (!result.ok()) return Fail("simulate", result.status().message(), 1);
  std::vector<std::string> warnings = in->warnings;
  if (std::optional<std::string> advice = CudaGraphsAdvice(in->model, cluster, in->layout, in->stack)) {
    warnings.push_back(*advice);
  }
  const std::string json = SimulationJson(in->model, in->hardware, *result, warnings);
  if (std::optional<std::string> out = args->Get("out")) {
    Status st = WriteFileAtomically(*out, json);
    if (!st.ok()) return Fail("simulate", st.message(), 1);
  }
  if (std::optional<std::string> trace = args->Get("trace")) {
    Status st = WriteFileAtomically(*trace, ChromeTrace(*result));
    if (!st.ok()) return Fail("simulate", st.message(), 1);
  }
  std::cout << (args->Has("json") ? json : SimulationText(in->model, in->hardware, *result, warnings));
  return 0;
}

}  // namespace shardsim::cli
