// Small string helpers shared by the loaders and the CLI: edit distance for "did you mean".
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace shardsim {

// Levenshtein distance between a and b.
int EditDistance(std::string_view a, std::string_view b);

// The candidate closest to `word` if it is close enough to be a likely typo, else "".
std::string ClosestMatch(std::string_view word, const std::vector<std::string>& candidates);

// " (did you mean 'x'?)" or "" when nothing is close.
std::string DidYouMean(std::string_view word, const std::vector<std::string>& candidates);

// `text` without leading and trailing spaces, tabs and carriage returns.
std::string Trim(std::string_view text);

// Splits on a delimiter; empty pieces are kept.
std::vector<std::string> Split(std::string_view text, char delim);

// printf-style formatting of one number: Fmt("%.1f %%", 12.34) -> "12.3 %".
std::string Fmt(const char* format, double v);

// "a, b, c"
std::string Join(const std::vector<std::string>& items, std::string_view sep);

// The values of one setting written as words ("attn mlp"), a comma list ("attn,mlp") or a
// Python list of strings (["attn", "mlp"]); empty pieces dropped.
std::vector<std::string> SplitValueList(const std::string& text);

// `text` as a YAML double-quoted scalar (YAML 1.2, 7.3.1): the quotes, with '\\' and '"'
// escaped and control characters as \xNN, so any string reads back as itself.
std::string YamlQuoted(std::string_view text);

}  // namespace shardsim
