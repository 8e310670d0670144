// Strict, located reading of YAML (and JSON) description files.
// Every error names file:line:column, the key path, what was expected and what was found;
// unknown keys are errors with a "did you mean". The first error wins and is kept.
#pragma once

#include <yaml-cpp/yaml.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "src/util/status.h"
#include "src/util/units.h"

namespace shardsim {

// The first error met while reading one file, shared by all readers of that file.
struct YamlErrorSink {
  std::string file;
  Status status;
  void Fail(const YAML::Mark& mark, const std::string& path, const std::string& what);
  // "file:line:col" for a mark (1-based line and column).
  std::string Where(const YAML::Mark& mark) const;
};

// Reads the keys of one YAML map. Call Finish() after the last key to reject unknown ones.
class YamlMap {
 public:
  YamlMap(YAML::Node node, std::string path, std::shared_ptr<YamlErrorSink> sink);

  // Required fields: a missing or ill-typed field records an error and returns a default.
  std::string String(const std::string& key);
  long long Int(const std::string& key, long long min_value = 1);
  double Number(const std::string& key, double min_value, double max_value);
  double Quantity(const std::string& key, Dimension dim);
  // One of `choices`; the error lists them and suggests the closest.
  std::string Choice(const std::string& key, const std::vector<std::string>& choices);
  YamlMap Map(const std::string& key);

  // Optional fields: nullopt when absent; errors as above when present but wrong.
  bool Has(const std::string& key);  // also marks the key as known
  std::optional<std::string> OptionalString(const std::string& key);
  std::optional<long long> OptionalInt(const std::string& key, long long min_value = 1);
  std::optional<double> OptionalNumber(const std::string& key, double min_value, double max_value);
  std::optional<double> OptionalQuantity(const std::string& key, Dimension dim);
  std::optional<bool> OptionalBool(const std::string& key);
  std::optional<std::string> OptionalChoice(const std::string& key,
                                            const std::vector<std::string>& choices);
  std::optional<YamlMap> OptionalMap(const std::string& key);
  std::optional<std::vector<long long>> OptionalIntList(const std::string& key, long long min_value);
  std::optional<std::vector<std::string>> OptionalStringList(const std::string& key);
  // A required list of maps, each read by its own YamlMap (path `key[i]`); an empty list is an
  // error.
  std::vector<YamlMap> MapList(const std::string& key);

  // Records an error located at the key's value (or at this map when the key is absent).
  void Error(const std::string& key, const std::string& what);

  // Rejects keys that no accessor asked for, suggesting the closest known key.
  void Finish();

  bool failed() const { return !sink_->status.ok(); }
  const std::string& path() const { return path_; }

 private:
  std::string KeyPath(const std::string& key) const;
  // The value node, recording the key as known; null node when absent.
  YAML::Node Get(const std::string& key);
  // Records "missing field" (with a hint if an unknown key looks like it).
  void Missing(const std::string& key);
  // The value as a scalar string, or records a type error.
  std::optional<std::string> Scalar(const std::string& key, const YAML::Node& value,
                                    const std::string& expected);
  void Fail(const YAML::Node& at, const std::string& key, const std::string& what);

  YAML::Node node_;
  std::string path_;
  std::shared_ptr<YamlErrorSink> sink_;
  std::vector<std::string> known_;
};

// A parsed file: its root map and the shared error sink.
class YamlFile {
 public:
  // Loads and parses; syntax errors (truncated, garbled) come back located.
  static StatusOr<YamlFile> Load(const std::string& file);
  // Parses text held in memory; `name` stands for the file in messages.
  static StatusOr<YamlFile> Parse(const std::string& text, const std::string& name);

  YamlMap Root() const { return YamlMap(root_, "", sink_); }
  // The first error recorded by any reader of this file, or OK.
  const Status& status() const { return sink_->status; }

 private:
  YAML::Node root_;
  std::shared_ptr<YamlErrorSink> sink_;
};

}  // namespace shardsim
