// Resolves a description given by path or by bundled name ("gpt3-175b" -> models/gpt3-175b.yaml).
#pragma once

#include <string>
#include <vector>

#include "src/util/status.h"

namespace shardsim {

// `folder` is "models" or "hardware" under the source tree ($SHARDSIM_DATA_DIR overrides it). An existing path is returned as is;
// a bare name is looked up as <folder>/<name>.yaml; otherwise an error with "did you mean".
StatusOr<std::string> ResolveBundled(const std::string& path_or_name, const std::string& folder);

// The bundled <folder> itself: under $SHARDSIM_DATA_DIR when set (a binary carried to another
// machine, with the tree elsewhere), else the source tree it was built from, else the current
// directory.
std::string BundledFolder(const std::string& folder);

// The bundled <folder>/*.yaml names, sorted.
std::vector<std::string> BundledNames(const std::string& folder);

// A bundled data file read by `load` (StatusOr<T>(const std::string& path)): its value, or why
// there is none (no such file under the data root, or the loader's error). Callers keep it in a
// function-local static, so each file is read once per process.
template <class T>
struct BundledData {
  T value{};
  std::string error;  // non-empty: there is no value, and this says why
};
template <class T, class Load>
BundledData<T> ReadBundledData(const std::string& name, const std::string& folder, Load load) {
  BundledData<T> b;
  StatusOr<std::string> path = ResolveBundled(name, folder);
  if (!path.ok()) {
    b.error = "no " + folder + "/" + name + ".yaml under the data root";
    return b;
  }
  StatusOr<T> loaded = load(*path);
  if (loaded.ok()) {
    b.value = std::move(loaded).value();
  } else {
    b.error = loaded.status().message();
  }
  return b;
}

}  // namespace shardsim
