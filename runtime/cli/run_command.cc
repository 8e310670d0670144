// `shardsim run`: trains the model for real with the layout (under mpirun for several ranks,
// or one rank of a larger layout alone with --emulate-rank) and measures it (run.json with the
// key names of `simulate --json` where they mean the same thing). The executor of
// runtime/exec runs on the CPU backend (Eigen + MPI) or the CUDA backend (cuBLAS + NCCL): DP
// with ZeRO 0-3, TP (+SP), PP (gpipe, 1f1b, interleaved), gradient accumulation, recompute,
// fp32 or bf16 mixed precision. Everything else the layout may name is rejected before any work (UnsupportedLayout).
#include <algorithm>
#include <csignal>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <memory>

#include "runtime/cli/run_backend.h"
#include "runtime/cpu/markov_stream.h"
#include "runtime/exec/executor.h"
#include "runtime/exec/timeline.h"
#include "src/cli/args.h"
#include "src/cli/commands.h"
#include "src/cli/inputs.h"
#include "src/cost/memory.h"
#include "src/util/atomic_file.h"
#include "src/util/json_writer.h"

namespace shardsim::runtime {
namespace {

using cli::Args;
using cli::Fail;
using cli::FlagSpec;

// Switches that change only speed or memory, which this increment does not honour: run
// anyway, but say so (stderr and run.json), never silently.
std::vector<std::string> NotHonoured(const Layout& l) {
  std::vector<std::string> out;
  // overlap_tp=backward is exactly what the runtime does; on asks for more.
  if (l.overlap_tp == TpOverlap::kOn && l.tp > 1) {
    std::string w = "overlap_tp=on: only the backward pass's column-parallel layers overlap TP communication "
                    "(Megatron-LM's async input-gradient reduction: ";
    w += l.sp ? "the re-gather of their input runs under the input-gradient GEMMs and the reduce-scatter of "
                "the input gradient under the weight-gradient GEMMs"
              : "the all-reduce of the input gradient runs under the weight-gradient GEMMs";
    w += l.sp ? "); the forward's all-gathers and reduce-scatters and the backward's all-gathers of the output "
                "gradient are blocking"
              : "); the forward's all-reduces are blocking";
    w += " (they feed the next op directly), as with overlap_tp=backward. The simulator's "
         "overlap_tp=on hides all TP communication, as Megatron-LM's --tp-comm-overlap "
         "(userbuffers) does; this runtime does not";
    out.push_back(w);
  }
  if (l.overlap_pp && l.pp > 1) out.push_back("overlap_pp=on: pipeline sends are non-blocking, receives block");
  return out;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : (v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]));
}

std::vector<std::string> CategoryKeys() {
  std::vector<std::string> keys;
  for (int c = 0; c < kCategoryCount; ++c) keys.push_back(CategoryName(static_cast<Category>(c)));
  return keys;
}

