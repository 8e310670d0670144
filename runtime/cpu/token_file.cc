// See token_file.h.
#include "runtime/cpu/token_file.h"

#include <cstring>
#include <vector>

#include "src/util/atomic_file.h"

namespace shardsim::runtime {

StatusOr<TokenWidth> ParseTokenWidth(const std::string& name) {
  if (name == "uint16") return TokenWidth::kUint16;
  if (name == "uint32") return TokenWidth::kUint32;
  return Status::Error("--data-dtype: expected uint16 or uint32, found '" + name + "'");
}

StatusOr<TokenFile> TokenFile::Open(const std::string& path, TokenWidth width, int64_t vocab, int64_t seq_len) {
  TokenFile f;
  SHARDSIM_ASSIGN_OR_RETURN(f.bytes_, ReadWholeFile(path, "token file", kMaxTokenFileBytes));
  f.width_bytes_ = width == TokenWidth::kUint16 ? 2 : 4;
  if (f.bytes_.size() % f.width_bytes_ != 0) {
    return Status::Error(path + ": " + std::to_string(f.bytes_.size()) + " bytes, not a whole number of " +
                         (f.width_bytes_ == 2 ? "uint16" : "uint32") + " token ids");
  }
  const int64_t n = f.tokens();
  if (n < seq_len + 1) {
    return Status::Error(path + ": " + std::to_string(n) + " tokens, fewer than one sequence of " +
                         std::to_string(seq_len) + " + 1");
  }
  for (int64_t i = 0; i < n; ++i) {
    const int32_t id = f.Id(i);
    if (id < 0 || id >= vocab) {  // a uint32 above INT32_MAX reads as negative
      return Status::Error(path + ": token " + std::to_string(i) + " is " +
                           std::to_string(static_cast<uint32_t>(id)) + ", not below the model's vocab " +
                           std::to_string(vocab));
    }
  }
  return f;
}

int32_t TokenFile::Id(int64_t i) const {
  const char* at = bytes_.data() + static_cast<size_t>(i) * width_bytes_;
  if (width_bytes_ == 2) {
    uint16_t v;
    std::memcpy(&v, at, 2);  // little-endian hosts (x86, arm64)
    return v;
  }
  uint32_t v;
  std::memcpy(&v, at, 4);
  return static_cast<int32_t>(v);
}

TokenBatch TokenFile::Batch(int64_t first_sequence, int64_t b, int64_t t) const {
  TokenBatch batch = TokenBatch::Reserve(b, t);
  const int64_t starts = tokens() - t;  // windows [o, o + t] fit for o < N - t
  std::vector<int32_t> window(static_cast<size_t>(t + 1));
  for (int64_t r = 0; r < b; ++r) {
    const int64_t o = ((first_sequence + r) % starts * (t % starts)) % starts;  // (i t) mod (N - t)
    for (int64_t j = 0; j <= t; ++j) window[static_cast<size_t>(j)] = Id(o + j);
    batch.AppendSequence(window.data());
  }
  return batch;
}

}  // namespace shardsim::runtime
