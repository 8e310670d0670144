// See stack.h.
#include "src/layout/stack.h"

#include <algorithm>
#include <charconv>
#include <iterator>

#include "src/io/bundled.h"
#include "src/io/yaml_reader.h"
#include "src/util/strings.h"

namespace shardsim {
namespace {

constexpr int64_t kMaxRules = 1000;  // a stack file's rule count bound

// The keys a term may test, and each one's value as a number: counts as they are, switches 0
// or 1, enumerations their enumerator (compared only for equality).
constexpr const char* kFields[] = {
    "tp", "pp", "dp", "cp", "ep", "vpp", "mbs", "gbs", "zero", "sp", "recompute", "schedule", "dtype",
    "offload", "compress", "overlap_dp", "overlap_tp", "overlap_pp", "prefetch", "attention",
    "bucket_params", "live_params", "fp8_params", "first_stage_layers", "last_stage_layers",
    "embedding_in_split", "loss_in_split", "moe_capacity", "moe_imbalance", "kernels", "cuda_graphs",
    "etp", "grad_bf16"};

int FieldIndex(const std::string& key) {
  for (int i = 0; i < static_cast<int>(std::size(kFields)); ++i) {
    if (key == kFields[i]) return i;
  }
  return -1;
}

double FieldValue(const Layout& l, int field) {
  auto d = [](auto v) { return static_cast<double>(v); };
  switch (field) {
    case 0: return d(l.tp);
    case 1: return d(l.pp);
    case 2: return d(l.dp);
    case 3: return d(l.cp);
    case 4: return d(l.ep);
    case 5: return d(l.vpp);
    case 6: return d(l.mbs);
    case 7: return d(l.gbs);
    case 8: return d(l.zero);
    case 9: return d(l.sp);
    case 10: return d(static_cast<int>(l.recompute));
    case 11: return d(static_cast<int>(l.schedule));
    case 12: return d(static_cast<int>(l.dtype));
    case 13: return d(static_cast<int>(l.offload));
    case 14: return l.grad_compression;
    case 15: return d(l.overlap_dp);
    case 16: return d(static_cast<int>(l.overlap_tp));
    case 17: return d(l.overlap_pp);
    case 18: return d(l.prefetch);
    case 19: return d(static_cast<int>(l.attention));
    case 20: return d(l.bucket_params);
    case 21: return d(l.live_params);
    case 22: return d(l.fp8_params);
    case 23: return d(l.first_stage_layers);
    case 24: return d(l.last_stage_layers);
    case 25: return d(l.embedding_in_split);
    case 26: return d(l.loss_in_split);
    case 27: return l.moe_capacity;
    case 28: return l.moe_imbalance;
    case 29: return d(static_cast<int>(l.kernels));
    case 30: return d(static_cast<int>(l.cuda_graphs));
    // The experts' TP where it is not the dense TP, else 0: `etp>0` tests for experts split
    // otherwise than the dense layers.
    case 31: return d(l.own_expert_tp() ? l.etp : 0);
    case 32: return d(l.grad_bf16);
  }
  return 0;
}

// One term, `key=value` or `key>N`, checked against the layout grammar.
StatusOr<StackTerm> ParseTerm(const std::string& text) {
  StackTerm t;
  t.text = text;
  const size_t gt = text.find('>');
  const size_t eq = text.find('=');
  if (gt != std::string::npos && eq == std::string::npos) {
    t.greater = true;
    t.key = text.substr(0, gt);
    const std::string n = text.substr(gt + 1);
    const auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), t.bound);
    if (ec != std::errc() || end != n.data() + n.size() || t.bound < 0) {
      return Status::Error("'" + text + "': expected key>N with N a non-negative integer");
    }
    // The key must be a numeric layout key: key=N+1 must parse and give back that number.
    StatusOr<Layout> probe = ParseLayout(t.key + "=" + std::to_string(t.bound + 1));
    if (!probe.ok()) return Status::Error("'" + text + "': " + probe.status().message());
    if (LayoutValue(*probe, t.key) != std::to_string(t.bound + 1)) {
      return Status::Error("'" + text + "': '" + t.key + "' is not a numeric layout key");
    }
    t.field = FieldIndex(t.key);
    if (t.field < 0) return Status::Error("'" + text + "': '" + t.key + "' cannot be tested by a stack rule");
    return t;
  }
  if (eq == std::string::npos || gt != std::string::npos) {
    return Status::Error("'" + text + "': expected key=value or key>N (docs/layout.md keys)");
  }
  t.key = text.substr(0, eq);
  StatusOr<Layout> probe = ParseLayout(text);
  if (!probe.ok()) return Status::Error("'" + text + "': " + probe.status().message());
  t.value = LayoutValue(*probe, t.key).value_or("");
  t.field = FieldIndex(t.key);
  if (t.value.empty() || t.field < 0) {
    return Status::Error("'" + text + "': '" + t.key + "' cannot be tested by a stack rule");
  }
  t.code = FieldValue(*probe, t.field);
  return t;
}

