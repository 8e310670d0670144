// See args.h.
#include "src/cli/args.h"

#include <cstdlib>
#include <iostream>
#include <sstream>

#include "src/util/strings.h"

namespace shardsim::cli {

StatusOr<Args> Args::Parse(int argc, char** argv, int first, const std::vector<FlagSpec>& flags) {
  Args args;
  std::vector<std::string> names;
  for (const FlagSpec& f : flags) {
    names.push_back("--" + f.name);
    if (!f.default_value.empty()) args.defaults_[f.name] = f.default_value;
  }
  // --list-flags: the flag table itself, one flag per line (name, value name, default; tab
  // separated), for tests and tools that check the commands share one vocabulary.
  for (int i = first; i < argc; ++i) {
    if (std::string(argv[i]) != "--list-flags") continue;
    for (const FlagSpec& f : flags) std::cout << f.name << '\t' << f.value_name << '\t' << f.default_value << '\n';
    std::cout.flush();
    std::exit(0);
  }
  for (int i = first; i < argc; ++i) {
    std::string word = argv[i];
    if (word.rfind("--", 0) != 0) {
      return Status::Error("unexpected argument '" + word + "'; flags start with --");
    }
    std::string name = word.substr(2), value;
    bool inline_value = false;
    if (const size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      inline_value = true;
    }
    const FlagSpec* spec = nullptr;
    for (const FlagSpec& f : flags) {
      if (f.name == name) spec = &f;
    }
    if (!spec) {
      return Status::Error("unknown flag '--" + name + "'" + DidYouMean("--" + name, names) +
                           "; see --help");
    }
    if (args.values_.count(name)) return Status::Error("flag '--" + name + "' given twice");
    if (spec->value_name.empty()) {
      if (inline_value) return Status::Error("flag '--" + name + "' takes no value");
      value = "true";
    } else if (!inline_value) {
      if (i + 1 >= argc) {
        return Status::Error("flag '--" + name + "' needs a value (" + spec->value_name + ")");
      }
      value = argv[++i];
    }
    // A value named N is a count: an integer, checked here so that a bad one is a bad command
    // line (exit 2) wherever it is used.
    if (spec->value_name == "N") {
      std::istringstream in(value);
      int64_t n = 0;
      in >> n;
      if (in.fail() || !in.eof()) return Status::Error("flag '--" + name + "': expected an integer, found '" + value + "'");
    }
    args.values_[name] = value;
  }
  return args;
}

std::optional<std::string> Args::Get(const std::string& name) const {
  if (auto it = values_.find(name); it != values_.end()) return it->second;
  if (auto it = defaults_.find(name); it != defaults_.end()) return it->second;
  return std::nullopt;
}

StatusOr<int64_t> Args::GetInt(const std::string& name) const {
  const std::optional<std::string> v = Get(name);
  if (!v) return Status::Error("flag '--" + name + "' is required");
  std::istringstream in(*v);
  int64_t out = 0;
  in >> out;
  if (in.fail() || !in.eof()) {
    return Status::Error("flag '--" + name + "': expected an integer, found '" + *v + "'");
  }
  return out;
}

std::string FlagHelp(const std::vector<FlagSpec>& flags) {
  std::ostringstream out;
  for (const FlagSpec& f : flags) {
    std::string left = "  --" + f.name + (f.value_name.empty() ? "" : " " + f.value_name);
    if (left.size() < 28) left.resize(28, ' ');
    out << left << " " << f.help;
    if (!f.default_value.empty()) out << " (default: " << f.default_value << ")";
    out << "\n";
  }
  return out.str();
}

}  // namespace shardsim::cli
