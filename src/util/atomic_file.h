// Whole-file I/O. Writes go whole or not at all: the text goes to a temporary file beside the
// target, which is then renamed over it, so readers never see a half-written output.
#pragma once

#include <string>

#include "src/util/status.h"

namespace shardsim {

Status WriteFileAtomically(const std::string& path, const std::string& contents);

// The whole file, or an error naming it ("PATH: cannot open").
StatusOr<std::string> ReadWholeFile(const std::string& path);

}  // namespace shardsim