std::vector<StackTerm> ReadTerms(YamlMap& r, const std::string& key, bool required) {
  std::vector<StackTerm> out;
  std::optional<std::string> spec = required ? std::optional<std::string>(r.String(key)) : r.OptionalString(key);
  if (!spec || r.failed()) return out;
  for (const std::string& text : Split(*spec, ',')) {
    StatusOr<StackTerm> t = ParseTerm(text);
    if (!t.ok()) {
      r.Error(key, t.status().message());
      return {};
    }
    out.push_back(*t);
  }
  if (out.empty() && required) r.Error(key, "expected at least one term");
  return out;
}

bool Holds(const StackTerm& t, const Layout& l) {
  const double v = FieldValue(l, t.field);
  return t.greater ? v > static_cast<double>(t.bound) : v == t.code;
}

}  // namespace

namespace {

StatusOr<StackSpec> FromFile(const YamlFile& f, const std::string& name) {
  YamlMap root = f.Root();
  StackSpec s;
  s.name = root.String("name");
  s.source = root.String("source");
  s.description = root.String("description");
  s.emit = root.OptionalString("emit").value_or("");
  for (const std::string& f : Split(s.emit, ',')) {
    static const std::vector<std::string> kFormats = {"megatron", "deepspeed", "nemo", "torchtitan"};
    if (!s.emit.empty() && std::find(kFormats.begin(), kFormats.end(), f) == kFormats.end()) {
      root.Error("emit", "'" + f + "': expected megatron, deepspeed, nemo or torchtitan (comma-separated)" + DidYouMean(f, kFormats));
      break;
    }
  }
  if (std::optional<std::string> d = root.OptionalString("defaults")) {
    static const std::vector<std::string> kKeys = {"bucket_params", "live_params", "prefetch", "overlap_dp", "attention", "kernels"};
    for (const std::string& kv : Split(*d, ',')) {
      const size_t eq = kv.find('=');
      const std::string key = kv.substr(0, eq);
      if (eq == std::string::npos || std::find(kKeys.begin(), kKeys.end(), key) == kKeys.end()) {
        root.Error("defaults", "'" + kv + "': expected key=value of " + Join(kKeys, ", ") + DidYouMean(key, kKeys));
        break;
      }
      if (StatusOr<Layout> one = ParseLayout(kv); !one.ok()) {
        root.Error("defaults", one.status().message());
        break;
      }
      s.defaults[key] = kv.substr(eq + 1);
    }
  }
  std::vector<YamlMap> fdefaults;
  if (root.Has("framework_defaults")) fdefaults = root.MapList("framework_defaults");
  std::vector<YamlMap> rules = root.MapList("rules");
  root.Finish();
  if (static_cast<int64_t>(fdefaults.size()) > kMaxRules) {
    return Status::Error(name + ": 'framework_defaults': expected at most " + std::to_string(kMaxRules) + " entries");
  }
  for (YamlMap& r : fdefaults) {
    static const std::vector<std::string> kUsers = {"tp", "pp", "dp", "cp", "ep", "vpp", "mbs", "gbs"};
    StackDefaultRule d;
    d.when = ReadTerms(r, "when", false);
    const std::string set = r.String("set");
    for (const std::string& kv : Split(set, ',')) {
      if (r.failed()) break;
      const size_t eq = kv.find('=');
      const std::string key = kv.substr(0, eq);
      if (eq == std::string::npos) {
        r.Error("set", "'" + kv + "': expected key=value (docs/layout.md keys)");
      } else if (std::find(kUsers.begin(), kUsers.end(), key) != kUsers.end()) {
        r.Error("set", "'" + kv + "': the parallel sizes, mbs and gbs are the user's, not a framework default");
      } else if (StatusOr<Layout> one = ParseLayout(kv); !one.ok()) {
        r.Error("set", one.status().message());
      } else {
        d.set.emplace_back(key, kv.substr(eq + 1));
      }
    }
    d.why = r.String("why");
    r.Finish();
    s.framework_defaults.push_back(d);
  }
  if (static_cast<int64_t>(rules.size()) > kMaxRules) {
    return Status::Error(name + ": 'rules': expected at most " + std::to_string(kMaxRules) + " rules");
  }
  for (YamlMap& r : rules) {
    StackRule rule;
    rule.refuse = ReadTerms(r, "refuse", true);
    rule.when = ReadTerms(r, "when", false);
    rule.why = r.String("why");
    r.Finish();
    s.rules.push_back(rule);
  }
  if (!f.status().ok()) return f.status();
  return s;
}

}  // namespace

