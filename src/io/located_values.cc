// See located_values.h.
#include "src/io/located_values.h"

#include <charconv>
#include <cmath>

#include "src/util/strings.h"

namespace shardsim {

bool LocatedValues::Set(const std::string& key, std::string value, TextLocation key_at, TextLocation value_at) {
  return values_.emplace(key, Entry{std::move(value), key_at, value_at}).second;
}

const LocatedValues::Entry* LocatedValues::Find(const std::string& key) const {
  auto it = values_.find(key);
  if (it == values_.end() || (none_is_absent_ && it->second.value == "None")) return nullptr;
  return &it->second;
}

std::string LocatedValues::Text(const std::string& key, const std::string& fallback) const {
  auto it = values_.find(key);
  return it == values_.end() ? fallback : it->second.value;
}

std::string LocatedValues::Where(const std::string& key) const {
  auto it = values_.find(key);
  const TextLocation at = it == values_.end() ? TextLocation{} : it->second.key_at;
  return file_ + ":" + std::to_string(at.line) + ":" + std::to_string(at.col);
}

int64_t LocatedValues::Int(const std::string& key, int64_t fallback, int64_t min_value) {
  const Entry* e = Find(key);
  if (!e) return fallback;
  int64_t v = 0;
  const std::string& s = e->value;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) {
    Fail(e->value_at, key + ": expected an integer, found '" + s + "'" +
                          (s.rfind('$', 0) == 0 ? " (a shell variable: give the arguments as expanded)" : ""));
    return fallback;
  }
  if (v < min_value) {
    Fail(e->value_at, key + ": expected at least " + std::to_string(min_value) + ", found " + s);
    return fallback;
  }
  return v;
}

double LocatedValues::Number(const std::string& key, double fallback, double min_value, double max_value) {
  const Entry* e = Find(key);
  if (!e) return fallback;
  const std::string& s = e->value;
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (...) {
    used = 0;
  }
  if (s.empty() || used != s.size() || !std::isfinite(v) || v < min_value || v > max_value) {
    Fail(e->value_at, key + ": expected a number from " + Fmt("%g", min_value) + " to " + Fmt("%g", max_value) +
                          ", found '" + s + "'");
    return fallback;
  }
  return v;
}

bool LocatedValues::Bool(const std::string& key, bool fallback) {
  const Entry* e = Find(key);
  if (!e) return fallback;
  if (e->value == "True") return true;
  if (e->value == "False") return false;
  Fail(e->value_at, key + ": expected True or False, found '" + e->value + "'");
  return fallback;
}

std::string LocatedValues::Choice(const std::string& key, const std::string& fallback,
                                  const std::vector<std::string>& choices) {
  const Entry* e = Find(key);
  if (!e) return fallback;
  for (const std::string& c : choices) {
    if (c == e->value) return c;
  }
  Fail(e->value_at, key + ": expected one of " + Join(choices, ", ") + ", found '" + e->value + "'" +
                        DidYouMean(e->value, choices));
  return fallback;
}

void LocatedValues::Error(const std::string& key, const std::string& what) {
  auto it = values_.find(key);
  if (it != values_.end()) {
    Fail(it->second.key_at, what);
  } else if (status_.ok()) {
    status_ = Status::Error(file_ + ": " + what);
  }
}

void LocatedValues::Fail(TextLocation at, const std::string& what) {
  if (!status_.ok()) return;
  status_ = Status::Error(file_ + ":" + std::to_string(at.line) + ":" + std::to_string(at.col) + ": " + what);
}

}  // namespace shardsim
