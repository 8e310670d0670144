// `shardsim run`: trains the model for real with the layout, under mpirun, and measures it
// (run.json with the key names of `simulate --json` where they mean the same thing).
// CPU backend, this increment: data parallelism with ZeRO 0-3, or tensor parallelism (Megatron)
// x data parallelism with ZeRO 0; gradient accumulation, fp32.
// Everything else the layout may name is rejected before any work, never ignored.
#include <mpi.h>

#include <algorithm>
#include <csignal>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <memory>

#include "runtime/cpu/markov_stream.h"
#include "runtime/mpi/data_parallel.h"
#include "runtime/mpi/tensor_parallel_trainer.h"
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

// What this increment of the CPU runtime executes; the reasons it cannot run a layout.
std::vector<std::string> Unsupported(const Layout& l) {
  std::vector<std::string> why;
  auto no = [&](bool bad, const std::string& what) {
    if (bad) why.push_back(what);
  };
  no(l.sp, "sp=on (sequence parallelism is not implemented in the CPU runtime yet)");
  no(l.tp > 1 && l.zero > 0, "zero=" + std::to_string(l.zero) + " with tp=" + std::to_string(l.tp) +
                                 " (the CPU runtime shards the optimizer only under pure data parallelism)");
  no(l.pp > 1, "pp=" + std::to_string(l.pp) + " (pipeline parallelism is not implemented in the CPU runtime yet)");
  no(l.cp > 1, "cp=" + std::to_string(l.cp) + " (context parallelism is not implemented in the CPU runtime)");
  no(l.ep > 1, "ep=" + std::to_string(l.ep) + " (expert parallelism is not implemented in the CPU runtime)");
  no(l.recompute != Recompute::kNone, "recompute=" + RecomputeName(l.recompute) + " (not implemented yet)");
  no(l.offload != Offload::kNone, "offload=" + OffloadName(l.offload) + " (not implemented)");
  no(l.dtype != DType::kFp32, "dtype=" + DTypeName(l.dtype) + " (the CPU runtime trains in fp32)");
  no(l.grad_compression != 1, "compress (gradient compression is not implemented)");
  return why;
}

// Switches that change only speed or memory, which this increment does not honour: run
// anyway, but say so (stderr and run.json), never silently.
std::vector<std::string> NotHonoured(const Layout& l) {
  std::vector<std::string> out;
  if (l.attention == AttentionImpl::kFlash) {
    out.push_back("attention=flash: the CPU runtime's attention is unfused (it stores the softmax); "
                  "give attention=unfused to compare with the simulator");
  }
  if (l.overlap_dp && l.dp > 1) out.push_back("overlap_dp=on: gradients are reduced after the backward, not overlapped");
  if (l.overlap_tp && l.tp > 1) out.push_back("overlap_tp=on: TP all-reduces are blocking, not overlapped with GEMMs");
  if (l.zero >= 2) out.push_back("zero=" + std::to_string(l.zero) + ": only the optimizer step is sharded; gradient and parameter buffers stay whole");
  return out;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : (v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]));
}

// One rank's model, optimizer and trainer, behind what the measuring loop needs.
struct Executor {
  struct Times {
    double compute_s = 0, tp_comm_s = 0, dp_comm_s = 0, optimizer_s = 0;
  };
  std::function<StatusOr<float>(const TokenBatch&)> step;
  std::function<Times()> last_times;
  std::function<int64_t()> activation_bytes;  // the last step's saved activations
  std::function<int64_t()> workspace_bytes;   // backward scratch
  int64_t param_elements = 0;                 // parameters this rank holds
};

// tp = 1: the whole model on every rank, data parallelism with ZeRO 0-3.
StatusOr<Executor> DataParallelExecutor(const ModelSpec& spec, const Layout& l, const ProcessGroups& g,
                                        uint64_t seed, const AdamWConfig& config) {
  SHARDSIM_ASSIGN_OR_RETURN(Transformer<float> created, Transformer<float>::Create(spec));
  auto model = std::make_shared<Transformer<float>>(std::move(created));
  model->Init(seed);
  auto optimizer = std::make_shared<AdamW<float>>(model->layout(), config);
  auto trainer = std::make_shared<DataParallelTrainer>(model.get(), optimizer.get(), &g.dp, l.zero, l.mbs);
  Executor e;
  e.step = [model, optimizer, trainer](const TokenBatch& b) { return trainer->Step(b); };
  e.last_times = [trainer] {
    const DataParallelTrainer::Times& t = trainer->last_times();
    return Executor::Times{.compute_s = t.compute_s, .dp_comm_s = t.comm_s, .optimizer_s = t.optimizer_s};
  };
  e.activation_bytes = [model] { return model->ActivationBytes(); };
  e.workspace_bytes = [model] { return model->WorkspaceBytes(); };
  e.param_elements = static_cast<int64_t>(model->params().size());
  return e;
}

