// Forward and backward of one tensor-parallel block (see tensor_parallel_block.h): the
// single-process block of runtime/cpu/transformer_block.cc on this rank's shard, with the TP
// group's all-reduce as its partial-sum hook.
#include "runtime/mpi/tensor_parallel_block.h"

#include <chrono>

namespace shardsim::runtime {

Status TpGroup::AllReduceSum(float* data, size_t n) {
  const auto t0 = std::chrono::steady_clock::now();
  Status st = comm->AllReduceSum(data, n);
  comm_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return st;
}

Status TpBlockForward(const ModelSpec& m, const BlockWeights<float>& w,
                      const RopeTable<float>& rope, TpGroup& tp, const float* x, float* out,
                      BlockActivations<float>& a, int64_t b, int64_t t) {
  return BlockForward<float>(m, w, rope, x, out, a, b, t,
                             [&tp](float* data, size_t n) { return tp.AllReduceSum(data, n); });
}

Status TpBlockBackward(const ModelSpec& m, const BlockWeights<float>& w,
                       const BlockWeights<float>& dw, const RopeTable<float>& rope, TpGroup& tp,
                       const float* x, const BlockActivations<float>& a, float* dresid,
                       BlockScratch<float>& s, int64_t b, int64_t t) {
  return BlockBackward<float>(m, w, dw, rope, x, a, dresid, s, b, t,
                              [&tp](float* data, size_t n) { return tp.AllReduceSum(data, n); });
}

}  // namespace shardsim::runtime
