// A reader of the TOML subset job-config files use (torchtitan's train_configs/*.toml), each
// value with where it stands, so that a configuration reader can locate its errors
// (src/io/torchtitan_config.h). TOML v1.0.0 (toml.io/en/v1.0.0) as far as it goes:
//   - comments from '#' outside strings; blank lines;
//   - tables `[a]` and dotted tables `[a.b.c]` (bare keys: A-Z a-z 0-9 _ -);
//   - `key = value`, the key bare, the value a basic string "..." (escapes \" \\ \b \t \n \f
//     \r \uXXXX), a literal string '...', an integer (sign, '_' between digits), a float
//     (fraction and/or exponent, inf, nan), true or false, or a one-line array of those.
// Not read (an error naming it): arrays of tables `[[x]]`, inline tables `{...}`, dotted or
// quoted keys, multi-line strings and arrays, dates. A key set twice is an error, as in TOML.
#pragma once

#include <string>
#include <vector>

#include "src/io/located_values.h"
#include "src/util/status.h"

namespace shardsim {

enum class TomlKind { kString, kInteger, kFloat, kBool, kArray };

struct TomlEntry {
  std::string path;  // "table.key" ("key" before any table header)
  TomlKind kind = TomlKind::kString;
  // A string's content (escapes resolved); a number as written, without '_'; "true"/"false".
  std::string value;
  std::vector<std::string> items;  // an array's elements, each as `value` holds a scalar
  TomlKind item_kind = TomlKind::kString;  // an array's element kind (a mixed array is an error)
  TextLocation key_at, value_at;
};

// The entries in file order. Errors: "name:line:column: what was expected, what was found".
StatusOr<std::vector<TomlEntry>> ParseToml(const std::string& text, const std::string& name);

// "string", "integer", "float", "boolean", "array": for messages.
const char* TomlKindName(TomlKind k);

}  // namespace shardsim
