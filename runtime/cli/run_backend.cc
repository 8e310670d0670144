// See run_backend.h.
#include "runtime/cli/run_backend.h"

#include <cstdlib>
#include <utility>

#include "runtime/backend/emulated_collectives.h"
#include "runtime/backend/local_collectives.h"
#include "runtime/cpu/cpu_backend.h"
#include "src/layout/placement.h"

#if SHARDSIM_HAVE_MPI
#include <mpi.h>

#include "runtime/mpi/communicator.h"
#include "runtime/mpi/mpi_collectives.h"
#endif
#if SHARDSIM_HAVE_CUDA
#include "runtime/cuda/cuda_backend.h"
#if SHARDSIM_HAVE_NCCL_COLLECTIVES
#include "runtime/cuda/nccl_collectives.h"
#endif
#endif

namespace shardsim::runtime {

RunProcess StartRunProcess(int* argc, char*** argv) {
  RunProcess p;
#if SHARDSIM_HAVE_MPI
  MPI_Init(argc, argv);
  MPI_Comm_size(MPI_COMM_WORLD, &p.world);
  MPI_Comm_rank(MPI_COMM_WORLD, &p.me);
  // The processes sharing this node (MPI-3's shared-memory split, whatever launched them:
  // mpirun, or srun under Slurm), so each takes its own GPU of the node, as nccl-tests does.
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, p.me, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &p.local);
  MPI_Comm_size(node, &p.local_size);
  MPI_Comm_free(&node);
#else
  (void)argc;
  (void)argv;
#endif
  return p;
}

void AbortRun(int code) {
#if SHARDSIM_HAVE_MPI
  MPI_Abort(MPI_COMM_WORLD, code);
#endif
  std::exit(code);
}

void EndRunProcess() {
#if SHARDSIM_HAVE_MPI
  MPI_Finalize();
#endif
}

int64_t StageOf(const Layout& l, const RunProcess& p, int64_t emulate_rank) {
  return CoordOf(l, emulate_rank >= 0 ? emulate_rank : p.me).pp;
}

namespace {

// The layout's groups over MPI, for a world of several processes.
#if SHARDSIM_HAVE_MPI
StatusOr<ProcessGroups> Groups(const Layout& l, double timeout_s) {
  return ProcessGroups::Create(l, timeout_s);
}
#endif

[[maybe_unused]] Status NeedsMpi(const RunProcess& p) {
  if (p.world == 1) return Status::Ok();
  return Status::Error("this shardsim was built without MPI: it runs one process (or "
                       "--emulate-rank), not " + std::to_string(p.world));
}

StatusOr<std::unique_ptr<Backend>> CpuRunBackend(const Layout& l, const RunProcess& p,
                                                 int64_t emulate_rank, double timeout_s) {
  if (emulate_rank >= 0) {
    return std::unique_ptr<Backend>(new CpuBackend([&](Memory& m) -> std::unique_ptr<Collectives> {
      return std::make_unique<EmulatedCollectives>(l, emulate_rank, &m);
    }));
  }
  if (p.world == 1 && l.world() == 1) {
    return std::unique_ptr<Backend>(new CpuBackend(std::make_unique<LocalCollectives>()));
  }
#if SHARDSIM_HAVE_MPI
  SHARDSIM_ASSIGN_OR_RETURN(ProcessGroups groups, Groups(l, timeout_s));
  return std::unique_ptr<Backend>(new CpuBackend(std::make_unique<MpiCollectives>(std::move(groups))));
#else
  (void)timeout_s;
  SHARDSIM_RETURN_IF_ERROR(NeedsMpi(p));
  return Status::Error("the layout needs " + std::to_string(l.world()) +
                       " ranks; without MPI only --emulate-rank runs one of them");
#endif
}

#if SHARDSIM_HAVE_CUDA
StatusOr<std::unique_ptr<Backend>> CudaRunBackend(const Layout& l, const RunProcess& p,
                                                  int64_t emulate_rank, double timeout_s) {
  const int devices = CudaBackend::CudaDeviceCount();
  if (devices == 0) return Status::Error("--backend cuda: no CUDA device is visible");
  // One GPU per process: the node's r-th process on the node's GPU r.
  if (p.local_size > devices) {
    return Status::Error("--backend cuda: " + std::to_string(p.local_size) +
                         " processes on this node but " + std::to_string(devices) +
                         " visible GPUs; launch one process per GPU");
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
  SHARDSIM_ASSIGN_OR_RETURN(ProcessGroups groups, Groups(l, timeout_s));
  auto make = [&](cudaStream_t stream) -> StatusOr<std::unique_ptr<Collectives>> {
    SHARDSIM_ASSIGN_OR_RETURN(std::unique_ptr<NcclCollectives> c,
                              NcclCollectives::Create(std::move(groups), stream, timeout_s));
    return std::unique_ptr<Collectives>(std::move(c));
  };
  SHARDSIM_ASSIGN_OR_RETURN(std::unique_ptr<CudaBackend> b, CudaBackend::Create(device, make));
  return std::unique_ptr<Backend>(std::move(b));
#else
  (void)timeout_s;
  SHARDSIM_RETURN_IF_ERROR(NeedsMpi(p));
  return Status::Error("the layout needs " + std::to_string(l.world()) +
                       " ranks; without MPI and NCCL only --emulate-rank runs one of them");
#endif
}
#endif

}  // namespace

StatusOr<std::unique_ptr<Backend>> MakeRunBackend(const std::string& name, const Layout& l,
                                                  const RunProcess& p, int64_t emulate_rank,
                                                  double timeout_s) {
  if (emulate_rank >= 0) {
    if (p.world != 1) {
      return Status::Error("--emulate-rank runs one process, not " + std::to_string(p.world) +
                           " (drop mpirun)");
    }
    if (emulate_rank >= l.world()) {
      return Status::Error("--emulate-rank " + std::to_string(emulate_rank) + ": the layout has " +
                           std::to_string(l.world()) + " ranks (0 to " +
                           std::to_string(l.world() - 1) + ")");
    }
  }
  if (name == "cpu") return CpuRunBackend(l, p, emulate_rank, timeout_s);
#if SHARDSIM_HAVE_CUDA
  if (name == "cuda") return CudaRunBackend(l, p, emulate_rank, timeout_s);
#else
  if (name == "cuda") {
    return Status::Error("--backend cuda: this shardsim was built without the CUDA backend "
                         "(CMake found no nvcc/CUDA toolkit/NCCL; see docs/cli.md)");
  }
#endif
  return Status::Error("--backend " + name + ": expected cpu or cuda");
}

}  // namespace shardsim::runtime
