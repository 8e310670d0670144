// CpSplit: where one context-parallel rank's two chunks of each sequence sit (the load-balanced
// causal order of context_parallel.h), so that BlockDims can carry it.
#pragma once

#include <cstdint>

namespace shardsim::runtime {

struct CpSplit {
  int64_t cp = 1, rank = 0;
  int64_t seq = 0;  // T, tokens of a whole sequence
  bool active() const { return cp > 1; }
  int64_t chunk() const { return seq / (2 * cp); }  // L
  // The chunk index (0 .. 2 cp - 1) of rank `r`'s half `h` (0 or 1).
  int64_t ChunkOf(int64_t r, int h) const { return h == 0 ? r : 2 * cp - 1 - r; }
  // The position in the sequence of this rank's half h's first token.
  int64_t Start(int h) const { return ChunkOf(rank, h) * chunk(); }
};

}  // namespace shardsim::runtime
