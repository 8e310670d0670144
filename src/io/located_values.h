// Values read from a configuration file that is not YAML (Megatron-LM arguments, NeMo recipe
// overrides), each with where it stands, and typed accessors that record the first error as
// "file:line:column: key: expected ..., found ..." (src/io/megatron_args.h,
// src/io/nemo_overrides.h). A key not set gives the caller's fallback.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "src/util/status.h"

namespace shardsim {

struct TextLocation {
  int line = 1, col = 1;
};

class LocatedValues {
 public:
  // none_is_absent: a value "None" (Python) counts as not set.
  explicit LocatedValues(std::string file, bool none_is_absent = false)
      : file_(std::move(file)), none_is_absent_(none_is_absent) {}

  // Records `key`; false when it was set already (the first stays).
  bool Set(const std::string& key, std::string value, TextLocation key_at, TextLocation value_at);
  bool Has(const std::string& key) const { return values_.count(key) > 0; }
  std::string Text(const std::string& key, const std::string& fallback) const;
  // "file:line:column" of the key, for messages.
  std::string Where(const std::string& key) const;

  int64_t Int(const std::string& key, int64_t fallback, int64_t min_value = 1);
  double Number(const std::string& key, double fallback, double min_value, double max_value);
  bool Bool(const std::string& key, bool fallback);  // True / False
  std::string Choice(const std::string& key, const std::string& fallback, const std::vector<std::string>& choices);

  // An error at the key, or at the file when the key is not set.
  void Error(const std::string& key, const std::string& what);
  const Status& status() const { return status_; }

 private:
  struct Entry {
    std::string value;
    TextLocation key_at, value_at;
  };
  const Entry* Find(const std::string& key) const;
  void Fail(TextLocation at, const std::string& what);

  std::string file_;
  bool none_is_absent_;
  std::map<std::string, Entry> values_;
  Status status_;
};

}  // namespace shardsim
