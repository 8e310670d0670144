// See run_backend.h.
#include "runtime/cli/run_backend.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>
#include <utility>

#include "runtime/backend/emulated_collectives.h"
#include "runtime/backend/local_collectives.h"
#include "runtime/cpu/cpu_backend.h"
#include "src/cost/memory.h"
#include "src/layout/placement.h"
#include "src/util/units.h"

#if SHARDSIM_HAVE_MPI
#include <mpi.h>

#include "runtime/mpi/communicator.h"
#include "runtime/mpi/mpi_collectives.h"
#endif
#if SHARDSIM_HAVE_CUDA
#include <dlfcn.h>
#include <unistd.h>

#include "runtime/cuda/cuda_plugin.h"
#endif

namespace shardsim::runtime {

int LauncherRank() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"}) {
    if (const char* v = std::getenv(var)) return std::atoi(v);
  }
  return -1;
}

StartupWatchdog::StartupWatchdog(double timeout_s) {
  thread_ = std::thread([this, timeout_s] {
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_for(lock, std::chrono::duration<double>(timeout_s), [this] { return done_; })) return;
    const int rank = LauncherRank();
    std::fprintf(stderr,
                 "shardsim run: error: rank %s: the job did not start within %g s (--timeout): a rank was not "
                 "started, is stopped, or cannot reach the others; ending\n",
                 rank >= 0 ? std::to_string(rank).c_str() : "?", timeout_s);
    std::fflush(stderr);
    std::_Exit(1);  // MPI_Abort needs an initialized MPI, which is what did not happen
  });
}

void StartupWatchdog::Done() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

StartupWatchdog::~StartupWatchdog() { Done(); }

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

void AbortRun(const RunProcess& p, int code) {
#if SHARDSIM_HAVE_MPI
  if (p.world > 1) MPI_Abort(MPI_COMM_WORLD, code);
  MPI_Finalize();
#else
  (void)p;
#endif
  std::exit(code);
}

int FirstFailingRank(const RunProcess& p, bool failed) {
  int first = failed ? p.me : std::numeric_limits<int>::max();
#if SHARDSIM_HAVE_MPI
  if (p.world > 1) {
    const int mine = first;
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  }
#endif
  return first == std::numeric_limits<int>::max() ? -1 : first;
}

void WaitForEveryRank(const RunProcess& p) {
#if SHARDSIM_HAVE_MPI
  if (p.world > 1) MPI_Barrier(MPI_COMM_WORLD);
#else
  (void)p;
#endif
}

void EndRunProcess() {
#if SHARDSIM_HAVE_MPI
  MPI_Finalize();
#endif
}

int64_t StageOf(const Layout& l, const RunProcess& p, int64_t emulate_rank) {
  return CoordOf(l, emulate_rank >= 0 ? emulate_rank : p.me).pp;
}

Status CheckHostMemory(const ModelSpec& m, const HardwareSpec& hw, const Layout& l, const RunProcess& p,
                       int64_t emulate_rank) {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  double available_kib = -1;
  while (meminfo >> key) {
    double value = 0;
    std::string unit;
    if (!(meminfo >> value >> unit)) break;
    if (key == "MemAvailable:") available_kib = value;  // "MemAvailable: N kB": KiB (proc(5))
  }
  if (available_kib < 0) return Status::Ok();
  double largest = 0;
  for (int64_t s = 0; s < l.pp; ++s) {
    // The device's bytes and, under offload, the host's (on this backend both are host memory).
    const MemoryBreakdown stage = StageMemory(m, hw, l, s);
    largest = std::max(largest, stage.total() + stage.host);
  }
  const int ranks_here = emulate_rank >= 0 ? 1 : p.local_size;
  const double need = largest * ranks_here;
  const double available = available_kib * 1024;
  if (need <= available) return Status::Ok();
  char msg[512];
  std::snprintf(msg, sizeof msg,
                "the memory model puts %.2f GiB on a rank (its largest pipeline stage) and this host runs %d "
                "rank(s): %.2f GiB, more than the %.2f GiB the host has available (/proc/meminfo "
                "MemAvailable); not started. Split the model over more ranks (tp, pp, or dp with zero) or "
                "choose a smaller model",
                largest / kGiB, ranks_here, need / kGiB, available / kGiB);
  return Status::Error(msg);
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
// libshardsim_cuda.so (cuda_plugin.h): $SHARDSIM_CUDA_PLUGIN, else beside this binary.
std::string CudaPluginPath() {
  if (const char* env = std::getenv("SHARDSIM_CUDA_PLUGIN"); env && *env) return env;
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  std::string dir = n > 0 ? std::string(exe, static_cast<size_t>(n)) : std::string(".");
  dir = dir.substr(0, dir.rfind('/') == std::string::npos ? 0 : dir.rfind('/'));
  return (dir.empty() ? "." : dir) + "/" + kCudaPluginFile;
}

// Loads the plugin once (its code backs the backends it makes: never unloaded) and asks it.
StatusOr<std::unique_ptr<Backend>> CudaRunBackend(const Layout& l, const RunProcess& p, int64_t emulate_rank,
                                                  double timeout_s) {
  static CudaRunBackendFn make = nullptr;
  if (!make) {
    const std::string path = CudaPluginPath();
    void* plugin = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!plugin) {
      const char* why = ::dlerror();
      return Status::Error("--backend cuda: cannot load the CUDA backend " + path + ": " + (why ? why : "dlopen failed") +
                           " (it is built beside the binary; SHARDSIM_CUDA_PLUGIN names another path)");
    }
    make = reinterpret_cast<CudaRunBackendFn>(::dlsym(plugin, kCudaPluginSymbol));
    if (!make) return Status::Error("--backend cuda: " + path + " has no " + kCudaPluginSymbol);
  }
  std::unique_ptr<Backend> backend;
  std::string error;
  if (!make(l, p, emulate_rank, timeout_s, &backend, &error)) return Status::Error(error);
  return backend;
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
