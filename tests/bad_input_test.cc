// Bad-input corpus (tests/data/bad/, format in its README.md): every broken model or hardware
// file is rejected with the expected message at the expected file:line:col, by the loaders
// and by the `shardsim` binary (exit 1, "error:" on stderr, no crash).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "src/hardware/hardware_spec.h"
#include "src/model/model_spec.h"
#include "tests/contains.h"
#include "tests/run_shardsim.h"

namespace shardsim {
namespace {

namespace fs = std::filesystem;
using testing::Contains;
using testing::RunShardsim;

const std::string kCorpus = std::string(SHARDSIM_SOURCE_DIR) + "/tests/data/bad";

struct BadCase {
  std::string path;
  bool is_model = false;
  std::string expect;     // substring of the message
  std::string at;         // "line:col", or "" when the case documents why there is none
  std::string why_no_at;  // the documented reason when `at` is ""
};

// Reads the "# expect:" and "# at:" header of one corpus file; a malformed header fails.
BadCase ReadCase(const fs::path& path) {
  BadCase c;
  c.path = path.string();
  const std::string name = path.filename().string();
  c.is_model = name.rfind("model-", 0) == 0;
  EXPECT_TRUE(c.is_model || name.rfind("hardware-", 0) == 0)
      << name << ": corpus files are named model-*.yaml or hardware-*.yaml";
  std::ifstream in(path);
  std::string expect_line, at_line;
  std::getline(in, expect_line);
  std::getline(in, at_line);
  const std::string kExpect = "# expect: ", kAt = "# at: ", kNone = "none: ";
  EXPECT_EQ(expect_line.rfind(kExpect, 0), 0u) << name << ": first line must be '# expect: ...'";
  EXPECT_EQ(at_line.rfind(kAt, 0), 0u) << name << ": second line must be '# at: ...'";
  if (expect_line.rfind(kExpect, 0) == 0) c.expect = expect_line.substr(kExpect.size());
  EXPECT_FALSE(c.expect.empty()) << name;
  if (at_line.rfind(kAt, 0) == 0) {
    const std::string at = at_line.substr(kAt.size());
    if (at.rfind(kNone, 0) == 0) {
      c.why_no_at = at.substr(kNone.size());
      EXPECT_FALSE(c.why_no_at.empty()) << name << ": say why there is no location";
    } else {
      c.at = at;
    }
  }
  return c;
}

std::vector<BadCase> Corpus() {
  std::vector<fs::path> paths;
  for (const auto& e : fs::directory_iterator(kCorpus)) {
    if (e.path().filename() != "README.md") paths.push_back(e.path());
  }
  std::sort(paths.begin(), paths.end());
  std::vector<BadCase> cases;
  for (const fs::path& p : paths) cases.push_back(ReadCase(p));
  return cases;
}

Status Load(const BadCase& c) {
  if (c.is_model) {
    StatusOr<ModelSpec> m = LoadModel(c.path);
    return m.ok() ? Status::Ok() : m.status();
  }
  StatusOr<HardwareSpec> hw = LoadHardware(c.path);
  return hw.ok() ? Status::Ok() : hw.status();
}

TEST(BadInput, CorpusCoversEveryKindOfMistake) {
  // The brief's list: truncated, garbled, empty, top-level list, wrong types, typo'd keys,
  // missing, duplicate, wrong unit, zero/negative, unknown choice, nested unknown key,
  // nodes > 1 without network. 39 files today, both kinds present.
  const std::vector<BadCase> cases = Corpus();
  EXPECT_GE(cases.size(), 39u);
  const auto models = std::count_if(cases.begin(), cases.end(), [](auto& c) { return c.is_model; });
  EXPECT_GT(models, 0);
  EXPECT_LT(static_cast<size_t>(models), cases.size());
}

TEST(BadInput, EveryFileIsRejectedWithItsMessageAndLocation) {
  for (const BadCase& c : Corpus()) {
    SCOPED_TRACE(c.path);
    const Status st = Load(c);
    ASSERT_FALSE(st.ok()) << "loaded without error";
    const std::string& msg = st.message();
    EXPECT_TRUE(Contains(msg, c.expect));
    // Every message starts with the file, as given.
    EXPECT_EQ(msg.rfind(c.path + ":", 0), 0u) << msg;
    if (!c.at.empty()) {
      const std::string prefix = c.path + ":" + c.at + ": ";
      EXPECT_EQ(msg.rfind(prefix, 0), 0u) << "expected the prefix " << prefix << "\n" << msg;
    } else {
      // The documented exceptions really have no location (else the header is stale).
      EXPECT_EQ(msg.rfind(c.path + ": ", 0), 0u) << msg;
    }
  }
}

TEST(BadInput, TheBinaryRejectsEachFileWithExitCodeOne) {
  for (const BadCase& c : Corpus()) {
    SCOPED_TRACE(c.path);
    const std::string flag = c.is_model ? "--model" : "--hardware";
    const testing::CommandResult r = RunShardsim("estimate " + flag + " '" + c.path + "'");
    // 1 = bad input (src/cli/main.cc); a crash would show as a signal or 128 + signal.
    EXPECT_TRUE(r.exited);
    EXPECT_LT(r.exit_code, 128);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_TRUE(Contains(r.err, "error:"));
    EXPECT_TRUE(Contains(r.err, c.expect));
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

TEST(BadInput, MissingFileAndUnknownName) {
  StatusOr<ModelSpec> m = LoadModel(kCorpus + "/no-such-file.yaml");
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(Contains(m.status().message(), "no such file"));
  const testing::CommandResult r = RunShardsim("describe --hardware dgx-a100-80g");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(Contains(r.err, "did you mean 'dgx-a100-80gb'"));
}

}  // namespace
}  // namespace shardsim
