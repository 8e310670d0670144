// shardsim: one binary, with subcommands. main() is the only place a Status becomes an
// exit code: 0 success, 1 bad input or infeasible request, 2 bad command line.
#include <iostream>
#include <string>

#include "src/cli/commands.h"

namespace {

constexpr const char* kUsage =
    "shardsim: plan, simulate and check the parallel layout of LLM training\n"
    "\n"
    "Usage: shardsim <command> [flags]\n"
    "\n"
    "Commands:\n"
    "  estimate   analytical memory, compute, communication and step time of one layout\n"
    "  simulate   discrete-event simulation of one iteration (--full for every rank, --trace)\n"
    "  describe   print a model's, a cluster's or a layout's derived figures\n"
    "  help       this message; 'shardsim <command> --help' for a command's flags\n"
    "\n"
    "Start with:  shardsim estimate   (GPT-3 175B on 1024 A100-80GB GPUs)\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "help" || std::string(argv[1]) == "--help" ||
      std::string(argv[1]) == "-h") {
    std::cout << kUsage;
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  for (const shardsim::cli::Command& c : shardsim::cli::Commands()) {
    if (c.name == command) return c.run(argc, argv);
  }
  std::cerr << "shardsim: unknown command '" << command << "'"
            << shardsim::cli::DidYouMeanCommand(command) << "\n\n"
            << kUsage;
  return 2;
}
