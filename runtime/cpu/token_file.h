// TokenFile: training tokens from a file, the format llm.c's and Megatron-LM's token files
// share at bottom: a flat array of little-endian uint16 or uint32 token ids, no header
// (Megatron-LM's indexed dataset keeps them in a .bin beside its .idx of document bounds;
// llm.c's .bin files add a 256-int header, which this reader does not take: give the raw ids).
// Sequence i is the window of T + 1 tokens starting at token (i * T) mod (N - T): consecutive
// non-overlapping windows, wrapping round at the end of the file (an epoch), in file order.
// No shuffle and no document boundaries: what llm.c's DataLoader does within one shard.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/cpu/token_source.h"
#include "src/util/status.h"

namespace shardsim::runtime {

enum class TokenWidth { kUint16, kUint32 };

class TokenFile : public TokenSource {
 public:
  // Reads the whole file. Errors name the file: unreadable, empty or too large (more than
  // kMaxTokenFileBytes), a size that is not a whole number of ids, fewer than seq_len + 1
  // tokens, or an id >= vocab (with its position).
  static StatusOr<TokenFile> Open(const std::string& path, TokenWidth width, int64_t vocab, int64_t seq_len);

  TokenBatch Batch(int64_t first_sequence, int64_t b, int64_t t) const override;
  int64_t tokens() const { return static_cast<int64_t>(bytes_.size() / width_bytes_); }

 private:
  int32_t Id(int64_t i) const;  // token i, decoded from the file's bytes

  // The file's bytes as read, decoded a window at a time: the file's size in memory, where
  // widening every id to int32 up front held 3x a uint16 file at its peak.
  std::string bytes_;
  size_t width_bytes_ = 2;
};

// 4 GiB: 2^31 uint16 tokens, more than a CPU run trains on; a wrong path fails at once.
inline constexpr long long kMaxTokenFileBytes = 4LL << 30;

// "uint16" or "uint32".
StatusOr<TokenWidth> ParseTokenWidth(const std::string& name);

}  // namespace shardsim::runtime
