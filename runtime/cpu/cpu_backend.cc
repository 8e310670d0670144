// See cpu_backend.h.
#include "runtime/cpu/cpu_backend.h"

#include <chrono>
#include <utility>

#include "src/util/check.h"

namespace shardsim::runtime {

CpuBackend::CpuBackend(std::unique_ptr<Collectives> comm) : comm_(std::move(comm)) {
  CHECK(comm_ != nullptr) << "CpuBackend needs collectives (LocalCollectives for one process)";
}

CpuBackend::CpuBackend(const CollectivesFactory& make) : comm_(make(memory_)) {
  CHECK(comm_ != nullptr) << "the collectives factory returned null";
}

double CpuBackend::Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace shardsim::runtime
