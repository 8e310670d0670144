// MPI test program: each rank's measured peak memory (the CPU backend's own allocation
// tracking, runtime/backend/backend.h) agrees with the simulator's memory model for the same
// plan (src/sim/simulator.h, the rank's pipeline stage) within 5 %, the bound. Model
// models/tiny.yaml on hardware/cpu-host.yaml; arguments: layout specs, each trained for 2 steps
// (the peak is reached in the first) with gbs 8, fp32 and the unfused attention the CPU backend
// runs. Prints one row per rank: measured, predicted, error. Under offload=optimizer the host
// memory the optimizer holds (Executor::host_peak_bytes) must match the model's `host` bytes
// within the same 5 % (the transfers' staging, not modelled, is the 2-5 % on tiny, whose
// embedding chunk is a large part of its parameters).
//
// Emulation (`run --emulate-rank`): after each real run, every rank also runs itself alone
// with EmulatedCollectives, and its peak must equal the real run's to the byte (the emulation
// holds exactly what the rank holds; with pipeline stages, see RunCase). A layout given as "emulate:SPEC" is larger than the
// world: rank 0 emulates each of its ranks in turn (on cpu-host's description widened to
// enough ranks) and checks each against the simulator within the same 5 %.
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "runtime/backend/emulated_collectives.h"
#include "runtime/cpu/cpu_backend.h"
#include "runtime/cpu/markov_stream.h"
#include "runtime/exec/executor.h"
#include "runtime/mpi/communicator.h"
#include "runtime/mpi/mpi_collectives.h"
#include "src/hardware/cluster.h"
#include "src/sim/simulator.h"
#include "tests/test_models.h"

