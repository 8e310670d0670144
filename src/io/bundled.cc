// See bundled.h.
#include "src/io/bundled.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "src/util/strings.h"

namespace shardsim {

namespace fs = std::filesystem;

namespace {

fs::path DataRoot() {
  if (const char* dir = std::getenv("SHARDSIM_DATA_DIR"); dir != nullptr && *dir != '\0') return dir;
  std::error_code ec;
  if (fs::is_directory(SHARDSIM_SOURCE_DIR, ec)) return SHARDSIM_SOURCE_DIR;
  return fs::current_path(ec);
}

}  // namespace

std::string BundledFolder(const std::string& folder) { return (DataRoot() / folder).string(); }

std::vector<std::string> BundledNames(const std::string& folder) {
  std::vector<std::string> names;
  const fs::path dir = DataRoot() / folder;
  std::error_code ec;
  if (fs::is_directory(dir, ec)) {
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      if (e.path().extension() == ".yaml") names.push_back(e.path().stem().string());
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

StatusOr<std::string> ResolveBundled(const std::string& path_or_name, const std::string& folder) {
  std::error_code ec;
  if (fs::exists(path_or_name, ec)) return path_or_name;
  if (path_or_name.find('/') == std::string::npos) {
    const fs::path bundled = DataRoot() / folder / (path_or_name + ".yaml");
    if (fs::exists(bundled, ec)) return bundled.string();
  }
  const std::vector<std::string> names = BundledNames(folder);
  // The nearest name by edit distance, else the one name that starts with what was given
  // ("torchtitan" for torchtitan-fsdp2).
  std::string near = DidYouMean(path_or_name, names);
  if (near.empty() && !path_or_name.empty()) {
    std::vector<std::string> starts;
    for (const std::string& n : names) {
      if (n.rfind(path_or_name, 0) == 0) starts.push_back(n);
    }
    if (starts.size() == 1) near = " (did you mean '" + starts.front() + "'?)";
  }
  return Status::Error("'" + path_or_name + "': no such file, and no bundled " + folder +
                       " description of that name" + near + "; bundled: " + Join(names, ", "));
}

}  // namespace shardsim
