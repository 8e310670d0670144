// Runs the built `shardsim` binary (SHARDSIM_BINARY) in a shell and captures how it ended,
// its stdout and its stderr, so tests can check exit codes and messages of whole commands.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace shardsim::testing {

struct CommandResult {
  bool exited = false;  // ended by exit() / return from main, not by a signal
  int exit_code = -1;   // WEXITSTATUS when `exited`; the shell's 128 + signal otherwise
  std::string out;
  std::string err;
};

inline std::string ReadWholeFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A fresh, empty directory under the system temp folder, unique per call and per process.
inline std::filesystem::path FreshTempDir(const std::string& tag) {
  static std::atomic<int> counter{0};
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      ("shardsim-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Runs `shardsim <args>` (args are passed to /bin/sh as written: quote them yourself).
inline CommandResult RunShardsim(const std::string& args) {
  const std::filesystem::path dir = FreshTempDir("run");
  const std::filesystem::path out = dir / "stdout", err = dir / "stderr";
  const std::string command = std::string("'") + SHARDSIM_BINARY + "' " + args + " >'" +
                              out.string() + "' 2>'" + err.string() + "' </dev/null";
  const int status = std::system(command.c_str());
  CommandResult r;
  r.exited = status != -1 && WIFEXITED(status);
  r.exit_code = r.exited ? WEXITSTATUS(status) : -1;
  r.out = ReadWholeFile(out);
  r.err = ReadWholeFile(err);
  std::filesystem::remove_all(dir);
  return r;
}

}  // namespace shardsim::testing
