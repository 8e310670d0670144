// The Chrome trace-event file of `shardsim simulate --trace`: valid JSON, one process per
// simulated rank and one thread per stream, complete events with layer and micro-batch,
// the activation-memory counter, and an end that matches the reported iteration time.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "src/sim/program.h"
#include "tests/contains.h"
#include "tests/json_syntax.h"
#include "tests/run_shardsim.h"

namespace shardsim {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::Contains;
using testing::IsStrictJson;
using testing::ReadWholeFile;
using testing::RunShardsim;

// GPT 1.7B (24 layers) on 16 GPUs as tp 2 x pp 2 -> dp 4; gbs 16 / (dp 4 x mbs 1) = 4
// micro-batches per replica under 1F1B. Symmetric mode simulates one rank per stage.
const char kRun[] =
    "simulate --model gpt-1.7b --hardware dgx-a100-80gb --gpus 16 "
    "--layout tp=2,pp=2,mbs=1,gbs=16 --json";

TEST(JsonSyntax, AcceptsJsonAndRejectsWhatOnlyYamlAllows) {
  EXPECT_TRUE(IsStrictJson(R"({"a": [1, -2.5e3, 0.25, true, false, null, "x\n\u00e9"], "b": {}})"));
  EXPECT_TRUE(IsStrictJson(" [] \n"));
  for (const char* bad : {"", "{a: 1}", "[1,]", "{\"a\": inf}", "{\"a\": nan}", "[01]", "[1.]",
                          "{\"a\" 1}", "[\"\\x\"]", "[1] [2]", "[\"open"}) {
    EXPECT_FALSE(IsStrictJson(bad)) << bad;
  }
}

class TraceFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::FreshTempDir("trace");
    const fs::path trace = dir_ / "trace.json";
    const CommandResult r = RunShardsim(std::string(kRun) + " --trace '" + trace.string() + "'");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    ASSERT_TRUE(IsStrictJson(r.out));
    report_ = YAML::Load(r.out);
    text_ = ReadWholeFile(trace);
    ASSERT_TRUE(IsStrictJson(text_));
    trace_ = YAML::Load(text_);  // JSON is YAML 1.2
    ASSERT_TRUE(trace_["traceEvents"].IsSequence());
    for (const YAML::Node& r : report_["ranks"]) ranks_.push_back(r["rank"].as<int64_t>());
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Events of one phase ("M", "X", "C").
  std::vector<YAML::Node> Events(const std::string& ph) const {
    std::vector<YAML::Node> out;
    for (const YAML::Node& e : trace_["traceEvents"]) {
      if (e["ph"].as<std::string>() == ph) out.push_back(e);
    }
    return out;
  }

  fs::path dir_;
  std::string text_;
  YAML::Node report_, trace_;
  std::vector<int64_t> ranks_;  // the simulated ranks, from the JSON report
};

TEST_F(TraceFile, SimulatesOneRankPerStage) {
  // Ranks are numbered TP innermost, then CP, DP, PP (src/layout/placement.h):
  // rank = tp + 2 (cp + 1 (dp + 4 pp)), so the tp = cp = dp = 0 rank of stage pp is 8 pp.
  EXPECT_EQ(report_["mode"].as<std::string>(), "symmetric");
  EXPECT_EQ(ranks_, (std::vector<int64_t>{0, 8}));
}

TEST_F(TraceFile, NamesAProcessPerRankAndAThreadPerStream) {
  std::map<int64_t, std::string> process;
  std::map<int64_t, std::set<std::string>> threads;
  for (const YAML::Node& e : Events("M")) {
    const int64_t pid = e["pid"].as<int64_t>();
    const std::string what = e["name"].as<std::string>();
    if (what == "process_name") process[pid] = e["args"]["name"].as<std::string>();
    if (what == "thread_name") threads[pid].insert(e["args"]["name"].as<std::string>());
  }
  EXPECT_EQ(process.size(), ranks_.size());
  for (int64_t rank : ranks_) {
    ASSERT_TRUE(process.count(rank)) << "no process_name for rank " << rank;
    EXPECT_TRUE(Contains(process[rank], "rank " + std::to_string(rank)));
    for (int s = 0; s < kStreamCount; ++s) {
      const std::string stream = StreamName(static_cast<Stream>(s));
      EXPECT_TRUE(threads[rank].count(stream)) << "rank " << rank << " has no thread " << stream;
    }
  }
}

