// IsStrictJson(text): a gtest assertion that `text` is exactly one JSON value (RFC 8259),
// naming the byte offset of the first error. yaml-cpp reads our JSON for structure, but it
// also accepts YAML that is not JSON (bare words such as inf, trailing commas), which Perfetto
// and Python's json module reject; this checks the grammar itself.
#pragma once

#include <gtest/gtest.h>

#include <cctype>
#include <cstring>
#include <string>

namespace shardsim::testing {

class JsonSyntax {
 public:
  explicit JsonSyntax(const std::string& text) : s_(text) {}

  // True when the text is one valid JSON value; else error() names the first problem.
  bool Check() {
    SkipSpace();
    if (!Value()) return false;
    SkipSpace();
    return i_ == s_.size() || Fail("trailing characters after the value");
  }
  const std::string& error() const { return error_; }
  size_t offset() const { return i_; }

 private:
  bool Value() {
    if (i_ >= s_.size()) return Fail("unexpected end of text");
    switch (s_[i_]) {
      case '{': return Object();
      case '[': return Array();
      case '"': return String();
      case 't': return Word("true");
      case 'f': return Word("false");
      case 'n': return Word("null");
      default: return Number();
    }
  }
  bool Object() {
    ++i_;  // '{'
    SkipSpace();
    if (Peek('}')) return ++i_, true;
    for (;;) {
      SkipSpace();
      if (!Peek('"')) return Fail("expected a string key");
      if (!String()) return false;
      SkipSpace();
      if (!Peek(':')) return Fail("expected ':'");
      ++i_;
      SkipSpace();
      if (!Value()) return false;
      SkipSpace();
      if (Peek('}')) return ++i_, true;
      if (!Peek(',')) return Fail("expected ',' or '}'");
      ++i_;
    }
  }
  bool Array() {
    ++i_;  // '['
    SkipSpace();
    if (Peek(']')) return ++i_, true;
    for (;;) {
      SkipSpace();
      if (!Value()) return false;
      SkipSpace();
      if (Peek(']')) return ++i_, true;
      if (!Peek(',')) return Fail("expected ',' or ']'");
      ++i_;
    }
  }
  bool String() {
    ++i_;  // '"'
    while (i_ < s_.size()) {
      const unsigned char c = static_cast<unsigned char>(s_[i_]);
      if (c == '"') return ++i_, true;
      if (c < 0x20) return Fail("control character inside a string");
      if (c == '\\') {
        ++i_;
        if (i_ >= s_.size()) break;
        if (s_[i_] == 'u') {
          for (int k = 1; k <= 4; ++k) {
            if (i_ + k >= s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[i_ + k]))) {
              return Fail("bad \\u escape");
            }
          }
          i_ += 4;
        } else if (std::strchr("\"\\/bfnrt", s_[i_]) == nullptr) {
          return Fail("bad escape");
        }
      }
      ++i_;
    }
    return Fail("unterminated string");
  }
  // -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
  bool Number() {
    const size_t start = i_;
    if (Peek('-')) ++i_;
    if (Peek('0')) {
      ++i_;
    } else if (!Digits()) {
      i_ = start;
      return Fail("expected a value");
    }
    if (Peek('.')) {
      ++i_;
      if (!Digits()) return Fail("expected digits after '.'");
    }
    if (Peek('e') || Peek('E')) {
      ++i_;
      if (Peek('+') || Peek('-')) ++i_;
      if (!Digits()) return Fail("expected exponent digits");
    }
    return true;
  }
  bool Digits() {
    const size_t start = i_;
    while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
    return i_ > start;
  }
  bool Word(const char* w) {
    if (s_.compare(i_, std::strlen(w), w) != 0) return Fail("expected a value");
    i_ += std::strlen(w);
    return true;
  }
  bool Peek(char c) const { return i_ < s_.size() && s_[i_] == c; }
  void SkipSpace() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  bool Fail(const char* what) {
    if (error_.empty()) error_ = std::string(what) + " at byte " + std::to_string(i_);
    return false;
  }

  const std::string& s_;
  size_t i_ = 0;
  std::string error_;
};

inline ::testing::AssertionResult IsStrictJson(const std::string& text) {
  JsonSyntax syntax(text);
  if (syntax.Check()) return ::testing::AssertionSuccess();
  const size_t from = syntax.offset() > 40 ? syntax.offset() - 40 : 0;
  return ::testing::AssertionFailure() << "not valid JSON: " << syntax.error() << ", near '"
                                       << text.substr(from, 80) << "'";
}

}  // namespace shardsim::testing
