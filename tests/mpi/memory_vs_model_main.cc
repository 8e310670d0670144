// MPI test program: each rank's measured peak memory (the CPU backend's own allocation
// tracking, runtime/backend/backend.h) agrees with the simulator's memory model for the same
// plan (src/sim/simulator.h, the rank's pipeline stage) within 5 %, the bound. Model
// models/tiny.yaml on hardware/cpu-host.yaml; arguments: layout specs, each trained for 2 steps
// (the peak is reached in the first) with gbs 8, fp32 and the unfused attention the CPU backend
// runs. Prints one row per rank: measured, predicted, error.
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "runtime/cpu/cpu_backend.h"
#include "runtime/exec/executor.h"
#include "runtime/mpi/communicator.h"
#include "runtime/mpi/mpi_collectives.h"
#include "src/hardware/cluster.h"
#include "src/sim/simulator.h"

namespace {

using namespace shardsim;
using namespace shardsim::runtime;

int failures = 0;

void Fail(int rank, const std::string& what) {
  ++failures;
  std::fprintf(stderr, "rank %d: FAILED %s\n", rank, what.c_str());
}

void RunCase(const ModelSpec& model, const HardwareSpec& hw, const std::string& text, int world,
             int me) {
  StatusOr<Layout> parsed = ParseLayout(text + ",gbs=8,dtype=fp32,attention=unfused");
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
  StatusOr<std::unique_ptr<Executor>> exec =
      Executor::Create(model, *layout, &backend, AdamWConfig{}, 1234, nullptr);
  if (!exec.ok()) return Fail(me, text + " create: " + exec.status().message());
  const MarkovStream data({.vocab = model.vocab, .seed = 1234});
  for (int s = 0; s < 2; ++s) {
    StatusOr<double> loss = (*exec)->Step(data, s);
    if (!loss.ok()) return Fail(me, text + " step: " + loss.status().message());
  }
  double predicted = -1;
  for (const RankResult& r : sim->ranks) {
    if (r.stage == stage) predicted = r.peak_memory.total();
  }
  const double measured = static_cast<double>(backend.memory().peak_bytes());
  const double error = predicted / measured - 1;
  if (!(std::fabs(error) <= 0.05)) {
    Fail(me, text + ": predicted " + std::to_string(predicted) + " B vs measured " +
                 std::to_string(measured) + " B (" + std::to_string(100 * error) + " %)");
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
  StatusOr<ModelSpec> model = LoadModel("tiny");
  StatusOr<HardwareSpec> hw = LoadHardware("cpu-host");
  if (!model.ok() || !hw.ok()) {
    std::fprintf(stderr, "cannot load tiny / cpu-host (run from the repository root)\n");
    MPI_Finalize();
    return 2;
  }
  for (int i = 1; i < argc; ++i) RunCase(*model, *hw, argv[i], world, me);
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (me == 0) std::printf(total == 0 ? "PASS\n" : "FAIL (%d)\n", total);
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
