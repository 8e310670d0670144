// CpuBackend: the Backend of backend.h on CPUs: host memory, the Eigen kernels of
// runtime/cpu, and the collectives given (LocalCollectives for one process, MpiCollectives
// under mpirun).
#pragma once

#include <memory>
#include <string_view>

#include "runtime/backend/backend.h"
#include "runtime/cpu/cpu_kernels.h"
#include "runtime/cpu/host_memory.h"

namespace shardsim::runtime {

class CpuBackend : public Backend {
 public:
  // `comm` must be non-null and work on host pointers.
  explicit CpuBackend(std::unique_ptr<Collectives> comm);

  std::string_view name() const override { return "cpu"; }
  Memory& memory() override { return memory_; }
  Kernels& kernels() override { return kernels_; }
  Collectives& comm() override { return *comm_; }
  // steady_clock, in seconds; CPU kernels are synchronous, so the work is already done.
  double Now() override;

 private:
  HostMemory memory_;
  CpuKernels kernels_;
  std::unique_ptr<Collectives> comm_;
};

}  // namespace shardsim::runtime
