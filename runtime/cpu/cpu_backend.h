// CpuBackend: the Backend of backend.h on CPUs: host memory, the Eigen kernels of
// runtime/cpu, and the collectives given (LocalCollectives for one process, MpiCollectives
// under mpirun, EmulatedCollectives for one rank of a larger layout).
#pragma once

#include <functional>
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
  // Collectives that need the backend's memory (EmulatedCollectives): made by `make`.
  using CollectivesFactory = std::function<std::unique_ptr<Collectives>(Memory&)>;
  explicit CpuBackend(const CollectivesFactory& make);

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
