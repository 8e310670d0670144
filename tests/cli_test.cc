// Smoke tests of the `shardsim` binary: help of every subcommand, exit codes, the fixed JSON
// keys of `estimate --json` and `--out`, and every shipped model through `shardsim estimate`.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "src/model/model_spec.h"
#include "tests/contains.h"
#include "tests/run_shardsim.h"

namespace shardsim {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::Contains;
using testing::RunShardsim;

const std::string kSource = SHARDSIM_SOURCE_DIR;

// The subcommands listed under "Commands:" in `shardsim --help`, except "help" itself.
std::vector<std::string> ListedCommands() {
  const CommandResult r = RunShardsim("--help");
  std::istringstream in(r.out);
  std::vector<std::string> names;
  bool in_list = false;
  for (std::string line; std::getline(in, line);) {
    if (line == "Commands:") {
      in_list = true;
    } else if (in_list && line.empty()) {
      break;
    } else if (in_list) {
      std::istringstream words(line);
      std::string name;
      words >> name;
      if (name != "help") names.push_back(name);
    }
  }
  return names;
}

// JSON is YAML 1.2, so yaml-cpp reads it; a parse error fails the test.
YAML::Node ParseJson(const std::string& text) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    ADD_FAILURE() << "not valid JSON: " << e.what() << "\n" << text;
    return YAML::Node();
  }
}

TEST(Cli, TopLevelHelp) {
  for (const char* arg : {"--help", "help", "-h"}) {
    const CommandResult r = RunShardsim(arg);
    EXPECT_EQ(r.exit_code, 0) << arg;
    EXPECT_TRUE(Contains(r.out, "Usage: shardsim <command> [flags]"));
  }
  // No command at all is a command-line error (2), with the usage to help.
  const CommandResult none = RunShardsim("");
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_TRUE(Contains(none.out, "Usage: shardsim"));
}

TEST(Cli, EverySubcommandHasHelpWithTheSharedFlags) {
  const std::vector<std::string> commands = ListedCommands();
  // New commands join this test through the help text.
  EXPECT_GE(commands.size(), 2u);
  EXPECT_NE(std::find(commands.begin(), commands.end(), "estimate"), commands.end());
  EXPECT_NE(std::find(commands.begin(), commands.end(), "describe"), commands.end());
  for (const std::string& c : commands) {
    SCOPED_TRACE(c);
    const CommandResult r = RunShardsim(c + " --help");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(Contains(r.out, "Usage: shardsim " + c));
    // calibrate measures this machine (a base description, no model or layout); compare
    // reads two result files.
    if (c == "calibrate") {
      EXPECT_TRUE(Contains(r.out, "--hardware"));
      continue;
    }
    if (c == "compare") {
      EXPECT_TRUE(Contains(r.out, "--sim") && Contains(r.out, "--run"));
      continue;
    }
    for (const char* flag : {"--model", "--hardware", "--gpus"}) {
      EXPECT_TRUE(Contains(r.out, flag));
    }
    // Every command but plan (which searches layouts) and memory (which needs none) takes one.
    if (c != "plan" && c != "memory") {
      EXPECT_TRUE(Contains(r.out, "--layout"));
    }
  }
}

TEST(Cli, UnknownCommandAndFlagAreCommandLineErrors) {
  CommandResult r = RunShardsim("estimat");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(Contains(r.err, "unknown command 'estimat'"));
  EXPECT_TRUE(Contains(r.err, "did you mean 'estimate'"));
  r = RunShardsim("frobnicate");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_FALSE(Contains(r.err, "did you mean"));
  r = RunShardsim("estimate --modle gpt3-175b");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(Contains(r.err, "did you mean '--model'"));
  r = RunShardsim("estimate --model");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(Contains(r.err, "needs a value"));
  r = RunShardsim("describe stray");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(Contains(r.err, "unexpected argument 'stray'"));
}

