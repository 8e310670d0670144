// shardsim: one binary, with subcommands. main() is the only place a Status becomes an
// exit code: 0 success, 1 bad input or infeasible request, 2 bad command line.
#include <cstdio>
#include <iostream>
#include <string>

#include "src/cli/commands.h"

namespace {

std::string Usage() {
  std::string out =
      "shardsim: plan, simulate and check the parallel layout of LLM training\n"
      "\n"
      "Usage: shardsim <command> [flags]\n"
      "\n"
      "Commands:\n";
  for (const shardsim::cli::Command& c : shardsim::cli::Commands()) {
    char line[256];
    std::snprintf(line, sizeof line, "  %-10s %s\n", c.name.c_str(), c.summary.c_str());
    out += line;
  }
  out += "  help       this message; 'shardsim <command> --help' for a command's flags\n"
         "\n"
         "Start with:  shardsim estimate   (GPT-3 175B on 1024 A100-80GB GPUs)\n";
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "help" || std::string(argv[1]) == "--help" ||
      std::string(argv[1]) == "-h") {
    std::cout << Usage();
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  for (const shardsim::cli::Command& c : shardsim::cli::Commands()) {
    if (c.name == command) return c.run(argc, argv);
  }
  std::cerr << "shardsim: unknown command '" << command << "'"
            << shardsim::cli::DidYouMeanCommand(command) << "\n\n"
            << Usage();
  return 2;
}
