// Bounds on sizes and counts (issue 18, items 1 and 2): each input the issue found crashing,
// hanging or giving a wrong number, named after what it was, now a clear error. The bounds are
// src/util/limits.h's: 2^24 GPUs or any parallel degree, 10^9 sequences a batch, 2^20
// micro-batch passes a schedule, 64 MiB a description file, a model's sizes (10^4 layers,
// 2^20 hidden, ..., 10^15 parameters).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <string>

#include "runtime/exec/executor.h"
#include "runtime/report/compare.h"
#include "src/layout/layout.h"
#include "src/model/model_spec.h"
#include "src/util/atomic_file.h"
#include "src/util/limits.h"
#include "src/util/units.h"
#include "tests/run_shardsim.h"

namespace shardsim {
namespace {

using testing::FreshTempDir;
using testing::RunShardsim;

bool Has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

// Was SIGFPE: tp x pp x cp wrapped to 0 and ResolveLayout divided by it.
TEST(Bounds, LayoutDegreesOf2To32WereAFloatingPointException) {
  const auto r = RunShardsim("estimate --layout tp=4294967296,pp=4294967296");
  ASSERT_TRUE(r.exited);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(Has(r.err, "layout key 'tp': expected a positive integer up to 16777216, found '4294967296'")) << r.err;
  // Within each bound, the product is checked: 2^24 x 2^24 x 2^24 overflows int64.
  Layout l;
  l.tp = l.pp = l.cp = kMaxGpus;
  StatusOr<Layout> resolved = ResolveLayout(l, 8);
  ASSERT_FALSE(resolved.ok());
  EXPECT_TRUE(Has(resolved.status().message(), "tp x pp x cp = 16777216 x 16777216 x 16777216")) << resolved.status().message();
}

// Was std::bad_alloc: 2^56 sequences made 2^56 / 3 micro-batches, each a schedule step.
TEST(Bounds, AGlobalBatchOf2To56WasABadAlloc) {
  auto r = RunShardsim("estimate --gpus 3 --layout gbs=72057594037927935");
  ASSERT_TRUE(r.exited);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(Has(r.err, "layout key 'gbs': expected a positive integer up to 1000000000")) << r.err;
  // Within the batch bound, the schedule's passes are bounded: 10^9 micro-batches on one GPU.
  r = RunShardsim("estimate --model tiny --hardware cpu-host --gpus 1 --layout mbs=1,gbs=1000000000");
  ASSERT_TRUE(r.exited);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(Has(r.err, "1000000000 micro-batches")) << r.err;
}

// Was a hang: the cost model walks the model's layers, and a model of 2^40 layers was read
// (found by replaying tests/data/fuzz/estimate-layers-2pow40-hang, 2026-12-06: bad_alloc
// after 6 minutes); and 2^30 hidden was a 4e8 s estimate.
TEST(Bounds, AModelOf2To40LayersWasAHang) {
  const std::string dir = FreshTempDir("bounds-layers");
  auto model = [&](const std::string& name, const std::string& sizes) {
    std::ofstream(dir + "/" + name) << "name: big\nsource: test\n" << sizes
                                      << "heads: 4\nvocab: 512\nseq_len: 64\nactivation: swiglu\nnorm: rmsnorm\n";
    return dir + "/" + name;
  };
  // Line 3 is the layers field, its value at column 9.
  auto r = RunShardsim("estimate --hardware dgx-h100 --gpus 8 --model " +
                       model("layers.yaml", "layers: 1099511627776\nhidden: 64\n"));
  ASSERT_TRUE(r.exited);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(Has(r.err, "layers.yaml:3:9: field 'layers': layers=1099511627776 is above the bound of 10000")) << r.err;
  r = RunShardsim("estimate --hardware dgx-h100 --gpus 8 --model " + model("hidden.yaml", "layers: 4\nhidden: 1073741824\n"));
  ASSERT_TRUE(r.exited);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(Has(r.err, "hidden.yaml:4:9: field 'hidden': hidden=1073741824 is above the bound of 1048576")) << r.err;
  // Each size within its bound, the product is not: 9,000 layers of hidden and FFN 2^20 are
  // 9000 x (4 x 2^40 + 3 x 2^40) = 6.93e16 parameters (+ 2 x 2^20 x 512 for the tables).
  r = RunShardsim("estimate --hardware dgx-h100 --gpus 8 --model " +
                  model("product.yaml", "layers: 9000\nhidden: 1048576\nffn_hidden: 1048576\n"));
  ASSERT_TRUE(r.exited);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(Has(r.err, "field 'layers': these sizes make about 6.93e+16 parameters, above the bound of 1e+15")) << r.err;
  // The same bound holds for a model made in code (ValidateModel, which the readers call).
  ModelSpec m;
  m.layers = kMaxLayers + 1;
  m.hidden = 64;
  m.heads = m.kv_heads = 4;
  m.head_dim = 16;
  m.ffn_hidden = 256;
  m.vocab = 512;
  m.seq_len = 64;
  const Status st = ValidateModel(m, "code");
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(Has(st.message(), "code: layers=10001 is above the bound of 10000")) << st.message();
}

// Was "--gpus must be at least 1, found -8" with no --gpus given: nodes x 8 overflowed.
TEST(Bounds, NodesOf2To63WereANegativeGpuCount) {
  const auto r = RunShardsim("estimate --nodes 9223372036854775807");
  ASSERT_TRUE(r.exited);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(Has(r.err, "--nodes 9223372036854775807 of 8 GPUs: more than the 16777216 GPUs a cluster may hold")) << r.err;
  EXPECT_FALSE(Has(r.err, "found -8"));
}

// Was exit 1: a value that is no integer is a bad command line (docs/cli.md: exit 2).
TEST(Bounds, GpusOf1e300WasExit1) {
  const auto r = RunShardsim("estimate --gpus 1e300");
  ASSERT_TRUE(r.exited);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(Has(r.err, "flag '--gpus': expected an integer, found '1e300'")) << r.err;
  const auto many = RunShardsim("estimate --gpus many");
  EXPECT_EQ(many.exit_code, 2) << many.err;
  EXPECT_TRUE(Has(many.err, "expected an integer, found 'many'")) << many.err;
}

// Was read until bad_alloc (a device never ends), and a FIFO with no writer blocked forever:
// neither is opened now.
TEST(Bounds, DevZeroAndAFifoWereReadForever) {
  StatusOr<ModelSpec> zero = LoadModel("/dev/zero");
  ASSERT_FALSE(zero.ok());
  EXPECT_TRUE(Has(zero.status().message(), "/dev/zero: not a regular file (a FIFO, device or socket)"))
      << zero.status().message();
  const std::filesystem::path dir = FreshTempDir("fifo");
  const std::string fifo = (dir / "model.yaml").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  StatusOr<ModelSpec> m = LoadModel(fifo);
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(Has(m.status().message(), "not a regular file")) << m.status().message();
  std::filesystem::remove_all(dir);
}

// A file over the description bound is refused by its size, not read.
TEST(Bounds, ADescriptionFileIsAtMost64MiB) {
  const std::filesystem::path dir = FreshTempDir("big");
  const std::string path = (dir / "big.yaml").string();
  {
    std::ofstream out(path, std::ios::binary);
    out.seekp(kMaxInputBytes);  // a sparse file one byte over the bound
    out.put('\n');
  }
  StatusOr<std::string> text = ReadWholeFile(path);
  ASSERT_FALSE(text.ok());
  EXPECT_TRUE(Has(text.status().message(), "67108865 bytes, more than the 67108864 a file may hold")) << text.status().message();
  std::filesystem::remove_all(dir);
}

// Was std::bad_alloc: the cluster graph was built for 10^9 nodes.
TEST(Bounds, AClusterOf1e9NodesWasABadAlloc) {
  const std::filesystem::path dir = FreshTempDir("hw");
  const std::string path = (dir / "huge.yaml").string();
  std::string text = ReadWholeFile("hardware/dgx-h100.yaml").value();
  const size_t at = text.find("\nnodes: ");
  ASSERT_NE(at, std::string::npos);
  text.replace(at + 8, text.find('\n', at + 1) - (at + 8), "1000000000");
  ASSERT_TRUE(WriteFileAtomically(path, text).ok());
  const auto r = RunShardsim("estimate --hardware " + path);
  ASSERT_TRUE(r.exited);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(Has(r.err, "nodes=1000000000 of 8 GPUs: more than the 16777216 GPUs a cluster may hold")) << r.err;
  std::filesystem::remove_all(dir);
}

// Was infinite memory that "fits": 1e308 TB overflowed to inf bytes.
TEST(Bounds, MemoryOf1e308TerabytesWasInfiniteAndFit) {
  StatusOr<double> q = ParseQuantity("1e308 TB", Dimension::kBytes);
  ASSERT_FALSE(q.ok());
  EXPECT_TRUE(Has(q.status().message(), "'1e308 TB' is more than 1e24 in base units")) << q.status().message();
  EXPECT_TRUE(ParseQuantity("80 GiB", Dimension::kBytes).ok());
}

// Was exit 0 with a null loss: an infinite learning rate made every parameter NaN.
TEST(Bounds, LearningRateInfWasANullLoss) {
  const auto r = RunShardsim("run --model tiny --lr inf --steps 1");
  ASSERT_TRUE(r.exited);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(Has(r.err, "--lr: expected a learning rate in (0, 1], found 'inf'")) << r.err;
}

// Was a run that allocated until the host failed: an 8B model on a 24 GiB host. Now refused
// before anything is allocated, with the memory model's figure. Llama 3 405B in fp32 with Adam
// on one rank is 405e9 x 16 bytes = 6.5 TB of model state alone, more than any CI host has.
TEST(Bounds, RunOfAModelLargerThanTheHostWasAnAllocationFailure) {
  const auto r = RunShardsim("run --model llama3-405b --layout mbs=1,gbs=1,dtype=fp32 --steps 1");
  ASSERT_TRUE(r.exited);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Has(r.err, "the memory model puts ")) << r.err;
  EXPECT_TRUE(Has(r.err, "more than the ")) << r.err;
  EXPECT_TRUE(Has(r.err, "not started")) << r.err;
}

// Was a failure only after the whole training: --out into a directory that does not exist.
TEST(Bounds, RunOutIntoAMissingDirectoryFailedAfterTraining) {
  const auto r = RunShardsim("run --model tiny --steps 3 --out /nonexistent-dir/run.json");
  ASSERT_TRUE(r.exited);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Has(r.err, "/nonexistent-dir/run.json: cannot write (No such file or directory)")) << r.err;
  EXPECT_FALSE(Has(r.out, "loss")) << r.out;  // not one step trained
}

