// TokenSource: where training sequences come from. A pure function of the sequence index, so
// that data-parallel ranks each draw their own rows of a global batch and a run that resumes
// draws what it would have drawn: MarkovStream (synthetic, the tests' default) and TokenFile
// (a token file on disk).
#pragma once

#include <cstdint>

#include "runtime/cpu/token_batch.h"

namespace shardsim::runtime {

class TokenSource {
 public:
  virtual ~TokenSource() = default;
  // Sequences [first_sequence, first_sequence + b), T input tokens each and their next-token
  // targets.
  virtual TokenBatch Batch(int64_t first_sequence, int64_t b, int64_t t) const = 0;
};

}  // namespace shardsim::runtime
