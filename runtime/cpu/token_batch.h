// TokenBatch: B sequences of T input tokens and their next-token targets.
// The unit the data source produces and a training step consumes; Rows() cuts micro-batches.
#pragma once

#include <cstdint>
#include <vector>

#include "src/util/check.h"

namespace shardsim::runtime {

struct TokenBatch {
  int64_t batch = 0;             // B, sequences
  int64_t seq = 0;               // T, tokens per sequence
  std::vector<int32_t> inputs;   // (B, T)
  std::vector<int32_t> targets;  // (B, T): targets[b, t] = the token after inputs[b, t]

  int64_t tokens() const { return batch * seq; }

  // An empty batch of `b` rows of `t`, to be filled by AppendSequence.
  static TokenBatch Reserve(int64_t b, int64_t t) {
    TokenBatch out;
    out.batch = b;
    out.seq = t;
    out.inputs.reserve(b * t);
    out.targets.reserve(b * t);
    return out;
  }
  // One row from t + 1 consecutive tokens: inputs tokens[0, t), targets tokens[1, t].
  void AppendSequence(const int32_t* tokens) {
    inputs.insert(inputs.end(), tokens, tokens + seq);
    targets.insert(targets.end(), tokens + 1, tokens + seq + 1);
  }

  // Sequences [first, first + count), e.g. one micro-batch.
  TokenBatch Rows(int64_t first, int64_t count) const {
    CHECK(first >= 0 && count > 0 && first + count <= batch)
        << "rows [" << first << ", " << first + count << ") of " << batch;
    TokenBatch out;
    out.batch = count;
    out.seq = seq;
    out.inputs.assign(inputs.begin() + first * seq, inputs.begin() + (first + count) * seq);
    out.targets.assign(targets.begin() + first * seq, targets.begin() + (first + count) * seq);
    return out;
  }
};

}  // namespace shardsim::runtime