// A NaN or infinite loss stops the run: every later step would train on NaN parameters.
TEST(Bounds, NonFiniteLossStopsTheRun) {
  EXPECT_TRUE(runtime::CheckLoss(3, 6.25).ok());
  const Status nan = runtime::CheckLoss(7, std::nan(""));
  ASSERT_FALSE(nan.ok());
  EXPECT_TRUE(Has(nan.message(), "step 7: the loss is NaN")) << nan.message();
  EXPECT_TRUE(Has(nan.message(), "lower --lr")) << nan.message();
  const Status inf = runtime::CheckLoss(0, -std::numeric_limits<double>::infinity());
  ASSERT_FALSE(inf.ok());
  EXPECT_TRUE(Has(inf.message(), "step 0: the loss is infinite")) << inf.message();
}

// Was bad_alloc after minutes (800k GPUs) or 3.2 GB (8,192): simulate --full had no size
// guard. Now refused before anything is allocated, with what it would cost. dp = 65,536 ranks
// each keeping a 65,536-member group: 65,536^2 x 8 bytes = 32 GiB for the group lists alone,
// above the 8 GiB bound.
TEST(Bounds, SimulateFullOfAHugeLayoutWasBadAlloc) {
  const auto r = RunShardsim(
      "simulate --model llama3.2-1b --hardware dgx-h100 --nodes 8192 --gpus 65536 --layout dp=65536,gbs=65536,mbs=1 --full");
  ASSERT_TRUE(r.exited);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Has(r.err, "simulating 65536 ranks of ")) << r.err;
  EXPECT_TRUE(Has(r.err, "more than the 8 GiB bound; without --full the simulator runs one rank per pipeline stage"))
      << r.err;
}

