// See atomic_file.h.
#include "src/util/atomic_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

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

Status CheckWritable(const std::string& path) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return Status::Error(path + ": cannot write (" + std::strerror(errno) + ")");
  std::fclose(f);
  std::remove(tmp.c_str());
  return Status::Ok();
}

StatusOr<std::string> ReadWholeFile(const std::string& path, const std::string& what, long long max_bytes) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) return Status::Error(path + ": cannot open " + what);
  if (fs::is_directory(st)) return Status::Error(path + ": a directory, not a " + what);
  if (!fs::is_regular_file(st)) {
    return Status::Error(path + ": not a regular file (a FIFO, device or socket); give a " + what);
  }
  const auto size = fs::file_size(path, ec);
  if (!ec && static_cast<long long>(size) > max_bytes) {
    return Status::Error(path + ": " + std::to_string(size) + " bytes, more than the " + std::to_string(max_bytes) +
                         " a " + what + " may hold");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error(path + ": cannot open " + what);
  // Chunks up to one past the bound: the file may have grown since its size was taken.
  std::string text;
  std::vector<char> buf(1 << 16);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    text.append(buf.data(), static_cast<size_t>(in.gcount()));
    if (static_cast<long long>(text.size()) > max_bytes) {
      return Status::Error(path + ": more than the " + std::to_string(max_bytes) + " bytes a " + what + " may hold");
    }
  }
  if (in.bad()) return Status::Error(path + ": cannot read " + what);
  return text;
}

}  // namespace shardsim
