// ParallelFor: the CPU backend's element-wise kernels over the process's CPU threads
// (cpu_threads.h, `run --threads`). [0, n) is cut into at most that many contiguous parts of at
// least `grain` indices, part i = [n i / parts, n (i + 1) / parts), each run by one thread; the
// calling thread runs part 0 and waits for the others. Every index is computed by the same code
// whatever the number of parts, so a kernel whose iterations are independent gives the same bits
// on any thread count. With one thread (the default) fn runs inline, no thread is started. fn
// must not call ParallelFor itself.
#pragma once

#include <cstdint>
#include <functional>

namespace shardsim::runtime {

void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t begin, int64_t end)>& fn);

// The parts ParallelFor may use (cpu_threads.h sets it).
void SetParallelThreads(int threads);
int ParallelThreads();

}  // namespace shardsim::runtime