// Was a 3 GB trace after 77 s and 9.4 GB of memory: GPT-3 175B on 1,024 GPUs, --full --trace.
// Every rank traced (--trace-ranks all): 10,267,904 tasks x 920 bytes (kSimBytesPerTracedTask)
// = 8.8 GiB, above the bound, refused before anything is allocated, with the way out.
TEST(Bounds, SimulateFullTraceOf1024GpusWasNineGigabytes) {
  const std::string all = (FreshTempDir("trace") / "all.json").string();
  const auto r = RunShardsim("simulate --model gpt3-175b --hardware dgx-a100-80gb --gpus 1024 "
                             "--layout tp=8,pp=16,dp=8,gbs=1536,mbs=1 --full --trace " + all + " --trace-ranks all");
  ASSERT_TRUE(r.exited);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Has(r.err, "simulating 1024 ranks of 1.03e+07 tasks in all, with their trace, would hold about 8.8 GiB"))
      << r.err;
  EXPECT_TRUE(Has(r.err, "trace fewer ranks (--trace-ranks")) << r.err;
  EXPECT_FALSE(std::filesystem::exists(all));
}

// By default --full --trace traces one rank per stage (tp = cp = dp = 0), the ranks symmetric
// mode runs and traces: Llama 3 8B on 64 H100, tp 8 x dp 2 = 16 ranks a stage, so ranks 0, 16,
// 32 and 48, with as many spans as symmetric mode's trace of them (on this rail-optimized
// fabric the full run gives them the same tasks); --trace-ranks 5,17 traces those two only.
TEST(Bounds, SimulateFullTracesOneRankPerStageByDefault) {
  const std::string dir = FreshTempDir("trace-stages").string();
  const std::string llama = "simulate --model llama3-8b --hardware dgx-h100 --gpus 64 "
                            "--layout tp=8,pp=4,mbs=1,gbs=32,sp=on --json --trace ";
  auto spans_of = [](const std::string& file) {
    std::map<int, int64_t> n;  // pid -> complete events
    for (const YAML::Node& e : YAML::LoadFile(file)["traceEvents"]) {
      if (e["ph"].as<std::string>() == "X") ++n[e["pid"].as<int>()];
    }
    return n;
  };
  ASSERT_EQ(RunShardsim(llama + dir + "/sym.json").exit_code, 0);
  ASSERT_EQ(RunShardsim(llama + dir + "/full.json --full").exit_code, 0);
  ASSERT_EQ(RunShardsim(llama + dir + "/two.json --full --trace-ranks 5,17").exit_code, 0);
  const std::map<int, int64_t> sym = spans_of(dir + "/sym.json"), full = spans_of(dir + "/full.json");
  std::set<int> pids;
  for (const auto& [pid, n] : full) pids.insert(pid);
  EXPECT_EQ(pids, (std::set<int>{0, 16, 32, 48}));
  EXPECT_EQ(full, sym);
  std::set<int> two;
  for (const auto& [pid, n] : spans_of(dir + "/two.json")) two.insert(pid);
  EXPECT_EQ(two, (std::set<int>{5, 17}));
  EXPECT_EQ(RunShardsim(llama + dir + "/x.json --trace-ranks 3").exit_code, 2);  // needs --full
  EXPECT_EQ(RunShardsim(llama + dir + "/x.json --full --trace-ranks 64").exit_code, 2);  // 64 ranks: 0-63
}

