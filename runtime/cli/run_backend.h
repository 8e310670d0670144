// How `shardsim run` gets its processes and its Backend: MPI when the binary has it (one rank
// per process under mpirun), otherwise one process; the CPU or the CUDA backend; and, for
// --emulate-rank, one rank of a larger layout run alone (backend/emulated_collectives.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "runtime/backend/backend.h"
#include "src/layout/layout.h"
#include "src/util/status.h"

namespace shardsim::runtime {

struct RunProcess {
  int world = 1;  // processes launched (mpirun -np); 1 without MPI
  int me = 0;
  int local = 0, local_size = 1;  // this process among those on its node
};

// MPI_Init when the binary has MPI; the world and this process's rank.
RunProcess StartRunProcess(int* argc, char*** argv);
// Ends every process of the job with `code` (MPI_Abort), or this one: never a hang.
[[noreturn]] void AbortRun(int code);
void EndRunProcess();

// The backend ("cpu" or "cuda") for this process under `l`: the layout's process groups over
// MPI (NCCL for cuda) when the world has several processes, one-process collectives when it
// has one, EmulatedCollectives for rank `emulate_rank` (>= 0) of `l`. Errors say what is
// missing (a backend not built, no GPU, a world that does not match).
StatusOr<std::unique_ptr<Backend>> MakeRunBackend(const std::string& name, const Layout& l,
                                                  const RunProcess& p, int64_t emulate_rank,
                                                  double timeout_s);

// This process's pipeline stage (for the report).
int64_t StageOf(const Layout& l, const RunProcess& p, int64_t emulate_rank);

}  // namespace shardsim::runtime
