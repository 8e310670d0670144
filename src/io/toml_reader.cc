// See toml_reader.h. One line at a time: the subset read has no construct that spans lines.
#include "src/io/toml_reader.h"

#include <cctype>
#include <set>

#include "src/util/strings.h"

namespace shardsim {
namespace {

bool IsBareKeyChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
}

// Digits with single '_' between them (TOML's dec-int body, and a fraction's or exponent's).
bool Digits(std::string_view s) {
  if (s.empty() || !std::isdigit(static_cast<unsigned char>(s.front())) ||
      !std::isdigit(static_cast<unsigned char>(s.back()))) {
    return false;
  }
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_') {
      if (!std::isdigit(static_cast<unsigned char>(s[i + 1]))) return false;
    } else if (!std::isdigit(static_cast<unsigned char>(s[i]))) {
      return false;
    }
  }
  return true;
}

// An integer or a float as TOML writes them (toml.io/en/v1.0.0#integer, #float), decimal only.
bool Number(std::string_view s, TomlKind* kind) {
  std::string_view body = s;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) body.remove_prefix(1);
  if (body == "inf" || body == "nan") {
    *kind = TomlKind::kFloat;
    return true;
  }
  const size_t dot = body.find('.'), exp = body.find_first_of("eE");
  std::string_view whole = body.substr(0, std::min(dot, exp));
  if (!Digits(whole) || (whole.size() > 1 && whole[0] == '0')) return false;  // no leading zeros
  if (dot == std::string_view::npos && exp == std::string_view::npos) {
    *kind = TomlKind::kInteger;
    return true;
  }
  if (dot != std::string_view::npos) {
    if (exp != std::string_view::npos && exp < dot) return false;
    if (!Digits(body.substr(dot + 1, exp == std::string_view::npos ? std::string_view::npos : exp - dot - 1))) {
      return false;
    }
  }
  if (exp != std::string_view::npos) {
    std::string_view e = body.substr(exp + 1);
    if (!e.empty() && (e[0] == '+' || e[0] == '-')) e.remove_prefix(1);
    if (!Digits(e)) return false;
  }
  *kind = TomlKind::kFloat;
  return true;
}

class LineParser {
 public:
  LineParser(const std::string& name, int line, const std::string& text) : name_(name), line_(line), s_(text) {}

  size_t pos() const { return i_; }
  TextLocation at() const { return {line_, static_cast<int>(i_) + 1}; }
  bool done() const { return i_ >= s_.size(); }
  char peek() const { return done() ? '\0' : s_[i_]; }
  void Advance() { ++i_; }
  void SkipSpace() {
    while (!done() && (s_[i_] == ' ' || s_[i_] == '\t')) ++i_;
  }
  // Only a comment (or nothing) may follow.
  Status End() {
    SkipSpace();
    if (done() || s_[i_] == '#' || (s_[i_] == '\r' && i_ + 1 == s_.size())) return Status::Ok();
    return Fail("expected the end of the line or a '#' comment, found '" + s_.substr(i_) + "'");
  }
  Status Fail(const std::string& what) const {
    return Status::Error(name_ + ":" + std::to_string(line_) + ":" + std::to_string(i_ + 1) + ": " + what);
  }
  StatusOr<std::string> BareKey(const char* what) {
    const size_t start = i_;
    while (!done() && IsBareKeyChar(s_[i_])) ++i_;
    if (i_ == start) {
      if (peek() == '"' || peek() == '\'') return Fail(std::string("quoted ") + what + "s are not read; write the " + what + " bare");
      return Fail(std::string("expected a ") + what + " (letters, digits, '_', '-'), found '" + s_.substr(i_) + "'");
    }
    return s_.substr(start, i_ - start);
  }
  // A scalar or an array at the current position.
  Status Value(TomlEntry* e) {
    e->value_at = at();
    const char c = peek();
    if (c == '[') return Array(e);
    if (c == '{') return Fail("inline tables ({...}) are not read; write a [table] instead");
    return Scalar(&e->kind, &e->value);
  }