int Run(int argc, char** argv) {
  std::vector<FlagSpec> flags = cli::InputFlags();
  for (FlagSpec& f : flags) {
    if (f.name == "hardware") f.default_value = "cpu-host";
    if (f.name == "model") f.default_value = "tiny";
    if (f.name == "layout") f.default_value = "mbs=1";
    if (f.name == "gpus") f.help = "ranks of the layout (default: the MPI world size)";
  }
  flags.push_back({"backend", "B", "cpu or cuda", "cpu"});
  flags.push_back({"emulate-rank", "R", "run only rank R of the layout, alone: its shards, schedule and "
                                        "memory, collectives replaced by copies (give --gpus or --plan)", ""});
  flags.push_back({"steps", "N", "training steps", "20"});
  flags.push_back({"seed", "S", "initialization and data seed", "1234"});
  flags.push_back({"lr", "X", "AdamW learning rate", "0.003"});
  flags.push_back({"timeout", "SECONDS", "the longest any rank waits for another", "60"});
  flags.push_back({"out", "FILE", "write run.json (rank 0; whole or not at all)", ""});
  flags.push_back({"trace", "FILE", "write the measured timeline of the last step (Chrome trace, as simulate --trace)", ""});
  flags.push_back({"kill-rank-at-step", "R:S", "fault test: rank R kills itself (SIGKILL) at step S", ""});
  flags.push_back({"json", "", "print the JSON instead of a summary", ""});
  flags.push_back({"help", "", "show this help", ""});
  StatusOr<Args> args = Args::Parse(argc, argv, 2, flags);
  if (!args.ok()) return Fail("run", args.status().message(), 2);
  if (args->Has("help")) {
    std::cout << "Usage: shardsim run [flags]   (under mpirun -np N for N ranks)\n"
                 "       shardsim run --emulate-rank R --gpus N [flags]   (rank R of N, alone)\n\n"
                 "Trains the model for real with the layout and measures each step: data\n"
                 "parallelism with ZeRO 0-3, tensor parallelism (+ sequence parallelism),\n"
                 "pipeline parallelism (gpipe, 1f1b, interleaved), gradient accumulation and\n"
                 "activation recomputation, in fp32 or bf16 mixed precision (dtype=bf16: bf16\n"
                 "weights and activations, fp32 gradients, master weights and AdamW states; on\n"
                 "the CPU, bf16 storage with fp32 arithmetic). Other layout features are\n"
                 "rejected before any work.\n\n"
              << cli::FlagHelp(flags);
    return 0;
  }
  int64_t emulate = -1;
  if (args->Get("emulate-rank")) {
    StatusOr<int64_t> r = args->GetInt("emulate-rank");
    if (!r.ok() || *r < 0) return Fail("run", "--emulate-rank: expected a rank >= 0", 2);
    emulate = *r;
  }
  const RunProcess process = StartRunProcess(&argc, &argv);
  const int me = process.me;
  auto fail = [&](const std::string& message) {
    std::cerr << "shardsim run: error: rank " << (emulate >= 0 ? emulate : me) << ": " << message << "\n";
    AbortRun(1);  // ends every rank: never a hang
    return 1;
  };
  // The ranks this report covers: every process, or the one emulated rank.
  const int world = emulate >= 0 ? 1 : process.world;
  StatusOr<cli::Inputs> in = cli::LoadInputs(*args, process.world);
  if (!in.ok()) return fail(in.status().message());
  const std::vector<std::string> unsupported = UnsupportedLayout(in->model, in->layout);
  if (!unsupported.empty()) {
    std::string msg = "the runtime cannot run this layout:";
    for (const std::string& u : unsupported) msg += "\n  " + u;
    return fail(msg);
  }
  const std::vector<std::string> warnings = NotHonoured(in->layout);
  if (me == 0) {
    for (const std::string& w : warnings) std::cerr << "shardsim run: warning: " << w << "\n";
  }
  StatusOr<int64_t> steps = args->GetInt("steps");
  StatusOr<int64_t> seed = args->GetInt("seed");
  StatusOr<int64_t> timeout = args->GetInt("timeout");
  if (!steps.ok() || *steps < 1 || !seed.ok() || !timeout.ok() || *timeout < 1) {
    return fail("--steps, --seed and --timeout must be positive integers");
  }
  AdamWConfig config;
  {
    const std::string lr = *args->Get("lr");
    char* end = nullptr;
    config.lr = std::strtod(lr.c_str(), &end);
    // Finite and at most 1: an infinite rate made every parameter NaN and the run "succeeded"
    // with a null loss; AdamW's step is lr in size, and no recipe goes above 1e-2.
    if (end != lr.c_str() + lr.size() || !std::isfinite(config.lr) || !(config.lr > 0) || config.lr > 1) {
      return fail("--lr: expected a learning rate in (0, 1], found '" + lr + "'");
    }
  }
  int64_t kill_rank = -1, kill_step = -1;
  if (std::optional<std::string> k = args->Get("kill-rank-at-step")) {
    if (std::sscanf(k->c_str(), "%lld:%lld", reinterpret_cast<long long*>(&kill_rank),
                    reinterpret_cast<long long*>(&kill_step)) != 2) {
      return fail("--kill-rank-at-step: expected R:S, found '" + *k + "'");
    }
  }
  StatusOr<std::unique_ptr<Backend>> made = MakeRunBackend(
      *args->Get("backend"), in->layout, process, emulate, static_cast<double>(*timeout));
  if (!made.ok()) return fail(made.status().message());
  Backend& backend = **made;
  const int32_t stage = static_cast<int32_t>(StageOf(in->layout, process, emulate));
  Collectives& comm = backend.comm();
  // Gathers this process's figures from every process (just its own when emulating).
  auto gather = [&](const double* mine, double* all, int64_t n) -> Status {
    if (emulate >= 0) {
      std::copy(mine, mine + n, all);
      return Status::Ok();
    }
    return comm.AllGatherHost(Group::kWorld, mine, all, n);
  };
  Timeline timeline;
  StatusOr<std::unique_ptr<Executor>> created = Executor::Create(
      in->model, in->layout, &backend, config, static_cast<uint64_t>(*seed), &timeline);
  if (!created.ok()) return fail("setup: " + created.status().message());
  Executor& exec = **created;
  const MarkovStream data({.vocab = in->model.vocab, .seed = static_cast<uint64_t>(*seed)});
  const int64_t gbs = in->layout.gbs, seq = in->model.seq_len;

  const std::vector<std::string> categories = CategoryKeys();
  std::vector<std::vector<double>> per_step;  // [step][category..., forward, backward]
  std::vector<double> step_s, losses;
  std::vector<TimelineEvent> last_step;
  double last_step_start = 0;
  for (int64_t s = 0; s < *steps; ++s) {
    if (me == kill_rank && s == kill_step) std::raise(SIGKILL);  // a rank that dies mid-run
    timeline.Clear();
    const double t0 = backend.Now();
    StatusOr<double> loss = exec.Step(data, s);
    if (!loss.ok()) {
      return fail("step " + std::to_string(s) + ", phase " + exec.phase() + ": " + loss.status().message());
    }
    double took = backend.Now() - t0;
    if (Status st = comm.AllReduceMaxHost(Group::kWorld, &took, 1); !st.ok()) {  // the slowest rank
      return fail("step " + std::to_string(s) + ", timing: " + st.message());
    }
    step_s.push_back(took);
    losses.push_back(*loss);
    const TimelineTotals totals = timeline.Totals();
    std::vector<double> row;
    for (const std::string& c : categories) {
      auto it = totals.by_category_s.find(c);
      row.push_back(it == totals.by_category_s.end() ? 0 : it->second);
    }
    row.push_back(totals.forward_s);
    row.push_back(totals.backward_s);
    per_step.push_back(row);
    last_step = timeline.events();
    last_step_start = t0;
  }
  const int64_t device_in_use = backend.DeviceBytesInUse();
  // This rank's figures: the step-median of each phase, then its memory at its peak.
  std::vector<double> mine;
  for (size_t j = 0; j < per_step.front().size(); ++j) {
    std::vector<double> col;
    for (const std::vector<double>& row : per_step) col.push_back(row[j]);
    mine.push_back(Median(col));
  }
  const MemoryUsage& at_peak = backend.memory().at_peak();
  for (int k = 0; k < kMemoryKindCount; ++k) mine.push_back(static_cast<double>(at_peak.bytes[k]));
  mine.push_back(static_cast<double>(at_peak.total()));
  mine.push_back(static_cast<double>(stage));
  const int64_t width = static_cast<int64_t>(mine.size());
  std::vector<double> all(width * world);
  if (Status st = gather(mine.data(), all.data(), width); !st.ok()) {
    return fail("gathering the figures: " + st.message());
  }
  std::string trace;
  if (args->Get("trace")) {
    // Every rank's last step on one clock origin: the earliest start over the ranks.
    double origin = -last_step_start;
    if (Status st = comm.AllReduceMaxHost(Group::kWorld, &origin, 1); !st.ok()) return fail("trace: " + st.message());
    StatusOr<std::vector<std::vector<TimelineEvent>>> gathered =
        emulate >= 0 ? StatusOr<std::vector<std::vector<TimelineEvent>>>(
                           std::vector<std::vector<TimelineEvent>>{last_step})
                     : GatherTimelines(comm, last_step);
    if (!gathered.ok()) return fail("trace: " + gathered.status().message());
    std::vector<int32_t> stages;
    for (int r = 0; r < world; ++r) stages.push_back(static_cast<int32_t>(all[(r + 1) * width - 1]));
    trace = MeasuredChromeTrace(*gathered, stages, -origin);
  }
  const int64_t ncat = static_cast<int64_t>(categories.size());
  auto at = [&](int r, int64_t j) { return all[r * width + j]; };
  int worst = 0;  // the rank with the highest peak memory
  for (int r = 1; r < world; ++r) {
    if (at(r, width - 2) > at(worst, width - 2)) worst = r;
  }
  const double median = Median(step_s);
  JsonWriter w;
  w.BeginObject().Field("model", in->model.name).Field("hardware", in->hardware.name);
  w.Field("backend", std::string(backend.name())).Field("world_size", in->layout.world());
  if (emulate >= 0) w.Field("emulated_rank", emulate);
  // What the device reports in use after the run (this process's rank; -1 on a CPU host):
  // the tracked allocations' peak plus what no allocator tracks (CUDA context, cuBLAS).
  w.Field("device_memory_in_use_bytes", device_in_use);
  w.Field("layout", FormatLayout(in->layout)).Field("steps", *steps);
  w.Field("iteration_time_s", median).Field("tokens_per_s", static_cast<double>(gbs * seq) / median);
  w.Key("step_times_s").BeginArray();
  for (double t : step_s) w.Value(t);
  w.EndArray().Key("losses").BeginArray();
  for (double l : losses) w.Value(l);
  w.EndArray();
  // Per category, the largest step-median over the ranks (the simulator's breakdown is of the
  // slowest stage); forward and backward split compute.
  w.Key("time_breakdown").BeginObject();
  for (int64_t j = 0; j < ncat + 2; ++j) {
    double hi = 0;
    for (int r = 0; r < world; ++r) hi = std::max(hi, at(r, j));
    w.Field(j < ncat ? categories[j] : (j == ncat ? "forward" : "backward"), hi);
  }
  w.EndObject();
  w.Field("peak_memory_bytes", at(worst, width - 2));
  w.Key("memory_breakdown").BeginObject();
  for (int k = 0; k < kMemoryKindCount; ++k) w.Field(MemoryKindName(static_cast<MemoryKind>(k)), at(worst, ncat + 2 + k));
  w.EndObject();
  w.Key("ranks").BeginArray();
  for (int r = 0; r < world; ++r) {
    w.BeginObject().Field("rank", emulate >= 0 ? emulate : static_cast<int64_t>(r)).Field("stage", static_cast<int64_t>(at(r, width - 1)));
    w.Field("peak_memory_bytes", at(r, width - 2));
    w.Key("memory_breakdown").BeginObject();
    for (int k = 0; k < kMemoryKindCount; ++k) w.Field(MemoryKindName(static_cast<MemoryKind>(k)), at(r, ncat + 2 + k));
    w.EndObject().Key("time_breakdown").BeginObject();
    for (int64_t j = 0; j < ncat + 2; ++j) w.Field(j < ncat ? categories[j] : (j == ncat ? "forward" : "backward"), at(r, j));
    w.EndObject().EndObject();
  }
  w.EndArray();
  w.Key("warnings").BeginArray();
  for (const std::string& warning : warnings) w.Value(warning);
  w.EndArray().EndObject();
  int code = 0;
  if (me == 0) {
    auto write = [&](const std::optional<std::string>& path, const std::string& text) {
      if (!path) return;
      if (Status st = WriteFileAtomically(*path, text); !st.ok()) {
        std::cerr << "shardsim run: error: " << st.message() << "\n";
        code = 1;
      }
    };
    write(args->Get("out"), w.str());
    write(args->Get("trace"), trace);
    if (args->Has("json")) {
      std::cout << w.str();
    } else {
      std::printf("shardsim run: %s, %s on %d ranks, %lld steps\n", in->model.name.c_str(),
                  FormatLayout(in->layout).c_str(), world, static_cast<long long>(*steps));
      std::printf("loss %.4f -> %.4f; median step %.4f s, %.0f tokens/s; peak memory %.2f MiB (rank %d)\n",
                  losses.front(), losses.back(), median, static_cast<double>(gbs * seq) / median,
                  at(worst, width - 2) / 1048576.0, worst);
    }
  }
  EndRunProcess();
  return code;
}

const cli::CommandRegistrar kRegister(
    {"run", "train for real with a layout (mpirun, or one emulated rank) and measure it", Run, 30});

}  // namespace
}  // namespace shardsim::runtime
