// See yaml_reader.h.
#include "src/io/yaml_reader.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <utility>

#include "src/util/atomic_file.h"
#include "src/util/strings.h"

namespace shardsim {

std::string YamlErrorSink::Where(const YAML::Mark& mark) const {
  if (mark.is_null()) return file;
  return file + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

void YamlErrorSink::Fail(const YAML::Mark& mark, const std::string& path,
                         const std::string& what) {
  if (!status.ok()) return;  // keep the first error
  std::string msg = Where(mark) + ": ";
  if (!path.empty()) msg += "field '" + path + "': ";
  status = Status::Error(msg + what);
}

YamlMap::YamlMap(YAML::Node node, std::string path, std::shared_ptr<YamlErrorSink> sink)
    : node_(std::move(node)), path_(std::move(path)), sink_(std::move(sink)) {
  if (!node_.IsMap()) {
    sink_->Fail(node_.Mark(), path_,
                "expected a map of 'key: value' lines, found " +
                    std::string(node_.IsNull() ? "nothing" : node_.IsSequence() ? "a list"
                                                                               : "a scalar"));
    node_ = YAML::Node(YAML::NodeType::Map);
  }
}

std::string YamlMap::KeyPath(const std::string& key) const {
  return path_.empty() ? key : path_ + "." + key;
}

void YamlMap::Fail(const YAML::Node& at, const std::string& key, const std::string& what) {
  sink_->Fail(at.IsDefined() ? at.Mark() : node_.Mark(), KeyPath(key), what);
}

YAML::Node YamlMap::Get(const std::string& key) {
  // Listed once in "known keys here", however often it is asked for (Has, then String).
  if (std::find(known_.begin(), known_.end(), key) == known_.end()) known_.push_back(key);
  for (const auto& kv : node_) {
    // An explicit null ("key: ~", "key:", JSON null) counts as absent.
    if (kv.first.IsScalar() && kv.first.Scalar() == key && !kv.second.IsNull()) return kv.second;
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

bool YamlMap::Has(const std::string& key) {
  return Get(key).IsDefined();
}

void YamlMap::Missing(const std::string& key) {
  // Located at what was written instead when there is something to point at: the key itself
  // with no value, else an unknown key that looks like a typo of it; else at the map.
  for (const auto& kv : node_) {
    if (kv.first.IsScalar() && kv.first.Scalar() == key) {
      sink_->Fail(kv.first.Mark(), KeyPath(key), "required field has no value");
      return;
    }
  }
  for (const auto& kv : node_) {
    if (!kv.first.IsScalar()) continue;
    const std::string& k = kv.first.Scalar();
    if (ClosestMatch(k, {key}) == key) {
      sink_->Fail(kv.first.Mark(), KeyPath(key),
                  "missing required field; found unknown key '" + k + "' (did you mean '" +
                      key + "'?)");
      return;
    }
  }
  sink_->Fail(node_.Mark(), KeyPath(key), "missing required field");
}

std::optional<std::string> YamlMap::Scalar(const std::string& key, const YAML::Node& value,
                                           const std::string& expected) {
  if (!value.IsScalar()) {
    Fail(value, key,
         "expected " + expected + ", found " +
             (value.IsMap() ? "a map" : value.IsSequence() ? "a list" : "nothing"));
    return std::nullopt;
  }
  return value.Scalar();
}

std::optional<std::string> YamlMap::OptionalString(const std::string& key) {
  YAML::Node v = Get(key);
  if (!v.IsDefined()) return std::nullopt;
  auto s = Scalar(key, v, "a string");
  if (s && s->empty()) {
    Fail(v, key, "expected a non-empty string");
    return std::nullopt;
  }
  return s;
}

std::string YamlMap::String(const std::string& key) {
  if (!Has(key)) {
    Missing(key);
    return "";
  }
  return OptionalString(key).value_or("");
}

std::optional<long long> YamlMap::OptionalInt(const std::string& key, long long min_value) {
  YAML::Node v = Get(key);
  if (!v.IsDefined()) return std::nullopt;
  auto s = Scalar(key, v, "an integer");
  if (!s) return std::nullopt;
  std::istringstream in(*s);
  long long value = 0;
  in >> value;
  if (in.fail() || !in.eof()) {
    Fail(v, key, "expected an integer, found '" + *s + "'");
    return std::nullopt;
  }
  if (value < min_value) {
    Fail(v, key, "expected an integer >= " + std::to_string(min_value) + ", found " + *s);
    return std::nullopt;
  }
  return value;
}

long long YamlMap::Int(const std::string& key, long long min_value) {
  if (!Has(key)) {
    Missing(key);
    return min_value;
  }
  return OptionalInt(key, min_value).value_or(min_value);
}

std::optional<double> YamlMap::OptionalNumber(const std::string& key, double min_value,
                                              double max_value) {
  YAML::Node v = Get(key);
  if (!v.IsDefined()) return std::nullopt;
  auto s = Scalar(key, v, "a number");
  if (!s) return std::nullopt;
  std::istringstream in(*s);
  double value = 0;
  in >> value;
  if (in.fail() || !in.eof() || !std::isfinite(value)) {
    Fail(v, key, "expected a plain number, found '" + *s + "'");
    return std::nullopt;
  }
  if (value < min_value || value > max_value) {
    std::ostringstream range;
    range << "expected a number in [" << min_value << ", " << max_value << "], found " << *s;
    Fail(v, key, range.str());
    return std::nullopt;
  }
  return value;
}

double YamlMap::Number(const std::string& key, double min_value, double max_value) {
  if (!Has(key)) {
    Missing(key);
    return min_value;
  }
  return OptionalNumber(key, min_value, max_value).value_or(min_value);
}

std::optional<double> YamlMap::OptionalQuantity(const std::string& key, Dimension dim) {
  YAML::Node v = Get(key);
  if (!v.IsDefined()) return std::nullopt;
  auto s = Scalar(key, v, std::string(DimensionName(dim)) + " such as \"80 GiB\"");
  if (!s) return std::nullopt;
  StatusOr<double> q = ParseQuantity(*s, dim);
  if (!q.ok()) {
    Fail(v, key, q.status().message());
    return std::nullopt;
  }
  return *q;
}

double YamlMap::Quantity(const std::string& key, Dimension dim) {
  if (!Has(key)) {
    Missing(key);
    return 1.0;
  }
  return OptionalQuantity(key, dim).value_or(1.0);
}

std::optional<bool> YamlMap::OptionalBool(const std::string& key) {
  YAML::Node v = Get(key);
  if (!v.IsDefined()) return std::nullopt;
  auto s = Scalar(key, v, "true or false");
  if (!s) return std::nullopt;
  if (*s == "true" || *s == "True" || *s == "on" || *s == "yes") return true;
  if (*s == "false" || *s == "False" || *s == "off" || *s == "no") return false;
  Fail(v, key, "expected true or false, found '" + *s + "'");
  return std::nullopt;
}

std::optional<std::string> YamlMap::OptionalChoice(const std::string& key,
                                                   const std::vector<std::string>& choices) {
  YAML::Node v = Get(key);
  if (!v.IsDefined()) return std::nullopt;
  auto s = Scalar(key, v, "one of " + Join(choices, ", "));
  if (!s) return std::nullopt;
  for (const std::string& c : choices) {
    if (c == *s) return s;
  }
  Fail(v, key, "expected one of " + Join(choices, ", ") + ", found '" + *s + "'" +
                   DidYouMean(*s, choices));
  return std::nullopt;
}

std::string YamlMap::Choice(const std::string& key, const std::vector<std::string>& choices) {
  if (!Has(key)) {
    Missing(key);
    return choices.front();
  }
  return OptionalChoice(key, choices).value_or(choices.front());
}

std::optional<YamlMap> YamlMap::OptionalMap(const std::string& key) {
  YAML::Node v = Get(key);
  if (!v.IsDefined()) return std::nullopt;
  return YamlMap(v, KeyPath(key), sink_);
}

YamlMap YamlMap::Map(const std::string& key) {
  YAML::Node v = Get(key);
  if (!v.IsDefined()) {
    Missing(key);
    return YamlMap(YAML::Node(YAML::NodeType::Map), KeyPath(key), sink_);
  }
  return YamlMap(v, KeyPath(key), sink_);
}

std::optional<std::vector<long long>> YamlMap::OptionalIntList(const std::string& key,
                                                               long long min_value) {
  YAML::Node v = Get(key);
  if (!v.IsDefined()) return std::nullopt;
  if (!v.IsSequence()) {
    Fail(v, key, "expected a list of integers such as [128, 256]");
    return std::nullopt;
  }
  std::vector<long long> out;
  for (const YAML::Node& item : v) {
    long long value = 0;
    std::istringstream in(item.IsScalar() ? item.Scalar() : std::string("x"));
    in >> value;
    if (in.fail() || !in.eof() || value < min_value) {
      Fail(item, key, "expected integers >= " + std::to_string(min_value) + " in the list");
      return std::nullopt;
    }
    out.push_back(value);
  }
  return out;
}

std::optional<std::vector<std::string>> YamlMap::OptionalStringList(const std::string& key) {
  YAML::Node v = Get(key);
  if (!v.IsDefined()) return std::nullopt;
  std::vector<std::string> out;
  if (v.IsSequence()) {
    for (const YAML::Node& item : v) {
      if (!item.IsScalar()) {
        Fail(item, key, "expected strings in the list");
        return std::nullopt;
      }
      out.push_back(item.Scalar());
    }
    return out;
  }
  Fail(v, key, "expected a list of strings such as [\"a\", \"b\"]");
  return std::nullopt;
}

std::vector<YamlMap> YamlMap::MapList(const std::string& key) {
  YAML::Node v = Get(key);
  std::vector<YamlMap> out;
  if (!v.IsDefined()) {
    Missing(key);
    return out;
  }
  if (!v.IsSequence() || v.size() == 0) {
    Fail(v, key, "expected a non-empty list of maps (items starting with '- ')");
    return out;
  }
  for (size_t i = 0; i < v.size(); ++i) {
    const YAML::Node item = v[i];
    if (!item.IsMap()) {
      Fail(item, key, "expected item " + std::to_string(i + 1) + " to be a map of fields");
      return {};
    }
    out.emplace_back(item, KeyPath(key) + "[" + std::to_string(i) + "]", sink_);
  }
  return out;
}

void YamlMap::Error(const std::string& key, const std::string& what) {
  YAML::Node v = Get(key);
  Fail(v, key, what);
}

void YamlMap::Finish() {
  std::vector<std::pair<std::string, YAML::Mark>> seen;
  for (const auto& kv : node_) {
    const std::string k = kv.first.IsScalar() ? kv.first.Scalar() : std::string("?");
    bool known = false;
    for (const std::string& n : known_) known = known || n == k;
    // A repeated key is reported where it repeats, naming the first occurrence.
    for (const auto& [name, first] : seen) {
      if (name == k) {
        sink_->Fail(kv.first.Mark(), KeyPath(k),
                    "key appears more than once (first at line " +
                        std::to_string(first.line + 1) + ")");
        return;
      }
    }
    seen.emplace_back(k, kv.first.Mark());
    if (!known) {
      sink_->Fail(kv.first.Mark(), KeyPath(k),
                  "unknown key" + DidYouMean(k, known_) + "; known keys here: " +
                      Join(known_, ", "));
      return;
    }
  }
}

StatusOr<YamlFile> YamlFile::Parse(const std::string& text, const std::string& name) {
  YamlFile f;
  f.sink_ = std::make_shared<YamlErrorSink>();
  f.sink_->file = name;
  try {
    f.root_ = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Status::Error(f.sink_->Where(e.mark) + ": not valid YAML: " + e.msg);
  }
  if (!f.root_.IsMap()) {
    // At the list or scalar found instead; an empty file has no mark, so 1:1.
    const YAML::Mark at = f.root_.Mark();
    return Status::Error((at.is_null() ? name + ":1:1" : f.sink_->Where(at)) +
                         ": expected a map of 'key: value' lines at the top level" +
                         std::string(f.root_.IsNull() ? " (the file is empty)" : ""));
  }
  return f;
}

StatusOr<YamlFile> YamlFile::Load(const std::string& file) {
  SHARDSIM_ASSIGN_OR_RETURN(std::string text, ReadWholeFile(file));
  return Parse(text, file);
}

}  // namespace shardsim
