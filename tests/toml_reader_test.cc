// The TOML subset reader (src/io/toml_reader.h): values and their kinds, tables, locations,
// and the constructs it refuses, each with the line and column of what is wrong.
#include "src/io/toml_reader.h"

#include <gtest/gtest.h>

#include <string>

namespace shardsim {
namespace {

const TomlEntry* Find(const std::vector<TomlEntry>& entries, const std::string& path) {
  for (const TomlEntry& e : entries) {
    if (e.path == path) return &e;
  }
  return nullptr;
}

TEST(TomlReader, ReadsScalarsArraysAndTables) {
  const std::string text =
      "# a comment\n"
      "top = 1\n"
      "\n"
      "[job]\n"
      "description = \"say \\\"hi\\\" \\u00e9\"  # trailing comment\n"
      "path = 'C:\\dir'\n"
      "[parallelism]\n"
      "  data_parallel_shard_degree = -1\n"
      "big = 1_000\n"
      "lr = 1.5e-4\n"
      "on = true\n"
      "[quantize.linear.float8]\n"
      "filter_fqns = [\"output\", 'lm_head']\n"
      "empty = []\n"
      "nums = [1, 2.5]\n";
  StatusOr<std::vector<TomlEntry>> r = ParseToml(text, "t.toml");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 10u);
  const TomlEntry* top = Find(*r, "top");
  ASSERT_TRUE(top);
  EXPECT_EQ(top->kind, TomlKind::kInteger);
  EXPECT_EQ(top->value, "1");
  // "say \"hi\" \u00e9": the escapes resolved, é as UTF-8 (C3 A9).
  EXPECT_EQ(Find(*r, "job.description")->value, "say \"hi\" \xC3\xA9");
  EXPECT_EQ(Find(*r, "job.path")->value, "C:\\dir");  // a literal string keeps its backslash
  const TomlEntry* shard = Find(*r, "parallelism.data_parallel_shard_degree");
  EXPECT_EQ(shard->value, "-1");
  // Line 8, the key after two spaces: column 3; the value after " = ": column 32.
  EXPECT_EQ(shard->key_at.line, 8);
  EXPECT_EQ(shard->key_at.col, 3);
  EXPECT_EQ(shard->value_at.col, 32);
  EXPECT_EQ(Find(*r, "parallelism.big")->value, "1000");
  EXPECT_EQ(Find(*r, "parallelism.lr")->kind, TomlKind::kFloat);
  EXPECT_EQ(Find(*r, "parallelism.on")->value, "true");
  const TomlEntry* fqns = Find(*r, "quantize.linear.float8.filter_fqns");
  ASSERT_EQ(fqns->items.size(), 2u);
  EXPECT_EQ(fqns->items[1], "lm_head");
  EXPECT_EQ(fqns->item_kind, TomlKind::kString);
  EXPECT_TRUE(Find(*r, "quantize.linear.float8.empty")->items.empty());
  EXPECT_EQ(Find(*r, "quantize.linear.float8.nums")->item_kind, TomlKind::kFloat);  // integers and floats mix
}

// Each refusal names the file, the line and the column where the construct starts.
TEST(TomlReader, RefusesWhatItDoesNotReadWithLocations) {
  struct Case {
    std::string text, where, what;
  };
  const Case cases[] = {
      {"[[layers]]\n", "t.toml:1:1:", "arrays of tables"},
      {"a = {b = 1}\n", "t.toml:1:5:", "inline tables"},
      {"a.b = 1\n", "t.toml:1:2:", "dotted keys"},
      {"\"a\" = 1\n", "t.toml:1:1:", "quoted keys"},
      {"a = \"\"\"x\n", "t.toml:1:5:", "multi-line strings"},
      {"a = 1979-05-27\n", "t.toml:1:5:", "dates are not read"},
      {"a = hello\n", "t.toml:1:5:", "a string needs quotes"},
      {"a = 1\na = 2\n", "t.toml:2:1:", "a set twice"},
      {"[x]\n[x]\n", "t.toml:2:1:", "table [x] defined twice"},
      {"a = [1, \"b\"]\n", "t.toml:1:9:", "mixes integers and strings"},
      {"a = [1,\n2]\n", "t.toml:1:8:", "arrays are read on one line"},
      {"a = \"open\n", "t.toml:1:10:", "not closed"},
      {"a = 1 2\n", "t.toml:1:7:", "end of the line"},
      {"a = 012\n", "t.toml:1:5:", "expected a value"},
      {"a = \"\\q\"\n", "t.toml:1:6:", "unknown escape"},
      {"[x\n", "t.toml:1:3:", "expected '.' or ']'"},
  };
  for (const Case& c : cases) {
    StatusOr<std::vector<TomlEntry>> r = ParseToml(c.text, "t.toml");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.status().message().rfind(c.where, 0), 0u) << c.text << " -> " << r.status().message();
    EXPECT_NE(r.status().message().find(c.what), std::string::npos) << c.text << " -> " << r.status().message();
  }
}

}  // namespace
}  // namespace shardsim
