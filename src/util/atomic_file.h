// Whole-file I/O. Writes go whole or not at all: the text goes to a temporary file beside the
// target, which is then renamed over it, so readers never see a half-written output.
#pragma once

#include <string>

#include "src/util/status.h"

namespace shardsim {

Status WriteFileAtomically(const std::string& path, const std::string& contents);

// Whether WriteFileAtomically(path, ...) can create its temporary file: creates and removes it
// (nothing at `path` changes). For commands that work long before they write: they check first
// and fail at once on a missing or read-only directory ("PATH: cannot write (reason)"). A
// filesystem that fills up meanwhile is still only found at the write.
Status CheckWritable(const std::string& path);

// The most a description (model, cluster, layout, plan, stack, run or config file) may hold:
// they are kilobytes, so the bound only keeps a wrong path (/dev/zero, a dataset) from filling
// memory. Traces pass their own, larger bound.
inline constexpr long long kMaxInputBytes = 64LL << 20;  // 64 MiB
inline constexpr long long kMaxTraceBytes = 4LL << 30;   // 4 GiB: a Perfetto trace of many ranks

// The whole file, or an error naming it: "PATH: cannot open <what>" when it is absent or
// unreadable, "PATH: a directory", "PATH: not a regular file (a FIFO, device or socket)" (read
// from neither: a FIFO without a writer would block, a device never ends), or "PATH: N bytes,
// more than the M a <what> may hold".
StatusOr<std::string> ReadWholeFile(const std::string& path, const std::string& what = "file",
                                    long long max_bytes = kMaxInputBytes);

}  // namespace shardsim
