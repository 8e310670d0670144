// A small streaming JSON writer: ordered keys, escaped strings, round-trippable doubles.
// Used for every --json output so key names stay fixed (other tools read them).
#pragma once

#include <string>
#include <vector>

namespace shardsim {

class JsonWriter {
 public:
  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  JsonWriter& Key(const std::string& key);
  JsonWriter& Value(const std::string& v);
  JsonWriter& Value(const char* v) { return Value(std::string(v)); }
  JsonWriter& Value(double v);
  JsonWriter& Value(int64_t v);
  JsonWriter& Value(int v) { return Value(static_cast<int64_t>(v)); }
  JsonWriter& Value(bool v);
  template <typename T>
  JsonWriter& Field(const std::string& key, const T& v) {
    Key(key);
    return Value(v);
  }
  // The document so far, with a trailing newline once the outermost value is closed.
  std::string str() const { return out_ + (depth_.empty() ? "\n" : ""); }

 private:
  void BeforeValue();
  void WriteString(const std::string& v);
  void Indent();
  std::string out_;
  std::vector<bool> depth_;  // per open container: has it any element yet
  bool after_key_ = false;
};

}  // namespace shardsim