// tp > 1: this rank's Megatron shard, the DP gradient all-reduce across replicas, ZeRO 0.
StatusOr<Executor> TensorParallelExecutor(const ModelSpec& spec, const Layout& l, const ProcessGroups& g,
                                          uint64_t seed, const AdamWConfig& config) {
  SHARDSIM_ASSIGN_OR_RETURN(TensorParallelModel created, TensorParallelModel::Create(spec, &g.tp));
  auto model = std::make_shared<TensorParallelModel>(std::move(created));
  model->Init(seed);
  auto optimizer = std::make_shared<AdamW<float>>(model->layout(), config);
  auto trainer = std::make_shared<TensorParallelTrainer>(model.get(), optimizer.get(), &g.dp, l.mbs);
  Executor e;
  e.step = [model, optimizer, trainer](const TokenBatch& b) { return trainer->Step(b); };
  e.last_times = [trainer] {
    const TensorParallelTrainer::Times& t = trainer->last_times();
    return Executor::Times{t.compute_s, t.tp_comm_s, t.dp_comm_s, t.optimizer_s};
  };
  e.activation_bytes = [model] { return model->ActivationBytes(); };
  e.workspace_bytes = [model] { return model->WorkspaceBytes(); };
  e.param_elements = static_cast<int64_t>(model->params().size());
  return e;
}

