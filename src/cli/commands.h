// The subcommand registry: each entry parses its own flags and returns an exit code.
// Commands of src/ register here directly; those of planner/ and runtime/ register
// themselves from their own folders (CommandRegistrar), so src/ never includes them.
#pragma once

#include <string>
#include <vector>

namespace shardsim::cli {

struct Command {
  std::string name;
  std::string summary;  // one line for `shardsim --help`
  int (*run)(int argc, char** argv);  // argv[1] is the command name
  int order = 0;  // position in the help listing
};

// Every registered command, in help order.
std::vector<Command> Commands();
void RegisterCommand(const Command& c);
struct CommandRegistrar {
  explicit CommandRegistrar(const Command& c) { RegisterCommand(c); }
};
std::string DidYouMeanCommand(const std::string& word);

// Prints "shardsim <command>: error: <message>" and returns `code`.
int Fail(const std::string& command, const std::string& message, int code);

int RunEstimate(int argc, char** argv);
int RunDescribe(int argc, char** argv);
int RunSimulate(int argc, char** argv);

}  // namespace shardsim::cli
