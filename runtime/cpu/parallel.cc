// See parallel.h. A fixed pool of worker threads (threads - 1 of them), woken by a generation
// counter for each ParallelFor and counted back in; started on the first call that needs it and
// grown when more threads are asked for.
#include "runtime/cpu/parallel.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace shardsim::runtime {
namespace {

std::atomic<int> g_threads{1};

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

Pool& ThePool() {
  static Pool pool;
  return pool;
}

}  // namespace

void SetParallelThreads(int threads) { g_threads.store(std::max(1, threads)); }
int ParallelThreads() { return g_threads.load(); }

void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int64_t by_size = (n + std::max<int64_t>(grain, 1) - 1) / std::max<int64_t>(grain, 1);
  const int parts = static_cast<int>(std::min<int64_t>(g_threads.load(), by_size));
  if (parts <= 1) {
    fn(0, n);
    return;
  }
  const std::function<void(int)> part = [&](int i) {
    fn(n * i / parts, n * (i + 1) / parts);
  };
  ThePool().Run(parts, part);
}

}  // namespace shardsim::runtime
