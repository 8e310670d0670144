// The subcommand table: each entry parses its own flags and returns an exit code.
#pragma once

#include <string>
#include <vector>

namespace shardsim::cli {

struct Command {
  std::string name;
  int (*run)(int argc, char** argv);  // argv[1] is the command name
};

const std::vector<Command>& Commands();
std::string DidYouMeanCommand(const std::string& word);

// Shared by commands: parse flags (handling --help), print an error with the exit code.
int Fail(const std::string& command, const std::string& message, int code);

int RunEstimate(int argc, char** argv);
int RunDescribe(int argc, char** argv);
int RunSimulate(int argc, char** argv);

}  // namespace shardsim::cli
