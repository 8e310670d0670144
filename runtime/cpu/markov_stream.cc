// The successor table is drawn once from the seed; each sequence draws from its own
// SplitMix64 stream keyed by (seed, index).
#include "runtime/cpu/markov_stream.h"

#include <algorithm>
#include <cmath>

#include "runtime/cpu/splitmix64.h"
#include "src/util/check.h"

namespace shardsim::runtime {
namespace {

constexpr uint64_t kTableSalt = 0x7461626C65ULL;       // "table"
constexpr uint64_t kSequenceSalt = 0x73657175656EULL;  // "sequen"

}  // namespace

MarkovStream::MarkovStream(MarkovStreamConfig config) : config_(config) {
  const int64_t v = config_.vocab, k = config_.successors;
  CHECK(v >= 2 && k >= 1 && k <= v) << "vocab " << v << ", successors " << k;
  CHECK(config_.noise >= 0 && config_.noise <= 1) << "noise " << config_.noise;
  SplitMix64Stream rng(SplitMix64(config_.seed ^ kTableSalt));
  successors_.resize(v * k);
  for (int64_t a = 0; a < v; ++a) {
    int32_t* row = successors_.data() + a * k;
    for (int64_t j = 0; j < k; ++j) {
      int32_t next;
      do {  // distinct successors, so every row has the same entropy
        next = static_cast<int32_t>(rng.Below(v));
      } while (std::find(row, row + j, next) != row + j);
      row[j] = next;
    }
  }
  // Weights w_j = 2^-j / sum_i 2^-i.
  double total = 0;
  for (int64_t j = 0; j < k; ++j) total += std::ldexp(1.0, -static_cast<int>(j));
  double acc = 0;
  for (int64_t j = 0; j < k; ++j) {
    acc += std::ldexp(1.0, -static_cast<int>(j)) / total;
    cumulative_.push_back(acc);
  }
  cumulative_.back() = 1.0;
}

std::vector<int32_t> MarkovStream::Sequence(int64_t index, int64_t length) const {
  CHECK(index >= 0 && length > 0);
  const int64_t v = config_.vocab, k = config_.successors;
  SplitMix64Stream rng(SplitMix64(config_.seed ^ kSequenceSalt) +
                       static_cast<uint64_t>(index) * 0xD1B54A32D192ED03ULL);
  std::vector<int32_t> seq(length);
  seq[0] = static_cast<int32_t>(rng.Below(v));
  for (int64_t i = 1; i < length; ++i) {
    if (rng.Uniform() <= config_.noise) {
      seq[i] = static_cast<int32_t>(rng.Below(v));
    } else {
      const double u = rng.Uniform();
      const int64_t j =
          std::lower_bound(cumulative_.begin(), cumulative_.end(), u) - cumulative_.begin();
      seq[i] = successors_[seq[i - 1] * k + std::min(j, k - 1)];
    }
  }
  return seq;
}

TokenBatch MarkovStream::Batch(int64_t first_sequence, int64_t b, int64_t t) const {
  TokenBatch batch = TokenBatch::Reserve(b, t);
  for (int64_t r = 0; r < b; ++r) batch.AppendSequence(Sequence(first_sequence + r, t + 1).data());
  return batch;
}

double MarkovStream::EntropyRate() const {
  // Next-token law from any state: successor j has (1 - noise) w_j + noise / V, every other
  // token noise / V. Successors are distinct, so H is the same from every state.
  const double v = static_cast<double>(config_.vocab);
  const double floor = config_.noise / v;
  double h = 0, prev = 0;
  for (double cum : cumulative_) {
    const double p = (1 - config_.noise) * (cum - prev) + floor;
    prev = cum;
    h -= p * std::log(p);
  }
  const double others = v - static_cast<double>(config_.successors);
  if (floor > 0) h -= others * floor * std::log(floor);
  return h;
}

}  // namespace shardsim::runtime
