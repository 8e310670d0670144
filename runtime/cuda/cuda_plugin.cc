// The plugin's entry point (cuda_plugin.h): the CUDA backend with its collectives, built into
// libshardsim_cuda.so only (CMake target shardsim_cuda).
#include "runtime/cuda/cuda_plugin.h"

#include "runtime/backend/emulated_collectives.h"
#include "runtime/cuda/cuda_backend.h"
#if SHARDSIM_HAVE_NCCL_COLLECTIVES
#include "runtime/cuda/nccl_collectives.h"
#include "runtime/mpi/communicator.h"
#endif

namespace shardsim::runtime {
namespace {

StatusOr<std::unique_ptr<Backend>> CudaRunBackend(const Layout& l, const RunProcess& p, int64_t emulate_rank,
                                                  double timeout_s) {
  const int devices = CudaBackend::CudaDeviceCount();
  if (devices == 0) return Status::Error("--backend cuda: no CUDA device is visible");
  // One GPU per process: the node's r-th process on the node's GPU r.
  if (p.local_size > devices) {
    return Status::Error("--backend cuda: " + std::to_string(p.local_size) + " processes on this node but " +
                         std::to_string(devices) + " visible GPUs; launch one process per GPU");
  }
  const int device = p.local % devices;
  if (emulate_rank >= 0) {
    // The emulated collectives need the backend's memory: built in two steps.
    SHARDSIM_ASSIGN_OR_RETURN(std::unique_ptr<CudaBackend> b, CudaBackend::Create(device));
    Memory* memory = &b->memory();
    b->SetCollectives(std::make_unique<EmulatedCollectives>(l, emulate_rank, memory));
    return std::unique_ptr<Backend>(std::move(b));
  }
  if (p.world == 1 && l.world() == 1) {
    SHARDSIM_ASSIGN_OR_RETURN(std::unique_ptr<CudaBackend> b, CudaBackend::Create(device));
    return std::unique_ptr<Backend>(std::move(b));
  }
#if SHARDSIM_HAVE_NCCL_COLLECTIVES
  SHARDSIM_ASSIGN_OR_RETURN(ProcessGroups groups, ProcessGroups::Create(l, timeout_s));
  auto make = [&](cudaStream_t stream) -> StatusOr<std::unique_ptr<Collectives>> {
    SHARDSIM_ASSIGN_OR_RETURN(std::unique_ptr<NcclCollectives> c,
                              NcclCollectives::Create(std::move(groups), stream, timeout_s));
    return std::unique_ptr<Collectives>(std::move(c));
  };
  SHARDSIM_ASSIGN_OR_RETURN(std::unique_ptr<CudaBackend> b, CudaBackend::Create(device, make));
  return std::unique_ptr<Backend>(std::move(b));
#else
  (void)timeout_s;
  if (p.world != 1) {
    return Status::Error("this shardsim was built without MPI: it runs one process (or --emulate-rank), not " +
                         std::to_string(p.world));
  }
  return Status::Error("the layout needs " + std::to_string(l.world()) +
                       " ranks; without MPI and NCCL only --emulate-rank runs one of them");
#endif
}

}  // namespace
}  // namespace shardsim::runtime

// CudaRunBackendFn.
extern "C" bool shardsim_cuda_run_backend(const shardsim::Layout& l, const shardsim::runtime::RunProcess& p,
                                          int64_t emulate_rank, double timeout_s,
                                          std::unique_ptr<shardsim::runtime::Backend>* out, std::string* error) {
  shardsim::StatusOr<std::unique_ptr<shardsim::runtime::Backend>> b =
      shardsim::runtime::CudaRunBackend(l, p, emulate_rank, timeout_s);
  if (!b.ok()) {
    *error = b.status().message();
    return false;
  }
  *out = std::move(b).value();
  return true;
}