 private:
  Status Scalar(TomlKind* kind, std::string* value) {
    const char c = peek();
    if (c == '"' || c == '\'') {
      if (s_.compare(i_, 3, std::string(3, c)) == 0) return Fail("multi-line strings are not read");
      *kind = TomlKind::kString;
      return c == '"' ? BasicString(value) : LiteralString(value);
    }
    const size_t start = i_;
    while (!done() && s_[i_] != ' ' && s_[i_] != '\t' && s_[i_] != ',' && s_[i_] != ']' && s_[i_] != '#' &&
           s_[i_] != '\r') {
      ++i_;
    }
    const std::string token = s_.substr(start, i_ - start);
    if (token == "true" || token == "false") {
      *kind = TomlKind::kBool;
      *value = token;
      return Status::Ok();
    }
    if (Number(token, kind)) {
      value->clear();
      for (char d : token) {
        if (d != '_') value->push_back(d);
      }
      return Status::Ok();
    }
    i_ = start;
    if (token.empty()) return Fail("expected a value (a string, a number, true, false or an array)");
    return Fail("expected a value (a string, a number, true, false or an array), found '" + token + "'" +
                (token.find('-', 1) != std::string::npos || token.find(':') != std::string::npos
                     ? " (dates are not read)"
                     : (std::isalpha(static_cast<unsigned char>(token[0])) ? " (a string needs quotes)" : "")));
  }
  Status BasicString(std::string* out) {
    ++i_;
    out->clear();
    while (!done() && s_[i_] != '"') {
      if (s_[i_] != '\\') {
        out->push_back(s_[i_++]);
        continue;
      }
      if (i_ + 1 >= s_.size()) break;
      const char esc = s_[i_ + 1];
      i_ += 2;
      switch (esc) {
        case '"': out->push_back('"'); break;
        case '\\': out->push_back('\\'); break;
        case 'b': out->push_back('\b'); break;
        case 't': out->push_back('\t'); break;
        case 'n': out->push_back('\n'); break;
        case 'f': out->push_back('\f'); break;
        case 'r': out->push_back('\r'); break;
        case 'u': {
          unsigned code = 0;
          for (int k = 0; k < 4; ++k, ++i_) {
            if (done() || !std::isxdigit(static_cast<unsigned char>(s_[i_]))) return Fail("\\u needs four hex digits");
            code = code * 16 + static_cast<unsigned>(std::stoi(std::string(1, s_[i_]), nullptr, 16));
          }
          if (code >= 0xD800 && code <= 0xDFFF) return Fail("\\u escapes a surrogate, which is no character");
          if (code < 0x80) {  // UTF-8
            out->push_back(static_cast<char>(code));
          } else if (code < 0x800) {
            out->push_back(static_cast<char>(0xC0 | (code >> 6)));
            out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
          } else {
            out->push_back(static_cast<char>(0xE0 | (code >> 12)));
            out->push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
            out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
          }
          break;
        }
        default:
          i_ -= 2;
          return Fail(std::string("unknown escape '\\") + esc + "' in a string");
      }
    }
    if (done()) return Fail("a string is not closed with '\"' on its line");
    ++i_;
    return Status::Ok();
  }
  Status LiteralString(std::string* out) {
    const size_t close = s_.find('\'', i_ + 1);
    if (close == std::string::npos) return Fail("a string is not closed with \"'\" on its line");
    *out = s_.substr(i_ + 1, close - i_ - 1);
    i_ = close + 1;
    return Status::Ok();
  }
  Status Array(TomlEntry* e) {
    e->kind = TomlKind::kArray;
    ++i_;
    bool first = true;
    while (true) {
      SkipSpace();
      if (peek() == ']') {
        ++i_;
        return Status::Ok();
      }
      if (done() || peek() == '#') return Fail("arrays are read on one line: expected ']'");
      if (peek() == '[' || peek() == '{') return Fail("nested arrays and inline tables are not read");
      TomlKind kind;
      std::string item;
      const size_t item_at = i_;
      SHARDSIM_RETURN_IF_ERROR(Scalar(&kind, &item));
      const bool numbers = (kind == TomlKind::kInteger || kind == TomlKind::kFloat) &&
                           (e->item_kind == TomlKind::kInteger || e->item_kind == TomlKind::kFloat);
      if (!first && kind != e->item_kind && !numbers) {
        i_ = item_at;
        return Fail(std::string("an array mixes ") + TomlKindName(e->item_kind) + "s and " + TomlKindName(kind) + "s");
      }
      if (first || kind == TomlKind::kFloat) e->item_kind = kind;
      first = false;
      e->items.push_back(item);
      SkipSpace();
      if (peek() == ',') {
        ++i_;
      } else if (peek() != ']') {
        return Fail("expected ',' or ']' in an array");
      }
    }
  }

  const std::string& name_;
  int line_;
  const std::string& s_;
  size_t i_ = 0;
};

}  // namespace

const char* TomlKindName(TomlKind k) {
  switch (k) {
    case TomlKind::kString: return "string";
    case TomlKind::kInteger: return "integer";
    case TomlKind::kFloat: return "float";
    case TomlKind::kBool: return "boolean";
    case TomlKind::kArray: return "array";
  }
  return "value";
}

StatusOr<std::vector<TomlEntry>> ParseToml(const std::string& text, const std::string& name) {
  std::vector<TomlEntry> out;
  std::set<std::string> paths, tables;
  std::string table;
  int number = 0;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string raw = text.substr(start, end - start);
    start = end + 1;
    ++number;
    LineParser p(name, number, raw);
    p.SkipSpace();
    if (p.done() || p.peek() == '#' || p.peek() == '\r') continue;
    if (p.peek() == '[') {
      const TextLocation header_at = p.at();
      if (raw.compare(p.pos(), 2, "[[") == 0) return p.Fail("arrays of tables ([[...]]) are not read");
      std::vector<std::string> parts;
      do {
        p.Advance();
        p.SkipSpace();
        SHARDSIM_ASSIGN_OR_RETURN(std::string part, p.BareKey("table name"));
        parts.push_back(part);
        p.SkipSpace();
      } while (p.peek() == '.');
      if (p.peek() != ']') return p.Fail("expected '.' or ']' in a table header");
      p.Advance();
      SHARDSIM_RETURN_IF_ERROR(p.End());
      table = Join(parts, ".");
      if (!tables.insert(table).second || paths.count(table)) {
        return Status::Error(name + ":" + std::to_string(header_at.line) + ":" + std::to_string(header_at.col) +
                             ": table [" + table + "] defined twice");
      }
      continue;
    }
    TomlEntry e;
    e.key_at = p.at();
    SHARDSIM_ASSIGN_OR_RETURN(std::string key, p.BareKey("key"));
    e.path = table.empty() ? key : table + "." + key;
    p.SkipSpace();
    if (p.peek() == '.') return p.Fail("dotted keys are not read; write [" + e.path + "] as a table");
    if (p.peek() != '=') return p.Fail("expected '=' after the key '" + key + "'");
    p.Advance();
    p.SkipSpace();
    SHARDSIM_RETURN_IF_ERROR(p.Value(&e));
    SHARDSIM_RETURN_IF_ERROR(p.End());
    if (!paths.insert(e.path).second || tables.count(e.path)) {
      return Status::Error(name + ":" + std::to_string(e.key_at.line) + ":" + std::to_string(e.key_at.col) + ": " +
                           e.path + " set twice");
    }
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace shardsim
