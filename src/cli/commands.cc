// See commands.h.
#include "src/cli/commands.h"

#include <algorithm>
#include <iostream>

#include "src/util/strings.h"

namespace shardsim::cli {
namespace {

std::vector<Command>& Registry() {
  static std::vector<Command> registry = {
      {"estimate", "analytical memory, compute, communication and step time of one layout", RunEstimate, 10},
      {"simulate", "discrete-event simulation of one iteration (--full for every rank, --trace)", RunSimulate, 20},
      {"describe", "print a model's, a cluster's or a layout's derived figures", RunDescribe, 90},
  };
  return registry;
}

}  // namespace

void RegisterCommand(const Command& c) { Registry().push_back(c); }

std::vector<Command> Commands() {
  std::vector<Command> out = Registry();
  std::stable_sort(out.begin(), out.end(), [](const Command& a, const Command& b) { return a.order < b.order; });
  return out;
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
