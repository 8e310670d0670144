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
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <tuple>

#include "runtime/cli/run_backend.h"
#include "runtime/cpu/cpu_threads.h"
#include "runtime/cpu/host_memory.h"
#include "runtime/cpu/lr_schedule.h"
#include "runtime/cpu/markov_stream.h"
#include "runtime/cpu/token_file.h"
#include "runtime/exec/checkpoint.h"
#include "runtime/exec/executor.h"
#include "runtime/exec/reference_dump.h"
#include "runtime/exec/reshard.h"
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

// What `run` is asked to do, read and checked before any work.
struct RunRequest {
  cli::Inputs in;
  std::vector<std::string> warnings;  // switches this runtime does not honour (NotHonoured)
  int64_t steps = 0, seed = 0, timeout = 0;
  AdamWConfig config;
  int64_t kill_rank = -1, kill_step = -1;
  int64_t stop_rank = -1, stop_step = -1;
  LrSchedule schedule;
  std::unique_ptr<TokenSource> data;  // the token file, or the synthetic stream
  std::string data_name;              // its path, or "synthetic"
  std::optional<std::string> save_dir, resume_dir;
  std::optional<CheckpointInfo> reshard_from;  // --resume of another layout or rank count
  bool reshard_dropped_compression = false;    // ... saved under compress=R
  int64_t save_every = 0;
  int64_t first_step = 0;  // the checkpoint's step when resuming, else 0
};