TEST_F(TraceFile, CompleteEventsCarryLayerAndMicrobatchAndEndAtTheIterationTime) {
  const std::vector<YAML::Node> spans = Events("X");
  ASSERT_FALSE(spans.empty());
  const std::set<int64_t> simulated(ranks_.begin(), ranks_.end());
  bool layer_task = false;
  double end_us = 0;
  // Per (rank, stream): the intervals, which must not overlap (a stream runs one task at once).
  std::map<std::pair<int64_t, int64_t>, std::vector<std::pair<double, double>>> lanes;
  for (const YAML::Node& e : spans) {
    const double ts = e["ts"].as<double>(), dur = e["dur"].as<double>();
    EXPECT_GE(ts, 0) << e["name"].as<std::string>();
    EXPECT_GE(dur, 0) << e["name"].as<std::string>();
    ASSERT_TRUE(e["args"]["layer"].IsDefined() && e["args"]["microbatch"].IsDefined());
    const int64_t pid = e["pid"].as<int64_t>(), tid = e["tid"].as<int64_t>();
    EXPECT_TRUE(simulated.count(pid)) << "event on rank " << pid << ", not simulated";
    EXPECT_TRUE(tid >= 0 && tid < kStreamCount) << tid;
    layer_task = layer_task || (e["args"]["layer"].as<int64_t>() >= 0 &&
                                e["args"]["microbatch"].as<int64_t>() >= 0);
    end_us = std::max(end_us, ts + dur);
    lanes[{pid, tid}].emplace_back(ts, ts + dur);
  }
  EXPECT_TRUE(layer_task) << "no task of a layer and micro-batch";
  // The iteration ends when the last task does: ts and dur are picoseconds / 1e6 printed with
  // 17 significant digits, so they agree to far better than the 1 us allowed here.
  EXPECT_NEAR(end_us, report_["iteration_time_s"].as<double>() * 1e6, 1.0);
  for (auto& [lane, intervals] : lanes) {
    std::sort(intervals.begin(), intervals.end());
    for (size_t i = 1; i < intervals.size(); ++i) {
      EXPECT_GE(intervals[i].first, intervals[i - 1].second - 1e-6)
          << "rank " << lane.first << " stream " << lane.second << " runs two tasks at once";
    }
  }
}

TEST_F(TraceFile, ActivationMemoryCounterPerRank) {
  // 1F1B keeps pp - stage micro-batches in flight (Narayanan et al. 2021): stage 0 holds 2
  // micro-batches' activations at its peak, stage 1 one; both stages have 12 equal layers, so
  // stage 0's peak is exactly twice stage 1's. Every activation is freed by its backward, so
  // each rank's last sample is 0.
  std::map<int64_t, std::vector<std::pair<double, double>>> samples;  // rank -> (ts, bytes)
  for (const YAML::Node& e : Events("C")) {
    EXPECT_EQ(e["name"].as<std::string>(), "activation memory");
    const double bytes = e["args"]["bytes"].as<double>();
    EXPECT_GE(bytes, 0);
    samples[e["pid"].as<int64_t>()].emplace_back(e["ts"].as<double>(), bytes);
  }
  ASSERT_EQ(ranks_.size(), 2u);
  std::vector<double> peak;
  for (int64_t rank : ranks_) {
    std::vector<std::pair<double, double>>& s = samples[rank];
    ASSERT_FALSE(s.empty()) << "no activation memory counter for rank " << rank;
    std::stable_sort(s.begin(), s.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    EXPECT_EQ(s.back().second, 0) << "rank " << rank << " ends the iteration holding activations";
    double p = 0;
    for (const auto& [ts, bytes] : s) p = std::max(p, bytes);
    peak.push_back(p);
  }
  EXPECT_GT(peak[1], 0);
  EXPECT_DOUBLE_EQ(peak[0], 2 * peak[1]);
  // The report's per-rank peak is the counter's.
  for (size_t i = 0; i < ranks_.size(); ++i) {
    EXPECT_DOUBLE_EQ(report_["ranks"][i]["peak_activations_bytes"].as<double>(), peak[i]);
  }
}

TEST(Trace, IntoAMissingDirectoryFailsAndWritesNothing) {
  const fs::path dir = testing::FreshTempDir("trace-missing");
  const fs::path missing = dir / "no-such-dir";
  const fs::path trace = missing / "trace.json";
  const CommandResult r = RunShardsim(std::string(kRun) + " --trace '" + trace.string() + "'");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(Contains(r.err, trace.string()));
  EXPECT_FALSE(fs::exists(trace));
  EXPECT_FALSE(fs::exists(missing));
  EXPECT_TRUE(fs::is_empty(dir)) << "a stray temporary file was left";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace shardsim
