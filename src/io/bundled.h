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

}  // namespace shardsim
