// See atomic_file.h.
#include "src/util/atomic_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace shardsim {

Status WriteFileAtomically(const std::string& path, const std::string& contents) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return Status::Error(path + ": cannot write (" + std::strerror(errno) + ")");
  const bool written = std::fwrite(contents.data(), 1, contents.size(), f) == contents.size();
  const bool flushed = std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
  const bool closed = std::fclose(f) == 0;
  if (!written || !flushed || !closed) {
    const std::string err = std::strerror(errno);
    std::remove(tmp.c_str());
    return Status::Error(path + ": write failed (" + err + "); nothing written");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string err = std::strerror(errno);
    std::remove(tmp.c_str());
    return Status::Error(path + ": cannot rename the finished file into place (" + err + ")");
  }
  return Status::Ok();
}

StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error(path + ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace shardsim
