// Command-line flags shared by every subcommand: "--name value", "--name=value" or "--flag".
// Unknown flags get a "did you mean"; every subcommand documents its flags in --help.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "src/util/status.h"

namespace shardsim::cli {

struct FlagSpec {
  std::string name;  // without the leading "--"
  std::string value_name;  // "" for a boolean flag
  std::string help;
  std::string default_value;  // shown in --help; "" = none
};

class Args {
 public:
  // Parses argv[first..argc) against `flags`.
  static StatusOr<Args> Parse(int argc, char** argv, int first, const std::vector<FlagSpec>& flags);

  // The value given, else the flag's default, else nullopt.
  std::optional<std::string> Get(const std::string& name) const;
  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  StatusOr<int64_t> GetInt(const std::string& name) const;

 private:
  std::map<std::string, std::string> values_;
  std::map<std::string, std::string> defaults_;
};

// "Usage: shardsim <command> [flags]" followed by one line per flag.
std::string FlagHelp(const std::vector<FlagSpec>& flags);

}  // namespace shardsim::cli
