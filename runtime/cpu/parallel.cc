// See parallel.h. Two implementations of the same partition:
// - with libgomp (CMakeLists.txt SHARDSIM_OPENMP), one OpenMP parallel region a call, through
//   libgomp's C entry point GOMP_parallel (the libgomp manual's "Implementing the PARALLEL
//   construct"; called directly, so any compiler builds it without -fopenmp). oneDNN and the
//   OpenMP build of OpenBLAS run on the same team: on the small-17m model in bf16 with 2 threads on
//   2 cores (docs/validation/cpu-speed.md) a step took 0.79 s with three pools (this file's
//   std::thread pool, OpenBLAS's pthreads, libgomp's) spinning and yielding against each other,
//   0.58 s on one team. A BLAS call inside a region runs single-threaded (OpenBLAS's OpenMP build
//   checks omp_in_parallel), so a ParallelFor over independent products is safe.
// - without, a fixed pool of worker threads (threads - 1 of them), woken by a generation counter
//   for each ParallelFor and counted back in; started on the first call that needs it and grown
//   when more threads are asked for.
#include "runtime/cpu/parallel.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#if SHARDSIM_HAVE_GOMP
extern "C" {
// libgomp's ABI (libgomp/libgomp_g.h; stable since GCC 4.9) and the OpenMP API.
void GOMP_parallel(void (*fn)(void*), void* data, unsigned num_threads, unsigned flags);
int omp_get_thread_num(void);
int omp_get_num_threads(void);
void omp_set_num_threads(int num_threads);
}
#endif

namespace shardsim::runtime {
namespace {

std::atomic<int> g_threads{1};

#if SHARDSIM_HAVE_GOMP

void RunParts(int parts, const std::function<void(int)>& part) {
  // GOMP_parallel runs fn on `parts` threads (the caller is thread 0) and returns when all are
  // done; the team may be smaller when the runtime cannot start threads, so each thread takes
  // every parts-th part from its number on.
  struct Region {
    const std::function<void(int)>* part;
    int parts;
  } region{&part, parts};
  GOMP_parallel(
      [](void* data) {
        const Region& r = *static_cast<const Region*>(data);
        for (int i = omp_get_thread_num(); i < r.parts; i += omp_get_num_threads()) (*r.part)(i);
      },
      &region, static_cast<unsigned>(parts), 0);
}

#else

class Pool {
 public:
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : workers_) t.join();
  }

  // Runs part(i) for i in [1, parts) on the workers and part(0) on the calling thread; returns
  // when all are done.
  void Run(int parts, const std::function<void(int)>& part) {
    std::unique_lock<std::mutex> lock(mu_);
    while (static_cast<int>(workers_.size()) < parts - 1) {
      const int id = static_cast<int>(workers_.size()) + 1;
      workers_.emplace_back([this, id] { Work(id); });
    }
    part_ = &part;
    parts_ = parts;
    pending_ = parts - 1;
    ++generation_;
    lock.unlock();
    wake_.notify_all();
    part(0);
    lock.lock();
    done_.wait(lock, [this] { return pending_ == 0; });
    part_ = nullptr;
  }

 private:
  void Work(int id) {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      if (id >= parts_) continue;  // not needed this time
      const std::function<void(int)>* part = part_;
      lock.unlock();
      (*part)(id);
      lock.lock();
      if (--pending_ == 0) done_.notify_one();
    }
  }

  std::mutex mu_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> workers_;
  const std::function<void(int)>* part_ = nullptr;
  int parts_ = 0, pending_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

void RunParts(int parts, const std::function<void(int)>& part) {
  static Pool pool;
  pool.Run(parts, part);
}

#endif

}  // namespace

void SetParallelThreads(int threads) {
  g_threads.store(std::max(1, threads));
#if SHARDSIM_HAVE_GOMP
  omp_set_num_threads(std::max(1, threads));
#endif
}
int ParallelThreads() { return g_threads.load(); }

void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int64_t by_size = (n + std::max<int64_t>(grain, 1) - 1) / std::max<int64_t>(grain, 1);
  const int parts = static_cast<int>(std::min<int64_t>(g_threads.load(), by_size));
  if (parts <= 1) {
    fn(0, n);
    return;
  }
  const std::function<void(int)> part = [&](int i) { fn(n * i / parts, n * (i + 1) / parts); };
  RunParts(parts, part);
}

}  // namespace shardsim::runtime
