// The TP group's timed all-reduce (see tensor_parallel_block.h).
#include "runtime/mpi/tensor_parallel_block.h"

#include <chrono>

namespace shardsim::runtime {

Status TpGroup::AllReduceSum(float* data, size_t n) {
  const auto t0 = std::chrono::steady_clock::now();
  Status st = comm->AllReduceSum(data, n);
  comm_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return st;
}

}  // namespace shardsim::runtime