int Run(int argc, char** argv) {
  std::vector<FlagSpec> flags = cli::InputFlags();
  for (FlagSpec& f : flags) {
    if (f.name == "hardware") f.default_value = "cpu-host";
    if (f.name == "model") f.default_value = "tiny";
    if (f.name == "layout") f.default_value = "mbs=1";
    if (f.name == "gpus") f.help = "ranks (default: the MPI world size)";
  }
  flags.push_back({"backend", "B", "cpu (the CUDA backend is issue 6)", "cpu"});
  flags.push_back({"steps", "N", "training steps", "20"});
  flags.push_back({"seed", "S", "initialization and data seed", "1234"});
  flags.push_back({"lr", "X", "AdamW learning rate", "0.003"});
  flags.push_back({"timeout", "SECONDS", "the longest any rank waits for another", "60"});
  flags.push_back({"out", "FILE", "write run.json (rank 0; whole or not at all)", ""});
  flags.push_back({"kill-rank-at-step", "R:S", "fault test: rank R kills itself (SIGKILL) at step S", ""});
  flags.push_back({"json", "", "print the JSON instead of a summary", ""});
  flags.push_back({"help", "", "show this help", ""});
  StatusOr<Args> args = Args::Parse(argc, argv, 2, flags);
  if (!args.ok()) return Fail("run", args.status().message(), 2);
  if (args->Has("help")) {
    std::cout << "Usage: shardsim run [flags]   (under mpirun -np N for N ranks)\n\n"
                 "Trains the model for real with the layout and measures each step. The CPU\n"
                 "backend runs data parallelism with ZeRO 0-3, or tensor parallelism with data\n"
                 "parallelism (ZeRO 0), and gradient accumulation in fp32;\n"
                 "other layout features are rejected before any work.\n\n"
              << cli::FlagHelp(flags);
    return 0;
  }
  if (*args->Get("backend") != "cpu") {
    return Fail("run", "--backend " + *args->Get("backend") + ": only the cpu backend is built (CUDA is issue 6)", 1);
  }
  MPI_Init(&argc, &argv);
  int world = 1, me = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  auto fail = [&](const std::string& message) {
    std::cerr << "shardsim run: error: " << message << "\n";
    MPI_Abort(MPI_COMM_WORLD, 1);  // ends every rank: never a hang
    return 1;
  };
  StatusOr<cli::Inputs> in = cli::LoadInputs(*args, world);
  if (!in.ok()) return fail(in.status().message());
  const std::vector<std::string> unsupported = Unsupported(in->layout);
  if (!unsupported.empty()) {
    std::string msg = "the CPU runtime cannot run this layout yet:";
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
  StatusOr<ProcessGroups> groups = ProcessGroups::Create(in->layout, static_cast<double>(*timeout));
  if (!groups.ok()) return fail(groups.status().message());
  AdamWConfig config;
  {
    const std::string lr = *args->Get("lr");
    char* end = nullptr;
    config.lr = std::strtod(lr.c_str(), &end);
    if (end != lr.c_str() + lr.size() || !(config.lr > 0)) {
      return fail("--lr: expected a positive number, found '" + lr + "'");
    }
  }
  StatusOr<Executor> executor =
      in->layout.tp > 1
          ? TensorParallelExecutor(in->model, in->layout, *groups, static_cast<uint64_t>(*seed), config)
          : DataParallelExecutor(in->model, in->layout, *groups, static_cast<uint64_t>(*seed), config);
  if (!executor.ok()) return fail(executor.status().message());
  Executor exec = std::move(executor).value();
  const MarkovStream data({.vocab = in->model.vocab, .seed = static_cast<uint64_t>(*seed)});
  const int64_t gbs = in->layout.gbs, seq = in->model.seq_len;

  int64_t kill_rank = -1, kill_step = -1;
  if (std::optional<std::string> k = args->Get("kill-rank-at-step")) {
    if (std::sscanf(k->c_str(), "%lld:%lld", reinterpret_cast<long long*>(&kill_rank),
                    reinterpret_cast<long long*>(&kill_step)) != 2) {
      return fail("--kill-rank-at-step: expected R:S, found '" + *k + "'");
    }
  }
  std::vector<double> step_s, losses, compute_s, tp_comm_s, comm_s, optimizer_s;
  int64_t peak_activations = 0, workspace = 0;
  for (int64_t s = 0; s < *steps; ++s) {
    if (me == kill_rank && s == kill_step) std::raise(SIGKILL);  // a rank that dies mid-run
    const auto t0 = std::chrono::steady_clock::now();
    StatusOr<float> loss = exec.step(data.Batch(s * gbs, gbs, seq));
    if (!loss.ok()) return fail("step " + std::to_string(s) + ": " + loss.status().message());
    double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (Status st = groups->world.AllReduceMax(&took, 1); !st.ok()) {  // the slowest rank
      return fail("step " + std::to_string(s) + ", timing: " + st.message());
    }
    step_s.push_back(took);
    losses.push_back(*loss);
    const Executor::Times times = exec.last_times();
    compute_s.push_back(times.compute_s);
    tp_comm_s.push_back(times.tp_comm_s);
    comm_s.push_back(times.dp_comm_s);
    optimizer_s.push_back(times.optimizer_s);
    peak_activations = std::max(peak_activations, exec.activation_bytes());
    workspace = std::max(workspace, exec.workspace_bytes());
  }
  // Memory by the runtime's own buffers: fp32 weights, gradients and the two Adam moments
  // (this rank's TP shard, held whole across DP in this increment), saved activations, backward
  // scratch.
  const double n = static_cast<double>(exec.param_elements);
  MemoryBreakdown mem;
  mem.weights = 4 * n;
  mem.gradients = 4 * n;
  mem.optimizer = 8 * n;
  mem.activations = static_cast<double>(peak_activations);
  mem.other = static_cast<double>(workspace);
  std::vector<double> rank_peaks(world, 0);
  double mine = mem.total();
  MPI_Gather(&mine, 1, MPI_DOUBLE, rank_peaks.data(), 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  const double median = Median(step_s);
  JsonWriter w;
  w.BeginObject().Field("model", in->model.name).Field("hardware", in->hardware.name);
  w.Field("backend", "cpu").Field("world_size", static_cast<int64_t>(world));
  w.Field("layout", FormatLayout(in->layout)).Field("steps", *steps);
  w.Field("iteration_time_s", median).Field("tokens_per_s", static_cast<double>(gbs * seq) / median);
  w.Key("step_times_s").BeginArray();
  for (double t : step_s) w.Value(t);
  w.EndArray().Key("losses").BeginArray();
  for (double l : losses) w.Value(l);
  w.EndArray();
  w.Key("time_breakdown").BeginObject().Field("compute", Median(compute_s)).Field("tp_comm", Median(tp_comm_s));
  w.Field("dp_comm", Median(comm_s));
  w.Field("optimizer", Median(optimizer_s)).EndObject();
  w.Field("peak_memory_bytes", *std::max_element(rank_peaks.begin(), rank_peaks.end()));
  w.Key("memory_breakdown").BeginObject().Field("weights", mem.weights).Field("gradients", mem.gradients);
  w.Field("optimizer", mem.optimizer).Field("activations", mem.activations).Field("other", mem.other).EndObject();
  w.Key("ranks").BeginArray();
  for (int r = 0; r < world; ++r) w.BeginObject().Field("rank", static_cast<int64_t>(r)).Field("peak_memory_bytes", rank_peaks[r]).EndObject();
  w.EndArray();
  w.Key("warnings").BeginArray();
  for (const std::string& warning : warnings) w.Value(warning);
  w.EndArray().EndObject();
  int code = 0;
  if (me == 0) {
    if (std::optional<std::string> out = args->Get("out")) {
      Status st = WriteFileAtomically(*out, w.str());
      if (!st.ok()) {
        std::cerr << "shardsim run: error: " << st.message() << "\n";
        code = 1;
      }
    }
    if (args->Has("json")) {
      std::cout << w.str();
    } else {
      std::printf("shardsim run: %s, %s on %d ranks, %lld steps\n", in->model.name.c_str(),
                  FormatLayout(in->layout).c_str(), world, static_cast<long long>(*steps));
      std::printf("loss %.4f -> %.4f; median step %.4f s, %.0f tokens/s\n", losses.front(), losses.back(), median,
                  static_cast<double>(gbs * seq) / median);
    }
  }
  MPI_Finalize();
  return code;
}

const cli::CommandRegistrar kRegister(
    {"run", "train for real with a layout under mpirun and measure it (CPU backend)", Run, 30});

}  // namespace
}  // namespace shardsim::runtime