StatusOr<StackSpec> ParseStackYaml(const std::string& text, const std::string& name) {
  SHARDSIM_ASSIGN_OR_RETURN(YamlFile f, YamlFile::Parse(text, name));
  return FromFile(f, name);
}

StatusOr<StackSpec> LoadStack(const std::string& path_or_name) {
  StatusOr<std::string> resolved = ResolveBundled(path_or_name, "stacks");
  if (!resolved.ok()) {
    // Every command reads --stack none as no stack: a near miss of it is said too.
    return Status::Error(resolved.status().message() + "; or none, no stack" + DidYouMean(path_or_name, {"none"}));
  }
  const std::string path = *resolved;
  SHARDSIM_ASSIGN_OR_RETURN(YamlFile f, YamlFile::Load(path));
  return FromFile(f, path);
}

AttentionImpl TransformerEngineAttention(const HardwareSpec& hw) {
  return hw.gpu.efficiency.attention_cudnn_by_seq.empty() ? AttentionImpl::kFlash : AttentionImpl::kCudnn;
}

std::map<std::string, std::string> StackDefaultsOn(const StackSpec& stack, const HardwareSpec& hw) {
  std::map<std::string, std::string> out = stack.defaults;
  const auto it = out.find("attention");
  if (it != out.end() && it->second == "cudnn") it->second = AttentionName(TransformerEngineAttention(hw));
  return out;
}

std::vector<std::string> StackFrameworkDefaults(const StackSpec& stack, const Layout& l,
                                                const std::vector<std::string>& given, std::vector<std::string>* why) {
  std::vector<std::string> out;
  std::vector<std::string> taken = given;
  for (const StackDefaultRule& d : stack.framework_defaults) {
    bool applies = true;
    for (const StackTerm& t : d.when) applies = applies && Holds(t, l);
    if (!applies) continue;
    bool used = false;
    for (const auto& [key, value] : d.set) {
      if (std::find(taken.begin(), taken.end(), key) != taken.end()) continue;
      taken.push_back(key);
      out.push_back(key + "=" + value);
      used = true;
    }
    if (used) why->push_back(d.why);
  }
  return out;
}

bool StackEmits(const StackSpec& stack, const std::string& format) {
  for (const std::string& f : Split(stack.emit, ',')) {
    if (!stack.emit.empty() && f == format) return true;
  }
  return false;
}

StackRefusing StackRefusingTerm(const StackSpec& stack, const Layout& l) {
  for (const StackRule& rule : stack.rules) {
    bool applies = true;
    for (const StackTerm& t : rule.when) applies = applies && Holds(t, l);
    if (!applies) continue;
    for (const StackTerm& t : rule.refuse) {
      if (Holds(t, l)) return {&rule, &t};
    }
  }
  return {};
}

std::optional<std::string> StackRefusal(const StackSpec& stack, const Layout& l) {
  const StackRefusing r = StackRefusingTerm(stack, l);
  if (!r.rule) return std::nullopt;
  std::string what = r.term->text;
  for (size_t i = 0; i < r.rule->when.size(); ++i) what += (i == 0 ? " with " : " and ") + r.rule->when[i].text;
  return "stack '" + stack.name + "' cannot run " + what + ": " + r.rule->why;
}

bool StackRuleMentions(const StackRule& rule, std::string_view key) {
  for (const auto* terms : {&rule.when, &rule.refuse}) {
    for (const StackTerm& t : *terms) {
      if (t.key == key) return true;
    }
  }
  return false;
}

}  // namespace shardsim
