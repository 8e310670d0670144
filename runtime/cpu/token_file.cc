// See token_file.h.
#include "runtime/cpu/token_file.h"

#include <cstring>

#include "src/util/atomic_file.h"

namespace shardsim::runtime {

StatusOr<TokenWidth> ParseTokenWidth(const std::string& name) {
  if (name == "uint16") return TokenWidth::kUint16;
  if (name == "uint32") return TokenWidth::kUint32;
  return Status::Error("--data-dtype: expected uint16 or uint32, found '" + name + "'");
}

StatusOr<TokenFile> TokenFile::Open(const std::string& path, TokenWidth width, int64_t vocab, int64_t seq_len) {
  SHARDSIM_ASSIGN_OR_RETURN(const std::string bytes, ReadWholeFile(path, "token file", kMaxTokenFileBytes));
  const size_t size = width == TokenWidth::kUint16 ? 2 : 4;
  if (bytes.size() % size != 0) {
    return Status::Error(path + ": " + std::to_string(bytes.size()) + " bytes, not a whole number of " +
                         (size == 2 ? "uint16" : "uint32") + " token ids");
  }
  TokenFile f;
  const size_t n = bytes.size() / size;
  if (static_cast<int64_t>(n) < seq_len + 1) {
    return Status::Error(path + ": " + std::to_string(n) + " tokens, fewer than one sequence of " +
                         std::to_string(seq_len) + " + 1");
  }
  f.tokens_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    uint32_t id = 0;
    if (size == 2) {
      uint16_t v;
      std::memcpy(&v, bytes.data() + 2 * i, 2);  // little-endian hosts (x86, arm64)
      id = v;
    } else {
      std::memcpy(&id, bytes.data() + 4 * i, 4);
    }
    if (static_cast<int64_t>(id) >= vocab) {
      return Status::Error(path + ": token " + std::to_string(i) + " is " + std::to_string(id) +
                           ", not below the model's vocab " + std::to_string(vocab));
    }
    f.tokens_[i] = static_cast<int32_t>(id);
  }
  return f;
}

TokenBatch TokenFile::Batch(int64_t first_sequence, int64_t b, int64_t t) const {
  TokenBatch batch = TokenBatch::Reserve(b, t);
  const int64_t starts = tokens() - t;  // windows [o, o + t] fit for o < N - t
  for (int64_t r = 0; r < b; ++r) {
    const int64_t o = ((first_sequence + r) % starts * (t % starts)) % starts;  // (i t) mod (N - t)
    batch.AppendSequence(tokens_.data() + o);
  }
  return batch;
}

}  // namespace shardsim::runtime
