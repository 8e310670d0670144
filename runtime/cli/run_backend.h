// How `shardsim run` gets its processes and its Backend: MPI when the binary has it (one rank
// per process under mpirun), otherwise one process; the CPU or the CUDA backend; and, for
// --emulate-rank, one rank of a larger layout run alone (backend/emulated_collectives.h).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "runtime/backend/backend.h"
#include "src/hardware/hardware_spec.h"
#include "src/layout/layout.h"
#include "src/model/model_spec.h"
#include "src/util/status.h"

namespace shardsim::runtime {

struct RunProcess {
  int world = 1;  // processes launched (mpirun -np); 1 without MPI
  int me = 0;
  int local = 0, local_size = 1;  // this process among those on its node
};

// Bounds the job's start-up by `timeout_s`: MPI_Init and the ranks' first agreement
// (FirstFailingRank). A rank that was never started, or stopped before MPI_Init, used to hang
// every other rank forever (--timeout covered only the waits of training). Started before
// StartRunProcess; Done() once the ranks agree. If the bound passes first, this process says so
// on stderr (naming its rank, from the launcher's environment) and exits with code 1; mpirun
// then ends the job, stopped ranks included.
class StartupWatchdog {
 public:
  explicit StartupWatchdog(double timeout_s);
  ~StartupWatchdog();  // Done()
  void Done();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

// This process's rank as the launcher announced it in the environment before MPI_Init
// (OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK or SLURM_PROCID), or -1.
int LauncherRank();

// MPI_Init when the binary has MPI; the world and this process's rank.
RunProcess StartRunProcess(int* argc, char*** argv);
// Ends every process of the job with `code` (MPI_Abort; alone, p.world 1, MPI is finalized
// instead, so a one-process run's error is its message and exit code, without MPI_Abort's
// banner): never a hang.
[[noreturn]] void AbortRun(const RunProcess& p, int code);
void EndRunProcess();
// Every process waits until all have reached it (MPI_Barrier; nothing without MPI or alone):
// lets one rank finish printing an error the ranks agreed on before any of them aborts the job
// (MPI_Abort from another rank would kill it mid-line).
void WaitForEveryRank(const RunProcess& p);
// Every process calls it, before any other communication: the lowest rank whose `failed` is
// true, or -1 when none failed (one MPI_Allreduce of the minimum; this process's answer alone
// without MPI). Lets the ranks that all fail alike print one message instead of N.
int FirstFailingRank(const RunProcess& p, bool failed);

// The backend ("cpu" or "cuda") for this process under `l`: the layout's process groups over
// MPI (NCCL for cuda) when the world has several processes, one-process collectives when it
// has one, EmulatedCollectives for rank `emulate_rank` (>= 0) of `l`. Errors say what is
// missing (a backend not built, no GPU, a world that does not match).
StatusOr<std::unique_ptr<Backend>> MakeRunBackend(const std::string& name, const Layout& l,
                                                  const RunProcess& p, int64_t emulate_rank,
                                                  double timeout_s);

// For the CPU backend, before anything is allocated: the memory model's figure for the ranks on
// this host (src/cost/memory.h, StageMemory of the largest stage, times the processes on the
// node; the runtime's measured peak is within 5 % of it, the mpi.MemoryMatchesTheModel tests)
// against the host's available memory (/proc/meminfo's MemAvailable). An error naming both
// when it does not fit, instead of allocating until the host fails; OK where the host does
// not say what is available.
Status CheckHostMemory(const ModelSpec& m, const HardwareSpec& hw, const Layout& l, const RunProcess& p,
                       int64_t emulate_rank);

// This process's pipeline stage (for the report).
int64_t StageOf(const Layout& l, const RunProcess& p, int64_t emulate_rank);

}  // namespace shardsim::runtime
