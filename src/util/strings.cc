// See strings.h.
#include "src/util/strings.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace shardsim {

int EditDistance(std::string_view a, std::string_view b) {
  std::vector<int> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      const int sub = prev[j - 1] + (std::tolower(a[i - 1]) == std::tolower(b[j - 1]) ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string ClosestMatch(std::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  int best_distance = 0;
  for (const std::string& c : candidates) {
    const int d = EditDistance(word, c);
    if (best.empty() || d < best_distance) {
      best = c;
      best_distance = d;
    }
  }
  // A typo changes a few characters; allow about a third of the word, at least 2. A word
  // with every character changed is no typo ("zero=4" is not a misspelt "0").
  const int limit = std::min<int>(std::max<int>(2, static_cast<int>(word.size()) / 3),
                                  static_cast<int>(word.size()) - 1);
  return (!best.empty() && best_distance <= limit) ? best : std::string();
}

std::string DidYouMean(std::string_view word, const std::vector<std::string>& candidates) {
  const std::string m = ClosestMatch(word, candidates);
  return m.empty() ? std::string() : " (did you mean '" + m + "'?)";
}

std::string Trim(std::string_view text) {
  const size_t b = text.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return "";
  return std::string(text.substr(b, text.find_last_not_of(" \t\r") - b + 1));
}

std::vector<std::string> Split(std::string_view text, char delim) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t pos = text.find(delim, start);
    out.emplace_back(text.substr(start, pos == std::string_view::npos ? pos : pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return out;
}

std::string Fmt(const char* format, double v) {
  char buf[128];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string Join(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    out += items[i];
  }
  return out;
}

std::string YamlQuoted(std::string_view text) {
  std::string out = "\"";
  for (const char ch : text) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

std::vector<std::string> SplitValueList(const std::string& text) {
  std::string t = Trim(text);
  if (t.size() >= 2 && t.front() == '[' && t.back() == ']') t = t.substr(1, t.size() - 2);
  std::vector<std::string> out;
  std::string word;
  auto flush = [&]() {
    std::string w = Trim(word);
    if (w.size() >= 2 && (w.front() == '"' || w.front() == '\'') && w.back() == w.front()) w = w.substr(1, w.size() - 2);
    if (!w.empty()) out.push_back(w);
    word.clear();
  };
  for (char c : t) {
    if (c == ',' || c == ' ' || c == '\t') {
      flush();
    } else {
      word += c;
    }
  }
  flush();
  return out;
}

}  // namespace shardsim
