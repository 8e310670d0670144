// `shardsim compare`: predicted (simulate --json) against measured (run --json), with an
// optional self-contained HTML report (runtime/report/compare.h).
#include <iostream>

#include "runtime/report/compare.h"
#include "src/cli/args.h"
#include "src/cli/commands.h"
#include "src/util/atomic_file.h"

namespace shardsim::runtime {
namespace {

int CompareCommand(int argc, char** argv) {
  const std::vector<cli::FlagSpec> flags = {
      {"sim", "FILE", "simulate --json output (required)", ""},
      {"run", "FILE", "run --json / --out output (required)", ""},
      {"sim-trace", "FILE", "simulate --trace output, for the report's predicted timeline", ""},
      {"run-trace", "FILE", "run --trace output, for the report's measured timeline", ""},
      {"html", "FILE", "write the HTML report (self-contained, inline SVG)", ""},
      {"json", "", "print the comparison as JSON", ""},
      {"help", "", "show this help", ""},
  };
  StatusOr<cli::Args> args = cli::Args::Parse(argc, argv, 2, flags);
  if (!args.ok()) return cli::Fail("compare", args.status().message(), 2);
  if (args->Has("help")) {
    std::cout << "Usage: shardsim compare --sim sim.json --run run.json [--html report.html]\n\n"
                 "Predicted against measured: step time, throughput, each phase, peak memory per\n"
                 "rank, with errors in percent.\n\n"
              << cli::FlagHelp(flags);
    return 0;
  }
  if (!args->Get("sim") || !args->Get("run")) return cli::Fail("compare", "--sim and --run are required", 2);
  StatusOr<std::string> sim = ReadWholeFile(*args->Get("sim"));
  if (!sim.ok()) return cli::Fail("compare", sim.status().message(), 1);
  StatusOr<std::string> run = ReadWholeFile(*args->Get("run"));
  if (!run.ok()) return cli::Fail("compare", run.status().message(), 1);
  StatusOr<Comparison> c = Compare(*sim, *run, *args->Get("sim"), *args->Get("run"));
  if (!c.ok()) return cli::Fail("compare", c.status().message(), 1);
  if (std::optional<std::string> html = args->Get("html")) {
    std::vector<TraceSpan> predicted, measured;
    for (const auto& [flag, spans] : {std::pair<const char*, std::vector<TraceSpan>*>{"sim-trace", &predicted},
                                      {"run-trace", &measured}}) {
      if (std::optional<std::string> path = args->Get(flag)) {
        StatusOr<std::string> text = ReadWholeFile(*path, "trace", kMaxTraceBytes);
        if (!text.ok()) return cli::Fail("compare", text.status().message(), 1);
        StatusOr<std::vector<TraceSpan>> read = ReadTrace(*text, *path);
        if (!read.ok()) return cli::Fail("compare", read.status().message(), 1);
        *spans = std::move(read).value();
      }
    }
    if (Status st = WriteFileAtomically(*html, ComparisonHtml(*c, predicted, measured)); !st.ok()) {
      return cli::Fail("compare", st.message(), 1);
    }
  }
  std::cout << (args->Has("json") ? ComparisonJson(*c) : ComparisonMarkdown(*c));
  return 0;
}

const cli::CommandRegistrar kRegister(
    {"compare", "predicted (simulate --json) against measured (run --json), with an HTML report",
     CompareCommand, 36});

}  // namespace
}  // namespace shardsim::runtime
