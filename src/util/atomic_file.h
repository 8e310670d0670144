// Writes a whole file or nothing: the text goes to a temporary file beside the target,
// which is then renamed over it, so readers never see a half-written output.
#pragma once

#include <string>

#include "src/util/status.h"

namespace shardsim {

Status WriteFileAtomically(const std::string& path, const std::string& contents);

}  // namespace shardsim