// The whole of `text` as a finite number, or nothing.
std::optional<double> FiniteNumber(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

// What a checkpoint of this run records (checkpoint.h).
CheckpointInfo CheckpointNow(const RunRequest& r, int world, int64_t step = 0) {
  CheckpointInfo info;
  info.step = step;
  info.world = world;
  info.seed = r.seed;
  info.model = r.in.model.name;
  info.layout = FormatLayout(r.in.layout);
  info.data = r.data_name;
  return info;
}

// The same answer on every rank (it reads only the command line and the input files), but for
// rank 0's check that it can write its outputs.
StatusOr<RunRequest> ReadRunRequest(const Args& args, const RunProcess& process, int64_t emulate) {
  const int me = process.me;
  RunRequest r;
  // Rank 0 writes the outputs: a directory that is missing or read-only fails now, not after
  // the whole training.
  if (me == 0) {
    for (const char* flag : {"out", "trace"}) {
      if (std::optional<std::string> path = args.Get(flag)) SHARDSIM_RETURN_IF_ERROR(CheckWritable(*path));
    }
    // The output directories, created now, and the file each is finished with.
    for (const auto& [flag, last_file] : {std::pair{"save", "latest"}, std::pair{"dump", "manifest.json"}}) {
      const std::optional<std::string> dir = args.Get(flag);
      if (!dir) continue;
      std::error_code ec;
      std::filesystem::create_directories(*dir, ec);
      if (ec) return Status::Error(*dir + ": cannot create the --" + flag + " directory (" + ec.message() + ")");
      SHARDSIM_RETURN_IF_ERROR(CheckWritable(*dir + "/" + last_file));
    }
  }
  StatusOr<cli::Inputs> in = cli::LoadInputs(args, process.world);
  if (!in.ok()) return in.status();
  r.in = std::move(in).value();
  const std::vector<std::string> unsupported = UnsupportedLayout(r.in.model, r.in.layout);
  if (!unsupported.empty()) {
    std::string msg = "the runtime cannot run this layout:";
    for (const std::string& u : unsupported) msg += "\n  " + u;
    return Status::Error(msg);
  }
  if (args.Get("backend").value_or("cpu") == "cpu") {
    SHARDSIM_RETURN_IF_ERROR(CheckHostMemory(r.in.model, r.in.hardware, r.in.layout, process, emulate));
    KeepFreedHostMemory();  // reuse freed activations' pages (host_memory.h)
  }
  r.warnings = NotHonoured(r.in.layout);
  StatusOr<int64_t> steps = args.GetInt("steps");
  StatusOr<int64_t> seed = args.GetInt("seed");
  StatusOr<int64_t> timeout = args.GetInt("timeout");
  if (!steps.ok() || *steps < 1 || !seed.ok() || !timeout.ok() || *timeout < 1) {
    return Status::Error("--steps, --seed and --timeout must be positive integers");
  }
  r.steps = *steps;
  r.seed = *seed;
  r.timeout = *timeout;
  if (args.Get("threads")) {
    StatusOr<int64_t> threads = args.GetInt("threads");
    if (!threads.ok() || *threads < 1 || *threads > 256) {
      return Status::Error("--threads: expected an integer in 1..256, found '" + *args.Get("threads") + "'");
    }
    SetCpuThreads(static_cast<int>(*threads));  // every rank's matrix products (cpu_threads.h)
  }
  // Finite and at most 1: an infinite rate made every parameter NaN and the run "succeeded"
  // with a null loss; AdamW's step is lr in size, and no recipe goes above 1e-2.
  const std::string lr = *args.Get("lr");
  const std::optional<double> lr_value = FiniteNumber(lr);
  if (!lr_value || !(*lr_value > 0) || *lr_value > 1) {
    return Status::Error("--lr: expected a learning rate in (0, 1], found '" + lr + "'");
  }
  r.config.lr = *lr_value;
  r.schedule.max_lr = r.config.lr;
  r.schedule.decay_steps = r.steps;
  SHARDSIM_ASSIGN_OR_RETURN(r.schedule.decay, ParseLrDecay(*args.Get("lr-schedule")));
  StatusOr<int64_t> warmup = args.GetInt("warmup-steps");
  if (!warmup.ok() || *warmup < 0) return Status::Error("--warmup-steps: expected an integer >= 0");
  r.schedule.warmup_steps = *warmup;
  if (r.schedule.decay != LrDecay::kConstant && r.schedule.warmup_steps >= r.steps) {
    return Status::Error("--warmup-steps " + std::to_string(*warmup) + " leaves no step of --steps " +
                         std::to_string(r.steps) + " to decay over (--lr-schedule " +
                         LrDecayName(r.schedule.decay) + ")");
  }
  const std::string min_lr = *args.Get("min-lr");
  const std::optional<double> min_lr_value = FiniteNumber(min_lr);
  if (!min_lr_value || *min_lr_value < 0 || *min_lr_value > r.config.lr) {
    return Status::Error("--min-lr: expected a rate in [0, --lr], found '" + min_lr + "'");
  }
  r.schedule.min_lr = *min_lr_value;
  if (std::optional<std::string> path = args.Get("data")) {
    SHARDSIM_ASSIGN_OR_RETURN(const TokenWidth width, ParseTokenWidth(*args.Get("data-dtype")));
    SHARDSIM_ASSIGN_OR_RETURN(TokenFile file, TokenFile::Open(*path, width, r.in.model.vocab, r.in.model.seq_len));
    r.data = std::make_unique<TokenFile>(std::move(file));
  } else {
    r.data = std::make_unique<MarkovStream>(
        MarkovStreamConfig{.vocab = r.in.model.vocab, .seed = static_cast<uint64_t>(r.seed)});
  }
  r.data_name = args.Get("data").value_or("synthetic");
  r.save_dir = args.Get("save");
  r.resume_dir = args.Get("resume");
  StatusOr<int64_t> every = args.GetInt("save-every");
  if (!every.ok() || *every < 0) return Status::Error("--save-every: expected an integer >= 0");
  r.save_every = *every;
  if ((r.save_dir || r.resume_dir) && emulate >= 0) {
    return Status::Error("--save and --resume need every rank of the layout; they cannot be used with --emulate-rank");
  }
  if (r.resume_dir) {
    if (args.Get("dump")) return Status::Error("--dump replays a run from step 0; it cannot be used with --resume");
    SHARDSIM_ASSIGN_OR_RETURN(const CheckpointInfo saved, ReadLatestCheckpoint(*r.resume_dir));
    const CheckpointInfo now = CheckpointNow(r, process.world);
    const std::string why = CheckpointMismatch(saved, now);
    if (!why.empty()) return Status::Error(*r.resume_dir + ": the checkpoint cannot be resumed by this run (" + why + ")");
    if (NeedsReshard(saved, now)) {  // re-sharded (reshard.h): the data position needs the same gbs
      StatusOr<Layout> old = ParseLayout(saved.layout);
      if (!old.ok()) return Status::Error(*r.resume_dir + ": the checkpoint's layout: " + old.status().message());
      if (old->gbs != r.in.layout.gbs) {
        return Status::Error(*r.resume_dir + ": the checkpoint was saved with gbs=" + std::to_string(old->gbs) +
                             ", this run's is " + std::to_string(r.in.layout.gbs) +
                             ": step K's data is sequences [K gbs, (K+1) gbs), so a resumed run keeps the global batch");
      }
      r.reshard_from = saved;
      r.reshard_dropped_compression = old->grad_compression > 1;
    }
    const bool converts = r.reshard_from && r.save_dir && saved.step == r.steps;  // re-shard, no steps
    if (saved.step >= r.steps && !converts) {
      return Status::Error(*r.resume_dir + ": the checkpoint is at step " + std::to_string(saved.step) +
                           " and --steps is " + std::to_string(r.steps) + ": nothing is left to run");
    }
    std::error_code ec;
    if (converts && std::filesystem::weakly_canonical(*r.save_dir, ec) == std::filesystem::weakly_canonical(*r.resume_dir, ec)) {
      return Status::Error("--save " + *r.save_dir + ": re-sharding a checkpoint writes it to another folder than --resume's");
    }
    r.first_step = saved.step;
  }
  for (const auto& [flag, rank, step] : {std::tuple{"kill-rank-at-step", &r.kill_rank, &r.kill_step},
                                         std::tuple{"stop-rank-at-step", &r.stop_rank, &r.stop_step}}) {
    if (std::optional<std::string> k = args.Get(flag)) {
      if (std::sscanf(k->c_str(), "%lld:%lld", reinterpret_cast<long long*>(rank), reinterpret_cast<long long*>(step)) != 2) {
        return Status::Error(std::string("--") + flag + ": expected R:S, found '" + *k + "'");
      }
    }
  }
  return r;
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
  flags.push_back({"threads", "N", "CPU backend: threads of each rank's matrix products (OpenBLAS; default 1, or "
                                   "OPENBLAS_NUM_THREADS)", ""});
  flags.push_back({"seed", "S", "initialization and data seed", "1234"});
  flags.push_back({"lr", "X", "AdamW learning rate", "0.003"});
  flags.push_back({"lr-schedule", "S", "constant, linear or cosine decay after the warm-up (Megatron-LM's "
                                        "--lr-decay-style), over --steps", "constant"});
  flags.push_back({"warmup-steps", "N", "linear warm-up from 0 over the first N steps", "0"});
  flags.push_back({"min-lr", "X", "the rate linear and cosine decay end at", "0"});
  flags.push_back({"data", "FILE", "train on a token file (flat little-endian token ids, as llm.c and Megatron-LM "
                                   "store them; scripts/make-token-file.sh) instead of the synthetic stream", ""});
  flags.push_back({"data-dtype", "T", "the token file's ids: uint16 or uint32", "uint16"});
  flags.push_back({"timeout", "SECONDS", "the longest any rank waits for another", "60"});
  flags.push_back({"out", "FILE", "write run.json (rank 0; whole or not at all)", ""});
  flags.push_back({"trace", "FILE", "write the measured timeline of the last step (Chrome trace, as simulate --trace)", ""});
  flags.push_back({"kill-rank-at-step", "R:S", "fault test: rank R kills itself (SIGKILL) at step S", ""});
  flags.push_back({"stop-rank-at-step", "R:S", "fault test: rank R stops itself (SIGSTOP) at step S; the "
                                             "others' timeout names it", ""});
  flags.push_back({"stop-rank-at-start", "R", "fault test: the process mpirun starts as rank R stops itself "
                                              "(SIGSTOP) before MPI_Init", ""});
  flags.push_back({"save", "DIR", "write checkpoints into DIR (every rank's state; runtime/exec/checkpoint.h)", ""});
  flags.push_back({"save-every", "N", "checkpoint after every N steps (0: after the last step only)", "0"});
  flags.push_back({"resume", "DIR", "continue from DIR's latest checkpoint (same model, seed, data and gbs; another "
                                    "layout or rank count is re-sharded; with --save and --steps at the checkpoint's "
                                    "step, only re-shards it into --save, no report)", ""});
  flags.push_back({"dump", "DIR", "write the initial and final parameters, every step's tokens and the losses "
                                  "(rank 0; the PyTorch reference test reads them: runtime/exec/reference_dump.h)", ""});
  flags.push_back({"json", "", "print the JSON instead of a summary", ""});
  flags.push_back({"help", "", "show this help", ""});
  StatusOr<Args> args = Args::Parse(argc, argv, 2, flags);
  if (!args.ok()) return Fail("run", args.status().message(), 2);
  if (args->Has("help")) {
    std::cout << "Usage: shardsim run [flags]   (under mpirun -np N for N ranks)\n"
                 "       shardsim run --emulate-rank R --gpus N [flags]   (rank R of N, alone)\n\n"
                 "Trains the model for real with the layout and measures each step: data\n"
                 "parallelism with ZeRO 0-3, tensor parallelism (+ sequence parallelism),\n"
                 "context parallelism, mixture-of-experts layers with expert parallelism,\n"
                 "pipeline parallelism (gpipe, 1f1b, interleaved, zero-bubble, zb-v), gradient\n"
                 "accumulation, offload of the optimizer (and parameters) to the host and\n"
                 "activation recomputation, in fp32 or bf16 mixed precision (dtype=bf16: bf16\n"
                 "weights and activations, fp32 gradients, master weights and AdamW states; on\n"
                 "the CPU, bf16 storage with fp32 arithmetic), or bf16 with Transformer\n"
                 "Engine's GEMMs in fp8 (dtype=fp8: E4M3 / E5M2, current scaling).\n"
                 "compress=R runs PowerSGD (ZeRO 0): each gradient matrix sent as rank-r\n"
                 "factors of about 1/R of its size, with error feedback. Both backends run\n"
                 "all of these. Not run yet, and rejected before any work with the reason:\n"
                 "fp8_params; recompute=op; kernels other than fused; cuda_graphs; moe_capacity with cp > 1.\n\n"
              << cli::FlagHelp(flags);
    return 0;
  }
  int64_t emulate = -1;
  if (args->Get("emulate-rank")) {
    StatusOr<int64_t> r = args->GetInt("emulate-rank");
    if (!r.ok() || *r < 0) return Fail("run", "--emulate-rank: expected a rank >= 0", 2);
    emulate = *r;
  }
  // Start-up is bounded by --timeout too (read here, checked with the rest below).
  const StatusOr<int64_t> startup_timeout = args->GetInt("timeout");
  StartupWatchdog watchdog(startup_timeout.ok() && *startup_timeout > 0 ? static_cast<double>(*startup_timeout) : 60.0);
  if (std::optional<std::string> stop = args->Get("stop-rank-at-start")) {
    // A rank that stops before MPI_Init, for the test of the watchdog (mpi.RunStoppedRankAtStartEndsTheJob).
    if (LauncherRank() >= 0 && std::to_string(LauncherRank()) == *stop) std::raise(SIGSTOP);
  }
  const RunProcess process = StartRunProcess(&argc, &argv);
  const int me = process.me;
  auto fail = [&](const std::string& message) {
    std::cerr << "shardsim run: error: rank " << (emulate >= 0 ? emulate : me) << ": " << message << "\n";
    AbortRun(process, 1);  // ends every rank: never a hang
    return 1;
  };
  // The ranks this report covers: every process, or the one emulated rank.
  const int world = emulate >= 0 ? 1 : process.world;
  StatusOr<RunRequest> request = ReadRunRequest(*args, process, emulate);
  // Every rank reads the same flags and files, so a bad input fails on all of them alike: the
  // ranks agree on the first that failed, and only it prints (under mpirun every rank used to
  // print the same error, interleaved). A rank that alone fails (a file missing on its node)
  // is the one that prints.
  const int first = FirstFailingRank(process, !request.ok());
  watchdog.Done();  // every rank got here: the job has started
  if (first >= 0) {
    if (me == first) std::cerr << "shardsim run: error: " << request.status().message() << "\n";
    EndRunProcess();
    return 1;
  }
  const RunRequest req = std::move(request).value();
  if (me == 0) {
    for (const std::string& w : req.warnings) std::cerr << "shardsim run: warning: " << w << "\n";
  }
  const std::vector<std::string>& warnings = req.warnings;
  const AdamWConfig& config = req.config;
  StatusOr<std::unique_ptr<Backend>> made = MakeRunBackend(
      *args->Get("backend"), req.in.layout, process, emulate, static_cast<double>(req.timeout));
  if (!made.ok()) return fail(made.status().message());
  Backend& backend = **made;
  const int32_t stage = static_cast<int32_t>(StageOf(req.in.layout, process, emulate));
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
      req.in.model, req.in.layout, &backend, config, static_cast<uint64_t>(req.seed), &timeline);
  if (!created.ok()) return fail("setup: " + created.status().message());
  Executor& exec = **created;
  const TokenSource& data = *req.data;
  if (req.resume_dir) {
    // Under the same layout this rank's state after req.first_step steps; under another, the
    // whole model's, of which LoadFullState takes this rank's share. The ranks agree on the
    // first that could not read its part, which alone prints, before any collective.
    Status loaded = Status::Ok();
    std::optional<FullState> full;
    if (req.reshard_from) {
      StatusOr<FullState> assembled = AssembleFullState(*req.resume_dir, req.first_step, req.reshard_from->world,
                                                        exec.shard().full_layout().total_size());
      if (assembled.ok()) {
        full = std::move(assembled).value();
      } else {
        loaded = assembled.status();
      }
    } else {
      StatusOr<std::string> state = ReadRankState(*req.resume_dir, req.first_step, me);
      loaded = state.ok() ? exec.LoadState(*state) : state.status();
      if (state.ok() && !loaded.ok()) {
        loaded = Status::Error(CheckpointDir(*req.resume_dir, req.first_step) + ", rank " + std::to_string(me) + ": " +
                               loaded.message());
      }
    }
    const int first_bad = FirstFailingRank(process, !loaded.ok());
    if (first_bad >= 0) {
      if (me == first_bad) {
        std::cerr << ("shardsim run: error: rank " + std::to_string(me) + ": --resume: " + loaded.message() + "\n");
        std::cerr.flush();
      }
      WaitForEveryRank(process);  // the line is out before another rank's MPI_Abort ends this one
      AbortRun(process, 1);
    }
    if (full) {
      if (Status st = exec.LoadFullState(*full); !st.ok()) return fail("--resume: " + st.message());
      if (me == 0) {
        std::cout << "resuming " << CheckpointDir(*req.resume_dir, req.first_step) << " (" << req.reshard_from->layout
                  << " on " << req.reshard_from->world << " ranks), re-sharded to this layout"
                  << (req.reshard_dropped_compression ? "; PowerSGD's error feedback and Q start afresh" : "")
                  << "\n";
      }
    }
  }
  // --save: after step s, every rank writes its state; once all have, rank 0 commits it.
  auto checkpoint = [&](int64_t done) -> Status {
    StatusOr<std::string> state = exec.SaveState();
    Status mine = state.ok() ? WriteRankState(*req.save_dir, done, me, *state) : state.status();
    if (mine.ok()) {  // where it sits in the whole model, for a resume under another layout
      mine = WriteRankMap(*req.save_dir, done, me, exec.SaveStateMap());
    }
    double failed = mine.ok() ? 0 : 1;
    SHARDSIM_RETURN_IF_ERROR(comm.AllReduceMaxHost(Group::kWorld, &failed, 1));
    SHARDSIM_RETURN_IF_ERROR(mine);
    if (failed > 0) return Status::Error("another rank could not write its state");
    if (me == 0) SHARDSIM_RETURN_IF_ERROR(CommitCheckpoint(*req.save_dir, CheckpointNow(req, world, done)));
    return Status::Ok();
  };
  if (req.first_step == req.steps) {  // --resume of another layout with --steps at its step: converts it
    if (Status st = checkpoint(req.steps); !st.ok()) return fail("--save: " + st.message());
    if (me == 0) std::cout << "re-sharded checkpoint written: " << CheckpointDir(*req.save_dir, req.steps) << "\n";
    EndRunProcess();
    return 0;
  }
  const int64_t gbs = req.in.layout.gbs, seq = req.in.model.seq_len;

  // --dump: the whole model before the first step and after the last (collectives: every
  // rank assembles), every step's global batch, the losses.
  const std::optional<std::string> dump_dir = args->Get("dump");
  if (dump_dir && emulate >= 0) return fail("--dump needs every rank of the layout; it cannot be used with --emulate-rank");
  ReferenceDump dump;
  if (dump_dir) {
    StatusOr<std::vector<float>> p = exec.FullParams();
    if (!p.ok()) return fail("--dump: assembling the initial parameters: " + p.status().message());
    dump.params_initial = std::move(p).value();
  }
  const std::vector<std::string> categories = CategoryKeys();
  std::vector<std::vector<double>> per_step;  // [step][category..., forward, backward]
  std::vector<double> step_s, losses, rates;
  std::vector<TimelineEvent> last_step;
  double last_step_start = 0;
  for (int64_t s = req.first_step; s < req.steps; ++s) {
    if (me == req.kill_rank && s == req.kill_step) std::raise(SIGKILL);  // a rank that dies mid-run
    if (me == req.stop_rank && s == req.stop_step) std::raise(SIGSTOP);  // one that stops
    timeline.Clear();
    const double t0 = backend.Now();
    rates.push_back(LearningRate(req.schedule, s));
    exec.SetLearningRate(rates.back());
    StatusOr<double> loss = exec.Step(data, s);
    if (!loss.ok()) {
      return fail("step " + std::to_string(s) + ", phase " + exec.phase() + ": " + loss.status().message());
    }
    if (Status st = CheckLoss(s, *loss); !st.ok()) {  // the same global loss on every rank
      if (me == 0) std::cerr << "shardsim run: error: " << st.message() << "\n";
      EndRunProcess();
      return 1;
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
    const int64_t done = s + 1;
    if (req.save_dir && ((req.save_every > 0 && done % req.save_every == 0) || done == req.steps)) {
      if (Status st = checkpoint(done); !st.ok()) {
        return fail("--save: the checkpoint after step " + std::to_string(done) + ": " + st.message());
      }
    }
  }
  if (dump_dir) {
    StatusOr<std::vector<float>> p = exec.FullParams();
    if (!p.ok()) return fail("--dump: assembling the final parameters: " + p.status().message());
    if (me == 0) {
      dump.params_final = std::move(p).value();
      dump.model = req.in.model;
      dump.source = "shardsim run";
      dump.layout = FormatLayout(req.in.layout);
      dump.dtype = req.in.layout.dtype == DType::kBf16 ? "bf16" : "fp32";
      dump.gbs = gbs;
      dump.mbs = req.in.layout.mbs;
      dump.seed = static_cast<uint64_t>(req.seed);
      dump.adamw = config;
      dump.losses = losses;
      dump.schedule = req.schedule;
      dump.learning_rates = rates;
      dump.data = args->Get("data").value_or("synthetic (MarkovStream)");
      for (int64_t s = 0; s < req.steps; ++s) dump.AddBatch(data.Batch(s * gbs, gbs, seq));
      if (Status st = WriteReferenceDump(*dump_dir, dump); !st.ok()) return fail("--dump: " + st.message());
    }
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
    trace = MeasuredChromeTrace(*gathered, stages, -origin, !req.in.hardware.gpu.overlaps_communication);
  }
  const int64_t ncat = static_cast<int64_t>(categories.size());
  auto at = [&](int r, int64_t j) { return all[r * width + j]; };
  int worst = 0;  // the rank with the highest peak memory
  for (int r = 1; r < world; ++r) {
    if (at(r, width - 2) > at(worst, width - 2)) worst = r;
  }
  const double median = Median(step_s);
  JsonWriter w;
  w.BeginObject().Field("model", req.in.model.name).Field("hardware", req.in.hardware.name);
  w.Field("backend", std::string(backend.name())).Field("world_size", req.in.layout.world());
  if (backend.name() == "cpu") {  // each rank's matrix-product threads, and whether OpenBLAS runs them
    w.Field("cpu_threads", static_cast<int64_t>(CpuThreads())).Field("cpu_blas", CpuProductsUseBlas());
  }
  if (emulate >= 0) w.Field("emulated_rank", emulate);
  // What the device reports in use after the run (this process's rank; -1 on a CPU host):
  // the tracked allocations' peak plus what no allocator tracks (CUDA context, cuBLAS).
  w.Field("device_memory_in_use_bytes", device_in_use);
  w.Field("layout", FormatLayout(req.in.layout)).Field("steps", req.steps).Field("first_step", req.first_step);
  w.Field("iteration_time_s", median).Field("tokens_per_s", static_cast<double>(gbs * seq) / median);
  w.Key("step_times_s").BeginArray();
  for (double t : step_s) w.Value(t);
  w.EndArray().Key("losses").BeginArray();
  for (double l : losses) w.Value(l);
  w.EndArray().Key("learning_rates").BeginArray();
  for (double r : rates) w.Value(r);
  w.EndArray();
  w.Field("data", args->Get("data").value_or("synthetic"));
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
      std::printf("shardsim run: %s, %s on %d ranks, %lld steps\n", req.in.model.name.c_str(),
                  FormatLayout(req.in.layout).c_str(), world, static_cast<long long>(req.steps));
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
