// See commands.h.
#include "src/cli/commands.h"

#include <iostream>

#include "src/util/strings.h"

namespace shardsim::cli {

const std::vector<Command>& Commands() {
  static const std::vector<Command> kCommands = {
      {"estimate", RunEstimate},
      {"simulate", RunSimulate},
      {"describe", RunDescribe},
  };
  return kCommands;
}

std::string DidYouMeanCommand(const std::string& word) {
  std::vector<std::string> names;
  for (const Command& c : Commands()) names.push_back(c.name);
  return DidYouMean(word, names);
}

int Fail(const std::string& command, const std::string& message, int code) {
  std::cerr << "shardsim " << command << ": error: " << message << "\n";
  return code;
}

}  // namespace shardsim::cli
