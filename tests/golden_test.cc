// Golden whole runs (issue 13's item 7): every case of tests/golden/cases.tsv is run through the
// shardsim binary with --json and compared with its recorded output, tests/golden/<case>.json:
// the same keys and lists, the same strings, every number within 1e-9 relative. A change that
// moves a prediction fails here until scripts/regen-golden.sh rewrites the files, so the commit
// shows the diff.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/run_shardsim.h"

namespace shardsim {
namespace {

const std::string kGolden = std::string(SHARDSIM_SOURCE_DIR) + "/tests/golden/";

struct Case {
  std::string name, args;
};

std::vector<Case> Cases() {
  std::vector<Case> out;
  std::ifstream in(kGolden + "cases.tsv");
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t tab = line.find('\t');
    if (tab == std::string::npos) continue;
    out.push_back({line.substr(0, tab), line.substr(tab + 1)});
  }
  return out;
}

bool AsNumber(const YAML::Node& n, double* v) {
  if (!n.IsScalar()) return false;
  const std::string s = n.Scalar();
  if (s == "true" || s == "false" || s.empty()) return false;
  char* end = nullptr;
  *v = std::strtod(s.c_str(), &end);
  return end != nullptr && *end == '\0';
}

// Appends to `diffs` every place where `got` differs from `want` (at most 20).
void Compare(const YAML::Node& want, const YAML::Node& got, const std::string& path,
             std::vector<std::string>* diffs) {
  if (diffs->size() >= 20) return;
  if (want.Type() != got.Type()) {
    diffs->push_back(path + ": a different kind of value");
    return;
  }
  if (want.IsMap()) {
    for (const auto& kv : want) {
      const std::string key = kv.first.as<std::string>();
      if (!got[key]) {
        diffs->push_back(path + "." + key + ": missing");
        continue;
      }
      Compare(kv.second, got[key], path + "." + key, diffs);
    }
    for (const auto& kv : got) {
      if (!want[kv.first.as<std::string>()]) diffs->push_back(path + "." + kv.first.as<std::string>() + ": new key");
    }
  } else if (want.IsSequence()) {
    if (want.size() != got.size()) {
      diffs->push_back(path + ": " + std::to_string(got.size()) + " items, recorded " + std::to_string(want.size()));
      return;
    }
    for (size_t i = 0; i < want.size(); ++i) Compare(want[i], got[i], path + "[" + std::to_string(i) + "]", diffs);
  } else if (want.IsScalar()) {
    double a = 0, b = 0;
    if (AsNumber(want, &a) && AsNumber(got, &b)) {
      // 1e-9 relative; values that should be zero (a difference of ~0) may carry rounding.
      if (std::fabs(a - b) > 1e-9 * std::max(std::fabs(a), std::fabs(b)) + 1e-15) {
        std::ostringstream msg;
        msg.precision(17);
        msg << path << ": " << b << ", recorded " << a << " (" << (b - a) / (a == 0 ? 1 : std::fabs(a)) << " relative)";
        diffs->push_back(msg.str());
      }
    } else if (want.Scalar() != got.Scalar()) {
      diffs->push_back(path + ": '" + got.Scalar() + "', recorded '" + want.Scalar() + "'");
    }
  }
}

TEST(Golden, EveryCaseReproducesItsRecordedOutput) {
  const std::vector<Case> cases = Cases();
  ASSERT_GE(cases.size(), 20u) << "tests/golden/cases.tsv";
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name + ": shardsim " + c.args);
    const testing::CommandResult r = testing::RunShardsim(c.args + " --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string recorded = testing::ReadWholeFile(kGolden + c.name + ".json");
    ASSERT_FALSE(recorded.empty()) << "no tests/golden/" << c.name << ".json: run scripts/regen-golden.sh";
    std::vector<std::string> diffs;
    Compare(YAML::Load(recorded), YAML::Load(r.out), "", &diffs);
    std::string all;
    for (const std::string& d : diffs) all += "\n  " + d;
    EXPECT_TRUE(diffs.empty()) << "differs from tests/golden/" << c.name
                               << ".json (if the change is meant, run scripts/regen-golden.sh and "
                                  "say why in the commit):"
                               << all;
  }
}

}  // namespace
}  // namespace shardsim