TEST(Cli, BadValuesAreInputErrors) {
  // Exit 1 (bad input), the message on stderr after "error:", nothing on stdout.
  struct Case {
    std::string args, message;
  };
  const Case cases[] = {
      {"estimate --gpus 0", "--gpus must be at least 1"},
      {"estimate --layout tpp=8", "did you mean 'tp'"},
      {"estimate --layout tp=5", "tp=5 does not divide heads=96"},
      {"estimate --model no-such-model", "no bundled models description of that name"},
      {"describe --layout gbs=1537,tp=8,pp=8", "gbs=1537 is not divisible by dp x mbs"},
      {"simulate --layout tp=8,pp=7", "layers=96 is not divisible by pp x vpp"},
      {"simulate --model tiny --hardware cpu-host --gpus 3", "but 3 GPUs"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    const CommandResult r = RunShardsim(c.args);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_TRUE(Contains(r.err, "error: "));
    EXPECT_TRUE(Contains(r.err, c.message));
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

TEST(Cli, EstimateJsonHasTheFixedKeys) {
  const CommandResult r = RunShardsim("estimate --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const YAML::Node j = ParseJson(r.out);
  ASSERT_TRUE(j.IsMap());
  for (const char* key : {"model", "hardware", "gpus", "layout", "parameters", "peak_memory_bytes",
                          "memory_breakdown", "fits", "estimated_iteration_time_s",
                          "time_breakdown", "ops", "collectives", "warnings"}) {
    EXPECT_TRUE(j[key].IsDefined()) << "missing key " << key;
  }
  // Defaults: GPT-3 175B (174,604,259,328 parameters, see model_loader_test) on all 1024
  // GPUs of dgx-a100-80gb, tp 8 x pp 8 -> dp 16.
  EXPECT_EQ(j["model"].as<std::string>(), "gpt3-175b");
  EXPECT_EQ(j["gpus"].as<int64_t>(), 1024);
  EXPECT_EQ(j["parameters"].as<int64_t>(), 174604259328);
  EXPECT_EQ(
      j["layout"].as<std::string>().rfind("tp=8,pp=8,dp=16,cp=1,ep=1,vpp=2,mbs=1,gbs=1536,", 0), 0u)
      << j["layout"].as<std::string>();
  // The memory breakdown has its five parts and adds up to the peak.
  const YAML::Node mem = j["memory_breakdown"];
  ASSERT_TRUE(mem.IsMap());
  double sum = 0;
  for (const char* part : {"weights", "gradients", "optimizer", "activations", "other"}) {
    ASSERT_TRUE(mem[part].IsDefined()) << part;
    EXPECT_GE(mem[part].as<double>(), 0) << part;
    sum += mem[part].as<double>();
  }
  EXPECT_DOUBLE_EQ(sum, j["peak_memory_bytes"].as<double>());
  // The time breakdown adds up to the iteration time (STYLE.md habit 8).
  double time_sum = 0;
  for (const auto& kv : j["time_breakdown"]) time_sum += kv.second.as<double>();
  const double total = j["estimated_iteration_time_s"].as<double>();
  EXPECT_GT(total, 0);
  EXPECT_NEAR(time_sum, total, 1e-9 * total);
}

TEST(Cli, OutWritesTheSameJsonAndRunsAreDeterministic) {
  const fs::path dir = testing::FreshTempDir("cli-out");
  const fs::path file = dir / "estimate.json";
  const CommandResult json = RunShardsim("estimate --json --out '" + file.string() + "'");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_EQ(testing::ReadWholeFile(file), json.out);
  // Text on stdout, JSON in the file: the same JSON as the first run, byte for byte.
  fs::remove(file);
  const CommandResult text = RunShardsim("estimate --out '" + file.string() + "'");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_TRUE(Contains(text.out, "estimated iteration time:"));
  EXPECT_EQ(testing::ReadWholeFile(file), json.out);
  // No temporary file is left beside the output.
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++entries;
  EXPECT_EQ(entries, 1);
  // An unwritable destination is an input error and prints nothing.
  const CommandResult bad =
      RunShardsim("estimate --json --out '" + (dir / "no" / "x.json").string() + "'");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_TRUE(Contains(bad.err, "cannot write"));
  EXPECT_TRUE(bad.out.empty());
  fs::remove_all(dir);
}

TEST(Cli, LayoutFromAYamlFile) {
  const fs::path dir = testing::FreshTempDir("cli-layout");
  const fs::path good = dir / "layout.yaml", bad = dir / "bad.yaml";
  {
    std::ofstream(good)
        << "tp: 8\npp: 8\nvpp: 2\nmbs: 1\ngbs: 1536\nsp: on\nrecompute: selective\n";
    std::ofstream(bad) << "tp: 8\npp: 8\ntpp: 2\n";
  }
  // The same layout as the default spec, so the same JSON.
  const CommandResult from_file = RunShardsim("estimate --json --layout '" + good.string() + "'");
  ASSERT_EQ(from_file.exit_code, 0) << from_file.err;
  EXPECT_EQ(from_file.out, RunShardsim("estimate --json").out);
  // An unknown key is located: line 3, column 1.
  const CommandResult r = RunShardsim("estimate --layout '" + bad.string() + "'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, bad.string() + ":3:1: "));
  EXPECT_TRUE(Contains(r.err, "did you mean 'tp'"));
  fs::remove_all(dir);
}

TEST(Cli, DescribeTheDefaults) {
  const CommandResult r = RunShardsim("describe");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "parameters: 174604259328 total"));
  // Cluster graph counts derived in hardware_loader_test (DgxA100VertexAndLinkCounts).
  EXPECT_TRUE(Contains(r.out, "1024 GPUs, 128 intra-node switches, 128 hosts, 1024 NICs"));
  EXPECT_TRUE(Contains(r.out, "rank 0's tp group: [0, 1, 2, 3, 4, 5, 6, 7]"));
}

// An MoE layout's experts' groups, folded over a stage's tp x cp x dp ranks: Mixtral on 64 GPUs,
// tp 2, pp 2 (32 ranks a stage), dp 16, ep 8 with the experts whole (etp 1). Rank 0's EP group
// is ranks 0..7 (EP index = rank mod 8, so it spans TP peers), its experts' TP group itself,
// and the ranks with its experts (EP index 0): 0, 8, 16, 24 of stage 0 (expert DP 32 / 8 = 4).
TEST(Cli, DescribeShowsTheExpertGroups) {
  auto describe = [](const std::string& layout) {
    return RunShardsim("describe --model mixtral-8x7b --hardware dgx-h100 --gpus 64 --layout " + layout);
  };
  const CommandResult r = describe("tp=2,pp=2,ep=8,etp=1,sp=on,mbs=1,gbs=64");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "rank 0's ep group: [0, 1, 2, 3, 4, 5, 6, 7]")) << r.out;
  EXPECT_TRUE(Contains(r.out, "rank 0's etp group: [0]")) << r.out;
  EXPECT_TRUE(Contains(r.out, "rank 0's edp group: [0, 8, 16, 24]")) << r.out;
  // Without etp the experts split over TP (the etp group is TP's, not shown) and EP strides by
  // tp: 0, 2, ..., 14; expert DP 32 / (2 x 8) = 2: ranks 0 and 16.
  const CommandResult d = describe("tp=2,pp=2,ep=8,sp=on,mbs=1,gbs=64");
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_TRUE(Contains(d.out, "rank 0's ep group: [0, 2, 4, 6, 8, 10, 12, 14]")) << d.out;
  EXPECT_FALSE(Contains(d.out, "etp group")) << d.out;
  EXPECT_TRUE(Contains(d.out, "rank 0's edp group: [0, 16]")) << d.out;
}

// A layout per shipped model that is valid and fits in memory. Small models on a few GPUs,
// Megatron's sizes on up to 1024 A100s with tp 8 and pp dividing the layers, Mixtral with EP.
const std::map<std::string, std::string> kModelRuns = {
    {"tiny", "--hardware cpu-host --gpus 1 --layout mbs=1,dtype=fp32"},
    {"tiny-moe", "--hardware cpu-host --gpus 2 --layout ep=2,mbs=1,gbs=4,dtype=fp32"},
    {"small-17m", "--hardware cpu-host --gpus 2 --layout dp=2,mbs=4,gbs=8,dtype=fp32"},
    {"gpt-1.7b", "--gpus 8 --layout tp=1,mbs=1,gbs=64,zero=1"},
    {"gpt-3.6b", "--gpus 8 --layout tp=2,mbs=1,gbs=64,zero=1"},
    {"gpt-7.5b", "--gpus 16 --layout tp=4,mbs=1,gbs=64,sp=on,zero=1"},
    {"gpt-18b", "--gpus 64 --layout tp=8,pp=2,mbs=1,gbs=128,sp=on,recompute=selective"},
    {"gpt-39b", "--gpus 128 --layout tp=8,pp=2,mbs=1,gbs=256,sp=on,recompute=selective"},
    {"gpt-76b", "--layout tp=8,pp=4,mbs=1,gbs=1792,sp=on,recompute=selective"},
    {"gpt-145b", "--layout tp=8,pp=8,mbs=1,gbs=2048,sp=on,recompute=selective"},
    {"gpt3-175b", ""},  // the defaults
    {"gpt-310b", "--layout tp=8,pp=16,mbs=1,gbs=2048,sp=on,recompute=selective"},
    // 105 layers: pp 15 (7 layers each); 8 x 15 x dp 8 = 960 GPUs.
    {"gpt-530b", "--gpus 960 --layout tp=8,pp=15,mbs=1,gbs=2240,sp=on,recompute=selective,zero=1"},
    {"gpt-1t", "--layout tp=8,pp=64,mbs=1,gbs=2048,sp=on,recompute=full,zero=1"},
    {"llama3-8b", "--gpus 8 --layout tp=2,mbs=1,gbs=64,sp=on,zero=1,recompute=selective"},
    {"llama3-8b-flagperf", "--hardware dgx-h100 --gpus 8 --layout tp=2,mbs=1,gbs=512,sp=on,zero=1"},
    {"llama3.2-1b", "--gpus 8 --layout tp=1,mbs=1,gbs=64,zero=1,recompute=selective"},
    {"llama3-70b", "--layout tp=8,pp=4,mbs=1,gbs=1024,sp=on,recompute=selective"},
    {"llama3-70b-flagperf", "--hardware dgx-h100 --gpus 64 --layout tp=8,pp=4,mbs=1,gbs=512,sp=on,zero=1"},
    // 126 layers: pp 14 (9 layers each); 8 x 14 x dp 9 = 1008 GPUs.
    {"llama3-405b", "--gpus 1008 --layout tp=8,pp=14,mbs=1,gbs=1008,sp=on,recompute=full,zero=1"},
    {"mixtral-8x7b", "--gpus 64 --layout tp=2,pp=4,cp=2,ep=4,mbs=1,gbs=256,sp=on,recompute=full"},
    // The published-runs suite's models (docs/validation/published-runs.yaml).
    {"llama2-7b", "--gpus 8 --layout tp=1,mbs=1,gbs=64,zero=1,recompute=selective"},
    {"llama2-13b", "--gpus 16 --layout tp=2,mbs=1,gbs=64,sp=on,zero=1,recompute=selective"},
    {"llama2-70b", "--gpus 64 --layout tp=8,pp=2,mbs=1,gbs=128,sp=on,zero=1,recompute=selective"},
    {"nemotron4-15b", "--gpus 16 --layout tp=2,mbs=1,gbs=64,sp=on,zero=1,recompute=selective"},
    {"nemotron4-340b", "--gpus 512 --layout tp=8,pp=8,mbs=1,gbs=512,sp=on,zero=1,recompute=full"},
    {"mpt-1b", "--gpus 8 --layout mbs=4,gbs=64,zero=1"},
    {"mpt-3b", "--gpus 8 --layout mbs=4,gbs=64,zero=1"},
    {"mpt-7b", "--gpus 8 --layout mbs=2,gbs=64,zero=3"},
    {"mpt-13b", "--gpus 8 --layout mbs=2,gbs=64,zero=3,recompute=full"},
    {"mpt-30b", "--gpus 64 --layout mbs=2,gbs=256,zero=3,recompute=full"},
    {"mpt-70b", "--gpus 64 --layout mbs=2,gbs=256,zero=3,recompute=full"},
    // Described but left out of the suite (its MoE runtime is not modelled; published-runs.yaml).
    {"qwen1.5-moe-flagperf", "--hardware dgx-a800 --gpus 8 --layout tp=1,pp=2,mbs=1,gbs=512,zero=1,recompute=selective"},
    {"qwen3-30b-a3b", "--hardware dgx-h100 --nodes 2 --gpus 16 --layout tp=1,pp=1,ep=16,mbs=1,gbs=1024,zero=1"},
    // Megatron-Bridge's H100 preset: EP 32 folded over TP 2 x DP 16 with the experts whole (etp 1).
    {"qwen3-235b-a22b", "--hardware dgx-h100 --nodes 32 --gpus 256 --layout tp=2,pp=8,ep=32,etp=1,vpp=4,mbs=1,gbs=2048,"
                        "sp=on,zero=1,dtype=fp8,fp8_params=on,embedding_in_split=on,loss_in_split=on"},
    {"grok1-314b", "--hardware dgx-h100 --nodes 64 --gpus 512 --layout tp=4,pp=8,cp=2,ep=8,vpp=8,mbs=1,gbs=1024,sp=on,zero=1"},
    // DeepSeek-V3 report Sec. 3.2.1 and 4.2: 2048 GPUs, PP 16, EP 64, ZeRO-1 DP, batch 15360;
    // 61 layers: 3 on the first stage, 2 on the last, 4 on each of the 14 between.
    {"deepseek-v3", "--hardware dgx-h100 --nodes 256 --gpus 2048 --layout tp=1,pp=16,ep=64,mbs=1,gbs=15360,zero=1,"
                    "recompute=full,first_stage_layers=3,last_stage_layers=2"},
};

TEST(Cli, EveryShippedModelRunsThroughEstimate) {
  int ran = 0;
  for (const auto& entry : fs::directory_iterator(kSource + "/models")) {
    if (entry.path().extension() != ".yaml") continue;
    const std::string name = entry.path().stem().string();
    SCOPED_TRACE(name);
    auto it = kModelRuns.find(name);
    ASSERT_NE(it, kModelRuns.end()) << "give " << name << " a layout in kModelRuns";
    const CommandResult r = RunShardsim("estimate --json --model " + name + " " + it->second);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const YAML::Node j = ParseJson(r.out);
    ASSERT_TRUE(j.IsMap());
    EXPECT_EQ(j["model"].as<std::string>(), name);
    EXPECT_TRUE(j["fits"].as<bool>()) << "peak " << j["peak_memory_bytes"].as<double>();
    EXPECT_GT(j["estimated_iteration_time_s"].as<double>(), 0);
    StatusOr<ModelSpec> m = LoadModel(name);
    ASSERT_TRUE(m.ok());
    EXPECT_EQ(j["parameters"].as<int64_t>(), m->TotalParams());
    ++ran;
  }
  EXPECT_EQ(ran, static_cast<int>(kModelRuns.size()));
}

// The simulator runs every shipped model too, and lands near the closed form: both price the
// same ops and collectives; they differ in contention, p2p placement and bubble accounting,
// which stay within a quarter of the iteration for these layouts.
TEST(Cli, EveryShippedModelRunsThroughSimulate) {
  int ran = 0;
  for (const auto& [name, flags] : kModelRuns) {
    SCOPED_TRACE(name);
    const CommandResult sim = RunShardsim("simulate --json --model " + name + " " + flags);
    ASSERT_EQ(sim.exit_code, 0) << sim.err;
    const YAML::Node j = ParseJson(sim.out);
    ASSERT_TRUE(j.IsMap());
    EXPECT_TRUE(j["fits"].as<bool>());
    const double simulated = j["iteration_time_s"].as<double>();
    const CommandResult est = RunShardsim("estimate --json --model " + name + " " + flags);
    ASSERT_EQ(est.exit_code, 0) << est.err;
    const double estimated = ParseJson(est.out)["estimated_iteration_time_s"].as<double>();
    EXPECT_NEAR(simulated / estimated, 1.0, 0.25);
    double sum = 0;
    for (const auto& kv : j["time_breakdown"]) sum += kv.second.as<double>();
    EXPECT_NEAR(sum, simulated, 1e-9 * simulated);
    ++ran;
  }
  EXPECT_EQ(ran, static_cast<int>(kModelRuns.size()));
}

// A layout that does not fit is still simulated, flagged, and says by how much. GPT-3 175B
// on 64 GPUs with tp=8, pp=8, dp=1, bf16: 175e9 x 18 bytes (2 + 4 fp32 gradients + 12) / 64
// = 49.2 GB of model states per GPU, plus GPipe's 64 micro-batches of activations: far beyond
// the usable memory of dgx-a100-80gb: 1 GiB reserved + (80 - 1) GiB x (1 - 0.10 fragmentation)
// = 72.1 GiB.
TEST(Cli, SimulateFlagsALayoutThatDoesNotFit) {
  const CommandResult r =
      RunShardsim("simulate --json --gpus 64 --layout tp=8,pp=8,mbs=1,gbs=64,schedule=gpipe");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const YAML::Node j = ParseJson(r.out);
  EXPECT_FALSE(j["fits"].as<bool>());
  const double usable = (1 + 79 * 0.9) * (1 << 30);
  EXPECT_NEAR(j["usable_memory_bytes"].as<double>(), usable, 1.0);
  const double over = j["over_capacity_bytes"].as<double>();
  EXPECT_NEAR(over, j["peak_memory_bytes"].as<double>() - usable, 1.0);
  EXPECT_GT(over, 0);
  const CommandResult text =
      RunShardsim("simulate --gpus 64 --layout tp=8,pp=8,mbs=1,gbs=64,schedule=gpipe");
  EXPECT_TRUE(Contains(text.out, "DOES NOT FIT: over by"));
}

// Issue 4's acceptance case: GPT-3 175B on 1024 A100-80GB, global batch 1536. The winner
// fits, and `simulate --plan` of the written plan reproduces the figures plan predicted.
TEST(Cli, PlanWritesAPlanThatSimulateReproduces) {
  const fs::path dir = fs::path(::testing::TempDir()) / "shardsim_plan_test";
  fs::create_directories(dir);
  const fs::path file = dir / "plan.yaml";
  const CommandResult plan =
      RunShardsim("plan --global-batch 1536 --top 3 --json --out '" + file.string() + "'");
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  const YAML::Node j = ParseJson(plan.out);
  const YAML::Node winner = j["results"][0]["ranked"][0];
  ASSERT_TRUE(winner.IsMap());
  EXPECT_LE(winner["peak_memory_bytes"].as<double>(), 80.0 * (1 << 30));
  EXPECT_GT(j["results"][0]["enumerated"].as<int64_t>(), 1000);
  const CommandResult sim = RunShardsim("simulate --json --plan '" + file.string() + "'");
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  const YAML::Node s = ParseJson(sim.out);
  EXPECT_EQ(s["layout"].as<std::string>(), winner["layout"].as<std::string>());
  EXPECT_DOUBLE_EQ(s["iteration_time_s"].as<double>(), winner["iteration_time_s"].as<double>());
  EXPECT_DOUBLE_EQ(s["peak_memory_bytes"].as<double>(), winner["peak_memory_bytes"].as<double>());
  EXPECT_TRUE(s["fits"].as<bool>());
  // --plan replaces the other inputs; giving both is an error.
  const CommandResult both = RunShardsim("simulate --plan '" + file.string() + "' --gpus 8");
  EXPECT_EQ(both.exit_code, 1);
  EXPECT_TRUE(Contains(both.err, "drop --gpus"));
}

// A hardware description without reserved memory (cpu-host) survives the plan file's round
// trip: the embedded description omits the optional key rather than writing "0 B".
TEST(Cli, PlanFileOfAHostWithoutReservedMemoryLoads) {
  const fs::path dir = fs::path(::testing::TempDir()) / "shardsim_plan_cpu_test";
  fs::create_directories(dir);
  const fs::path file = dir / "plan.yaml";
  const CommandResult plan = RunShardsim("plan --model tiny --hardware cpu-host --gpus 2 "
                                         "--global-batch 8 --top 1 --out '" + file.string() + "'");
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  const CommandResult sim = RunShardsim("simulate --json --plan '" + file.string() + "'");
  EXPECT_EQ(sim.exit_code, 0) << sim.err;
}

// SHARDSIM_DATA_DIR points a binary carried to another machine at that machine's models/ and
// hardware/: a folder without them finds no bundled model; the source tree finds tiny.
TEST(Cli, DataDirLocatesBundledDescriptions) {
  const std::string empty = (fs::path(::testing::TempDir()) / "shardsim_empty_data").string();
  fs::create_directories(empty);
  setenv("SHARDSIM_DATA_DIR", empty.c_str(), 1);
  const CommandResult missing = RunShardsim("describe --model tiny --hardware cpu-host --gpus 1 --layout mbs=1");
  setenv("SHARDSIM_DATA_DIR", kSource.c_str(), 1);
  const CommandResult found = RunShardsim("describe --model tiny --hardware cpu-host --gpus 1 --layout mbs=1");
  unsetenv("SHARDSIM_DATA_DIR");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_TRUE(Contains(missing.err, "no bundled models description")) << missing.err;
  EXPECT_EQ(found.exit_code, 0) << found.err;
  EXPECT_TRUE(Contains(found.out, "parameters: 311872 total"));  // docs/models.md: tiny
}

TEST(Cli, PlanBadInput) {
  struct Case {
    std::string args, message;
  };
  const Case cases[] = {
      {"plan --global-batch 1536 --fix tp=3", "no layout to search"},
      {"plan --global-batch 1536 --gpus 0", "--gpus must be at least 1"},
      {"plan", "--global-batch is required"},
      {"plan --global-batch 1536 --objective speed", "expected throughput, time-to-train or cost"},
      {"plan --global-batch 1536 --objective time-to-train", "need --tokens"},
      {"plan --global-batch 1536 --fix tpp=8", "did you mean 'tp'"},
      {"plan --global-batch 1536 --emit pytorch", "expected megatron, deepspeed, nemo or torchtitan"},
      {"simulate --plan /nonexistent/plan.yaml", "cannot open plan file"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    const CommandResult r = RunShardsim(c.args);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_TRUE(Contains(r.err, c.message)) << r.err;
  }
}

// describe --json: the derived figures as JSON. GPT-3 175B, tp=8 pp=8 on 1024 GPUs: dp = 16,
// rank 0's TP group {0..7}, its DP group strides by tp = 8.
TEST(Cli, DescribeJson) {
  const CommandResult r = RunShardsim("describe --json --layout tp=8,pp=8,mbs=1,gbs=1536");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const YAML::Node j = ParseJson(r.out);
  EXPECT_EQ(j["parameters"].as<int64_t>(), 174604259328);
  EXPECT_EQ(j["rank0_groups"]["tp"].size(), 8u);
  EXPECT_EQ(j["rank0_groups"]["dp"][1].as<int64_t>(), 8);
  EXPECT_EQ(j["microbatches"].as<int64_t>(), 96);
}

TEST(Cli, HuggingFaceConfigRunsThroughEstimate) {
  // Llama 3 8B from its config.json, with the layout used for models/llama3-8b.yaml above.
  const CommandResult r =
      RunShardsim("estimate --json --model '" + kSource + "/tests/data/hf/llama3-8b.json' " +
                  kModelRuns.at("llama3-8b"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ParseJson(r.out)["parameters"].as<int64_t>(), 8030261248);
}

}  // namespace
}  // namespace shardsim

namespace shardsim::testing {
namespace {

// --emit-out writes the configuration alone (a file DeepSpeed can read as it is), also beside
// --json; --emit with --json and nowhere to put it is refused rather than dropped.
TEST(Cli, PlanEmitOutWritesTheConfigAlone) {
  const std::filesystem::path dir = FreshTempDir("emit");
  const std::string file = (dir / "ds.json").string();
  const std::string plan = "plan --model llama3-8b --hardware dgx-h200 --gpus 8 --global-batch 64 --top 1 --stack deepspeed-zero3 ";
  const CommandResult r = RunShardsim(plan + "--emit deepspeed --emit-out '" + file + "' --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string config = ReadWholeFile(file);
  // The DeepSpeed config and nothing else: it opens with its first key, and the batch is the
  // plan's (64 sequences).
  EXPECT_EQ(config.rfind("{\n  \"train_batch_size\": 64,", 0), 0u) << config;
  EXPECT_TRUE(Contains(r.out, "\"results\"")) << "stdout is the plan's JSON report";
  EXPECT_FALSE(Contains(r.out, "train_batch_size"));
  const CommandResult dropped = RunShardsim(plan + "--emit deepspeed --json");
  EXPECT_EQ(dropped.exit_code, 2);
  EXPECT_TRUE(Contains(dropped.err, "--emit with --json: the JSON report has no place for the configuration"));
  const CommandResult alone = RunShardsim(plan + "--emit-out '" + file + "'");
  EXPECT_EQ(alone.exit_code, 2);
  EXPECT_TRUE(Contains(alone.err, "--emit-out FILE needs --emit"));
  std::filesystem::remove_all(dir);
}

// --stack none means no stack in every command, as in plan: estimate and simulate then price the
// layout as given, exactly as without the flag (an unknown stack name stays an error).
TEST(Cli, StackNoneIsNoStackEverywhere) {
  const std::string run = " --model llama3-8b --hardware dgx-h100 --gpus 8 --layout tp=2,sp=on,mbs=1,gbs=64 --json";
  for (const std::string command : {"estimate", "simulate"}) {
    SCOPED_TRACE(command);
    const CommandResult plain = RunShardsim(command + run);
    const CommandResult none = RunShardsim(command + run + " --stack none");
    ASSERT_EQ(plain.exit_code, 0) << plain.err;
    ASSERT_EQ(none.exit_code, 0) << none.err;
    EXPECT_EQ(none.out, plain.out);
  }
  const CommandResult typo = RunShardsim("estimate" + run + " --stack nome");
  EXPECT_EQ(typo.exit_code, 1);  // a bad input file, as an unknown model or hardware name
  EXPECT_TRUE(Contains(typo.err, "'nome'")) << typo.err;
  EXPECT_TRUE(Contains(typo.err, "or none, no stack (did you mean 'none'?)")) << typo.err;
}

// An export only for a plan of a stack that runs it: the default stack is Megatron-Core's, so a
// DeepSpeed config of its winner is refused, with the stacks that would do.
TEST(Cli, PlanEmitNeedsAStackThatRunsIt) {
  const std::string plan = "plan --model llama3-8b --hardware dgx-h200 --gpus 8 --global-batch 64 --top 1 ";
  const CommandResult ds = RunShardsim(plan + "--emit deepspeed");
  EXPECT_EQ(ds.exit_code, 2);
  EXPECT_TRUE(Contains(ds.err, "--emit deepspeed: the plan searches stack 'megatron-core-2024' (--emit megatron or nemo), "
                               "not what deepspeed runs; add --stack deepspeed-zero3 or --stack megatron-deepspeed-2022"));
  const CommandResult none = RunShardsim(plan + "--stack none --emit megatron");
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_TRUE(Contains(none.err, "every layout (--stack none)"));
  // megatron-deepspeed-2022 refuses flash attention, which the planner does not search: its
  // defaults (unfused attention, DeepSpeed's 5e8-element buckets) are what the planner starts
  // from, so it plans; --fix attention=flash is refused by the rule, which the message names as
  // refusing every layout.
  const std::string old_plan = "plan --model gpt-1.7b --gpus 8 --global-batch 64 --stack megatron-deepspeed-2022 --json";
  const CommandResult old = RunShardsim(old_plan);
  EXPECT_EQ(old.exit_code, 0) << old.err;
  EXPECT_TRUE(Contains(old.out, "attention=unfused,bucket_params=500000000"));
  const CommandResult flash = RunShardsim(old_plan + " --fix attention=flash");
  EXPECT_EQ(flash.exit_code, 1);
  EXPECT_TRUE(Contains(flash.err, "cannot run attention=flash: 2022: unfused attention, no fp8 (the keys the planner "
                                  "does not search take their default unless --fix sets them"));
  // A data-parallel-only stack with a batch that 8 GPUs of data parallelism cannot split (12):
  // every enumerated layout uses tp, pp or cp, and the message says why dp = 8 is missing.
  const CommandResult dp_only = RunShardsim("plan --model gpt-1.7b --gpus 8 --global-batch 12 --stack deepspeed-zero3");
  EXPECT_EQ(dp_only.exit_code, 1);
  EXPECT_TRUE(Contains(dp_only.err, "data parallelism alone (dp = 8) was not a candidate: it needs --global-batch a "
                                    "multiple of 8, found 12"))
      << dp_only.err;
  const CommandResult mg = RunShardsim(plan + "--emit megatron");
  EXPECT_EQ(mg.exit_code, 0) << mg.err;
  // The emitted arguments carry the winner's TP size (whichever layout wins).
  const size_t at = mg.out.find("winner: tp=");
  ASSERT_NE(at, std::string::npos) << mg.out;
  const std::string tp = mg.out.substr(at + 11, mg.out.find(',', at) - at - 11);
  EXPECT_TRUE(Contains(mg.out, "--tensor-model-parallel-size " + tp + " ")) << tp << "\n" << mg.out;
}

}  // namespace
}  // namespace shardsim::testing

namespace shardsim::testing {
namespace {

// One flag vocabulary (issue 15, item 6), read from each command's flag table (--list-flags
// prints it: name, value name, default), not from its help prose.
std::map<std::string, std::pair<std::string, std::string>> FlagTable(const std::string& command) {
  const CommandResult r = RunShardsim(command + " --list-flags");
  EXPECT_EQ(r.exit_code, 0) << command << ": " << r.err;
  std::map<std::string, std::pair<std::string, std::string>> out;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) {
    const size_t a = line.find('\t'), b = line.find('\t', a + 1);
    EXPECT_NE(b, std::string::npos) << command << ": " << line;
    if (b == std::string::npos) continue;
    out[line.substr(0, a)] = {line.substr(a + 1, b - a - 1), line.substr(b + 1)};
  }
  return out;
}

// validate takes one layout as --gpus N --layout SPEC, both or neither, and not with --layouts.
TEST(Cli, ValidateTakesOneLayoutFromGpusAndLayout) {
  const CommandResult half = RunShardsim("validate --model tiny --hardware cpu-host --gpus 2");
  EXPECT_EQ(half.exit_code, 2);
  EXPECT_TRUE(Contains(half.err, "--gpus N and --layout SPEC go together")) << half.err;
  const CommandResult both = RunShardsim("validate --gpus 2 --layout dp=2 --layouts x.txt");
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_TRUE(Contains(both.err, "--gpus/--layout and --layouts exclude each other")) << both.err;
  const CommandResult wrong = RunShardsim("validate --model tiny --hardware cpu-host --gpus 2 --layout tp=4");
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_TRUE(Contains(wrong.err, "--layout: tp x pp x dp x cp = 4 ranks, but NP is 2")) << wrong.err;
}

TEST(Cli, EveryCommandTakesTheSharedFlagsItCanUse) {
  // What each command can use: the cost-model commands all inputs; plan all but a layout or a
  // plan (it searches them); calibrate measures this machine (no GPU count, nodes or stack);
  // validate reads runs or layouts from its file, or one layout from --gpus and --layout;
  // compare reads two result files.
  const std::vector<std::string> inputs = {"plan", "model", "hardware", "nodes", "seq-len", "gpus", "layout", "stack", "json"};
  const std::map<std::string, std::vector<std::string>> wants = {
      {"estimate", inputs},
      {"simulate", inputs},
      {"describe", inputs},
      {"run", inputs},
      {"plan", {"model", "hardware", "nodes", "seq-len", "gpus", "stack", "json"}},
      {"calibrate", {"model", "hardware", "layout", "seq-len", "json"}},
      {"validate", {"model", "seq-len", "hardware", "gpus", "layout", "json"}},
      {"memory", {"model", "hardware", "nodes", "seq-len", "gpus", "stack", "json"}},
      {"compare", {"json"}},
  };
  std::map<std::string, std::map<std::string, std::pair<std::string, std::string>>> tables;
  for (const std::string& c : ListedCommands()) {
    SCOPED_TRACE(c);
    ASSERT_TRUE(wants.count(c)) << "a new command: say which shared flags it takes";
    tables[c] = FlagTable(c);
    for (const std::string& flag : wants.at(c)) EXPECT_TRUE(tables[c].count(flag)) << "--" << flag;
  }
  // A flag two commands share takes the same kind of value; --model and --hardware default to
  // the bundled GPT-3 / DGX A100 pair, except where the command runs on this machine (run,
  // calibrate and validate --layouts execute: the CPU pair tiny / cpu-host).
  const std::set<std::string> executes = {"run", "calibrate", "validate"};
  for (const char* flag : {"model", "hardware", "nodes", "seq-len", "gpus", "layout", "stack", "plan", "json"}) {
    std::string value_name;
    for (const auto& [c, table] : tables) {
      auto it = table.find(flag);
      if (it == table.end()) continue;
      // (plan's --gpus also takes a range, N|A..B: the value before '|' is the shared one.)
      const std::string kind = it->second.first.substr(0, it->second.first.find('|'));
      if (value_name.empty()) value_name = kind;
      EXPECT_EQ(kind, value_name) << c << " --" << flag;
      if (std::string(flag) == "model" && !executes.count(c)) {
        EXPECT_EQ(it->second.second, "gpt3-175b") << c;
      }
      if (std::string(flag) == "hardware" && !executes.count(c)) {
        EXPECT_EQ(it->second.second, "dgx-a100-80gb") << c;
      }
    }
  }
}

}  // namespace
}  // namespace shardsim::testing