// Was silence on long work (a 16,384-GPU plan ran a minute, `--gpus 1..2048` errored after
// 29 s having printed nothing): --progress prints each stage of each GPU count on stderr (a
// terminal gets a redrawn bar without the flag), and stdout stays the report.
TEST(Bounds, PlanOverAGpuRangeWasSilent) {
  const auto r = RunShardsim("plan --model tiny --hardware cpu-host --gpus 1..2 --global-batch 8 --top 1 --progress");
  ASSERT_TRUE(r.exited);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const char* line : {"plan: 1 GPUs (1/2): enumerate\n", "plan: 1 GPUs (1/2): search\n",
                           "plan: 2 GPUs (2/2): check\n"}) {
    EXPECT_TRUE(Has(r.err, line)) << r.err;
  }
  EXPECT_FALSE(Has(r.out, "plan: 1 GPUs")) << r.out;
}

// Was silence too: `simulate --full` of a 16,384-GPU plan runs 3 s, of 65,536 GPUs 17 s.
// --progress prints its stage on stderr (a terminal gets a bar redrawn as the simulated tasks
// complete); without it and off a terminal, stderr stays empty.
TEST(Bounds, SimulateFullWasSilent) {
  const std::string cmd = "simulate --model tiny --hardware cpu-host --gpus 2 --layout dp=2,mbs=1,gbs=4 --full";
  auto r = RunShardsim(cmd + " --progress");
  ASSERT_TRUE(r.exited);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "simulate: running\n");
  EXPECT_TRUE(Has(r.out, "iteration time")) << r.out;
  r = RunShardsim(cmd);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
}

// Was an abort on an uncaught YAML::BadSubscript: a run file whose ranks hold strings.
TEST(Bounds, CompareOnStringRanksWasAnAbort) {
  const std::string sim = R"({"iteration_time_s": 2, "time_breakdown": {"compute": 1}, "ranks": [{"rank": 0, "stage": 0}]})";
  const std::string run = R"({"iteration_time_s": 3, "time_breakdown": {"compute": 2}, "ranks": ["0", "1"],
      "memory_breakdown": "none"})";
  StatusOr<runtime::Comparison> c = runtime::Compare(sim, run, "sim.json", "run.json");
  ASSERT_TRUE(c.ok()) << c.status().message();  // the odd fields read as absent
  EXPECT_EQ(c->step.measured, 3.0);
  EXPECT_EQ(c->rank_memory.size(), 2u);
}

}  // namespace
}  // namespace shardsim
