// MarkovStream: a deterministic, seeded synthetic token stream with learnable structure.
// From each token the next is one of K fixed successors (weights 2^-k, normalized) with
// probability 1 - noise, or uniform over the vocabulary otherwise. A model that learns the
// successor table reaches EntropyRate(); a uniform guess scores ln(vocab).
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/cpu/token_batch.h"
#include "runtime/cpu/token_source.h"

namespace shardsim::runtime {

struct MarkovStreamConfig {
  int64_t vocab = 0;
  uint64_t seed = 0;
  int64_t successors = 4;  // K, distinct successors per token
  double noise = 0.1;      // probability of a uniform token instead
};

class MarkovStream : public TokenSource {
 public:
  explicit MarkovStream(MarkovStreamConfig config);

  // Sequence `index` (a global counter over all sequences ever drawn): `length` tokens, the
  // first uniform, then the chain. A pure function of (seed, index), so data-parallel ranks can
  // each draw their own rows of a global batch.
  std::vector<int32_t> Sequence(int64_t index, int64_t length) const;

  // Sequences [first_sequence, first_sequence + b), each T + 1 long: inputs are tokens 0..T-1,
  // targets tokens 1..T.
  TokenBatch Batch(int64_t first_sequence, int64_t b, int64_t t) const override;

  // Conditional entropy of the next token given the current one, in nats: the loss of the
  // best predictor that sees one token back, and of any predictor (the chain is first order).
  double EntropyRate() const;

  const MarkovStreamConfig& config() const { return config_; }

 private:
  MarkovStreamConfig config_;
  std::vector<int32_t> successors_;  // (vocab, K)
  std::vector<double> cumulative_;   // (K): cumulative successor weights, last = 1
};

}  // namespace shardsim::runtime