namespace {

using namespace shardsim;
using namespace shardsim::runtime;

int failures = 0;

void Fail(int rank, const std::string& what) {
  ++failures;
  std::fprintf(stderr, "rank %d: FAILED %s\n", rank, what.c_str());
}

// Peak bytes of 2 training steps of `layout` on `backend`, or an error; `host_peak`, when given,
// receives the offloaded optimizer's host peak.
StatusOr<double> PeakOfTwoSteps(const ModelSpec& model, const Layout& layout, Backend* backend,
                                double* host_peak = nullptr) {
  SHARDSIM_ASSIGN_OR_RETURN(std::unique_ptr<Executor> exec,
                            Executor::Create(model, layout, backend, AdamWConfig{}, 1234, nullptr));
  const MarkovStream data({.vocab = model.vocab, .seed = 1234});
  for (int s = 0; s < 2; ++s) SHARDSIM_RETURN_IF_ERROR(exec->Step(data, s).status());
  if (host_peak != nullptr) *host_peak = static_cast<double>(exec->host_peak_bytes());
  return static_cast<double>(backend->memory().peak_bytes());
}

double PredictedHost(const SimResult& sim, int stage) {
  for (const RankResult& r : sim.ranks) {
    if (r.stage == stage) return r.peak_memory.host;
  }
  return -1;
}

double PredictedPeak(const SimResult& sim, int stage) {
  for (const RankResult& r : sim.ranks) {
    // Less the frameworks' 16-bit copy of the logits at the loss, which the runtime does not
    // make (it computes the loss in place on its own logits: runtime/exec/executor.cc).
    if (r.stage == stage) return r.peak_memory.total() - r.peak_memory.loss_logit_copy;
  }
  return -1;
}

// The layout of `text` with the test's defaults; "dtype=bf16" or "dtype=fp8" in it selects
// mixed precision. cpu-host lists no bf16 or fp8 rate (its GEMMs are fp32), so the simulator,
// which checks the dtype against the device, is given one: only memory is compared here.
StatusOr<Layout> Parse(const std::string& text, HardwareSpec& hw) {
  bool bf16 = false;
  for (DType d : {DType::kBf16, DType::kFp8}) {
    if (text.find("dtype=" + DTypeName(d)) == std::string::npos) continue;
    bf16 = true;
    hw.gpu.peak_flops[d] = hw.gpu.peak_flops.at(DType::kFp32);
  }
  const bool flash = text.find("attention=flash") != std::string::npos;
  return ParseLayout(text + ",gbs=8" + (flash ? "" : ",attention=unfused") + (bf16 ? "" : ",dtype=fp32"));
}

// "emulate:SPEC": every rank of a layout larger than the world, emulated alone by rank 0.
void EmulateAll(const ModelSpec& model, HardwareSpec hw, const std::string& text, int me) {
  StatusOr<Layout> parsed = Parse(text, hw);
  if (!parsed.ok()) return Fail(me, text + ": " + parsed.status().message());
  const int64_t world = parsed->tp * parsed->pp * parsed->cp * std::max<int64_t>(parsed->dp, 1);
  hw.node.gpus = world;  // cpu-host widened: only the memory model is compared
  StatusOr<Layout> layout = ResolveLayoutFor(*parsed, world, hw);
  if (!layout.ok()) return Fail(me, text + ": " + layout.status().message());
  StatusOr<SimResult> sim = Simulate(model, Cluster(hw), *layout, SimOptions{});
  if (!sim.ok()) return Fail(me, text + " simulate: " + sim.status().message());
  for (int64_t r = 0; r < world && me == 0; ++r) {
    CpuBackend backend(
        [&](Memory& m) { return std::make_unique<EmulatedCollectives>(*layout, r, &m); });
    StatusOr<double> measured = PeakOfTwoSteps(model, *layout, &backend);
    if (!measured.ok()) return Fail(me, text + " rank " + std::to_string(r) + ": " + measured.status().message());
    const int stage = static_cast<int>(CoordOf(*layout, r).pp);
    const double predicted = PredictedPeak(*sim, stage), error = predicted / *measured - 1;
    if (!(std::fabs(error) <= 0.05)) {
      Fail(me, text + " rank " + std::to_string(r) + ": predicted " + std::to_string(predicted) +
                   " B vs emulated " + std::to_string(*measured) + " B");
    }
    std::printf("| %lld (emulated) | `%s` | %lld | %d | %.3f MiB | %.3f MiB | %+.1f %% |\n",
                static_cast<long long>(world), text.c_str(), static_cast<long long>(r), stage,
                *measured / 1048576.0, predicted / 1048576.0, 100 * error);
  }
}

void RunCase(const ModelSpec& model, HardwareSpec hw, const std::string& text, int world,
             int me) {
  if (text.rfind("emulate:", 0) == 0) return EmulateAll(model, hw, text.substr(8), me);
  StatusOr<Layout> parsed = Parse(text, hw);
  if (!parsed.ok()) return Fail(me, text + ": " + parsed.status().message());
  StatusOr<Layout> layout = ResolveLayoutFor(*parsed, world, hw);
  if (!layout.ok()) return Fail(me, text + ": " + layout.status().message());
  // The prediction: the simulator, one rank per pipeline stage.
  const Cluster cluster(hw);
  StatusOr<SimResult> sim = Simulate(model, cluster, *layout, SimOptions{});
  if (!sim.ok()) return Fail(me, text + " simulate: " + sim.status().message());
  // The measurement.
  StatusOr<ProcessGroups> groups = ProcessGroups::Create(*layout, 60);
  if (!groups.ok()) return Fail(me, text + " groups: " + groups.status().message());
  const int stage = static_cast<int>(groups->coord.pp);
  CpuBackend backend(std::make_unique<MpiCollectives>(std::move(groups).value()));
  double host = 0;
  StatusOr<double> real = PeakOfTwoSteps(model, *layout, &backend, &host);
  if (!real.ok()) return Fail(me, text + ": " + real.status().message());
  const double measured = *real;
  // Offload: the host memory the optimizer holds against the model's `host` bytes, within the
  // same 5 % (both 0 without offload).
  const double host_predicted = PredictedHost(*sim, stage);
  if (host != 0 || host_predicted != 0) {
    const double host_error = host_predicted / host - 1;
    if (!(std::fabs(host_error) <= 0.05)) {
      Fail(me, text + ": host memory predicted " + std::to_string(host_predicted) + " B vs measured " +
                   std::to_string(host) + " B (" + std::to_string(100 * host_error) + " %)");
    }
    if (me == 0) {
      std::printf("| %d | `%s` host | %d | %d | %.3f MiB | %.3f MiB | %+.1f %% |\n", world, text.c_str(), me,
                  stage, host / 1048576.0, host_predicted / 1048576.0, 100 * host_error);
    }
  }
  const double predicted = PredictedPeak(*sim, stage);
  const double error = predicted / measured - 1;
  if (!(std::fabs(error) <= 0.05)) {
    Fail(me, text + ": predicted " + std::to_string(predicted) + " B vs measured " +
                 std::to_string(measured) + " B (" + std::to_string(100 * error) + " %)");
  }
  // The same rank emulated alone holds the same bytes. Exactly, without pipeline stages; with
  // them the real rank also keeps each sent activation until the peer receives it, while an
  // emulated send completes at once: the emulation may hold less, by at most 2 %.
  CpuBackend alone([&](Memory& m) { return std::make_unique<EmulatedCollectives>(*layout, me, &m); });
  StatusOr<double> emulated = PeakOfTwoSteps(model, *layout, &alone);
  if (!emulated.ok()) return Fail(me, text + " emulated: " + emulated.status().message());
  // Under expert parallelism the emulated peers route as this rank does (EmulatedCollectives'
  // host all-gather copies its routing), so its experts receive other rows than in the real run
  // (measured: 7.9 MB emulated against 6.6 MB real for dp=2,ep=2,zero=1): no comparison holds.
  const bool routed = model.moe.has_value() && layout->ep > 1;
  const bool same = routed            ? true
                    : layout->pp == 1 ? *emulated == measured
                                      : *emulated <= measured && *emulated >= 0.98 * measured;
  if (!same) {
    Fail(me, text + ": emulated peak " + std::to_string(*emulated) + " B vs real " +
                 std::to_string(measured) + " B");
  }
  std::vector<double> mine = {measured, predicted, static_cast<double>(stage)}, all(3 * world);
  MPI_Allgather(mine.data(), 3, MPI_DOUBLE, all.data(), 3, MPI_DOUBLE, MPI_COMM_WORLD);
  for (int r = 0; r < world && me == 0; ++r) {
    std::printf("| %d | `%s` | %d | %d | %.3f MiB | %.3f MiB | %+.1f %% |\n", world, text.c_str(), r,
                static_cast<int>(all[3 * r + 2]), all[3 * r] / 1048576.0,
                all[3 * r + 1] / 1048576.0, 100 * (all[3 * r + 1] / all[3 * r] - 1));
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int me = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  // "--model NAME" (first) picks another bundled model than tiny (tiny-moe for the MoE cases), or
  // "gpt4" below.
  int first = 1;
  std::string name = "tiny";
  if (argc >= 3 && std::string(argv[1]) == "--model") {
    name = argv[2];
    first = 3;
  }
  // "gpt4": the GPT-style test model (tests/test_models.h: learned positions, tied embeddings)
  // with 4 layers, so pipeline stages hold the tied table twice.
  ModelSpec gpt4 = testing::TinyGptModel();
  gpt4.layers = 4;
  StatusOr<ModelSpec> model = name == "gpt4" ? StatusOr<ModelSpec>(gpt4) : LoadModel(name);
  StatusOr<HardwareSpec> hw = LoadHardware("cpu-host");
  if (!model.ok() || !hw.ok()) {
    std::fprintf(stderr, "cannot load %s / cpu-host (run from the repository root)\n", name.c_str());
    MPI_Finalize();
    return 2;
  }
  for (int i = first; i < argc; ++i) RunCase(*model, *hw, argv[i], world, me);
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (me == 0) std::printf(total == 0 ? "PASS\n" : "FAIL (%d)\n", total);
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
