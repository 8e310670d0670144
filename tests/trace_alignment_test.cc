// Issue 18, item 5: the measured trace (`run --trace`) and the simulated one (`simulate
// --trace`) name the same work alike and at the same granularity, so Perfetto shows them side
// by side. For each layout, rank 0 of a 2-rank CPU run (`--emulate-rank 0`: its shards and
// schedule, collectives replaced by copies) against rank 0 of the symmetric simulation of the
// same layout on the same cluster: every (thread, name) the simulation has, the measurement
// has too, about the same (layer, micro-batch) pairs (one "attention forward" per layer and
// micro-batch, one "zero-3 parameter all-gather" per layer and pass, ...). A measured part may
// come in more than one slice (a blocking collective inside it splits it; the simulator prices
// the part as one task), so slices are compared by the pairs they cover, not counted. What
// the measurement has beyond the simulation is named for what it is and is listed here: the
// global gradient norm's all-reduce and MoE routing metadata, a few bytes each, which the
// simulator does not price.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <map>
#include <set>
#include <string>
#include <utility>

#include "tests/run_shardsim.h"

namespace shardsim {
namespace {

using testing::FreshTempDir;
using testing::RunShardsim;

// (thread, name) -> the (layer, micro-batch) pairs of rank 0's spans.
using Spans = std::map<std::pair<int, std::string>, std::set<std::pair<int, int>>>;

Spans Rank0Spans(const std::string& path) {
  const YAML::Node trace = YAML::LoadFile(path);
  Spans out;
  for (const YAML::Node& e : trace["traceEvents"]) {
    if (e["ph"].as<std::string>() != "X" || e["pid"].as<int>() != 0) continue;
    const YAML::Node args = e["args"];
    out[{e["tid"].as<int>(), e["name"].as<std::string>()}].insert(
        {args["layer"].as<int>(), args["microbatch"].as<int>()});
  }
  return out;
}

void ExpectAligned(const std::string& model, const std::string& layout) {
  SCOPED_TRACE(model + " " + layout);
  const std::string dir = FreshTempDir("trace-alignment").string();
  const std::string common = " --model " + model + " --hardware cpu-host --gpus 2 --layout " + layout;
  const auto run = RunShardsim("run" + common + " --emulate-rank 0 --steps 1 --trace " + dir + "/measured.json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto sim = RunShardsim("simulate" + common + " --trace " + dir + "/simulated.json");
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  const Spans measured = Rank0Spans(dir + "/measured.json"), simulated = Rank0Spans(dir + "/simulated.json");
  ASSERT_FALSE(simulated.empty());
  for (const auto& [key, pairs] : simulated) {
    SCOPED_TRACE("thread " + std::to_string(key.first) + ", " + key.second);
    const auto it = measured.find(key);
    ASSERT_NE(it, measured.end()) << "measured trace has no such span";
    EXPECT_EQ(it->second, pairs);
  }
  const std::set<std::string> unpriced = {"gradient norm all-reduce", "ep routing exchange"};
  for (const auto& [key, pairs] : measured) {
    if (!simulated.count(key)) {
      EXPECT_TRUE(unpriced.count(key.second)) << "measured only: " << key.second;
    }
  }
}

TEST(TraceAlignment, TensorParallelWithSequenceParallelism) { ExpectAligned("tiny", "tp=2,sp=on,mbs=1,gbs=2"); }
TEST(TraceAlignment, InterleavedPipeline) {
  ExpectAligned("tiny", "pp=2,vpp=2,schedule=interleaved,mbs=1,gbs=4");
}
TEST(TraceAlignment, ZeroBubblePipeline) { ExpectAligned("tiny", "pp=2,schedule=zero-bubble,mbs=1,gbs=4"); }
TEST(TraceAlignment, ContextParallel) { ExpectAligned("tiny", "cp=2,mbs=1,gbs=2"); }
TEST(TraceAlignment, ZeroStages) {
  ExpectAligned("tiny", "dp=2,zero=1,mbs=1,gbs=4");
  ExpectAligned("tiny", "dp=2,zero=2,mbs=1,gbs=4,overlap_dp=off");
  ExpectAligned("tiny", "dp=2,zero=3,mbs=1,gbs=4");
}
TEST(TraceAlignment, Recompute) {
  ExpectAligned("tiny", "dp=2,recompute=full,mbs=1,gbs=2");
  ExpectAligned("tiny", "dp=2,recompute=selective,attention=unfused,mbs=1,gbs=2");
}
TEST(TraceAlignment, ExpertParallel) { ExpectAligned("tiny-moe", "ep=2,mbs=1,gbs=2"); }

}  // namespace
}  // namespace shardsim
