// See cuda_typed_kernels.h: the losses of CudaTypedKernels (cpu_kernels.cc's cross-entropy and
// Megatron's vocab-parallel cross-entropy), on either storage type. Statistics are fp32; logits
// and probabilities are T, read with Load and written with Store (rounded once).
#include <cuda_runtime.h>

#include <cmath>

#include "runtime/cuda/cuda_device.cuh"
#include "runtime/cuda/cuda_typed_kernels.h"

namespace shardsim::runtime {
namespace {

using cuda_device::BlockMax;
using cuda_device::BlocksFor;
using cuda_device::BlockSum;
using cuda_device::GlobalIndex;
using cuda_device::GlobalStride;
using cuda_device::kThreads;
using cuda_device::Load;
using cuda_device::RowBlocks;
using cuda_device::Store;
using cuda_device::ToDev;

// One block per row: p = exp(z - max) / sum; row_loss = log(sum) - (z[target] - max).
// probs may alias logits: z[target] is read before any write, the first two passes only read,
// and the last pass reads z[j] and writes p[j] in the same thread. The exponentials are
// recomputed in the last pass rather than stored unnormalised (so a bf16 p is rounded once);
// expf is deterministic, so on float p is bitwise what storing e and dividing gave.
template <typename E>
__global__ void SoftmaxCrossEntropyKernel(const E* logits, const int32_t* targets, E* probs,
                                          float* row_loss, int64_t v) {
  const int64_t i = blockIdx.x;
  const E* z = logits + i * v;
  E* p = probs + i * v;
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x) m = fmaxf(m, Load(z + j));
  const float max = BlockMax(m);
  const float shifted_target = Load(z + targets[i]) - max;
  float s = 0.0f;
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x) s += expf(Load(z + j) - max);
  const float sum = BlockSum(s);  // ends in a barrier: every thread has read z[target]
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x) Store(p + j, expf(Load(z + j) - max) / sum);
  if (threadIdx.x == 0) row_loss[i] = logf(sum) - shifted_target;
}

// d = per_token p, then d[target - vocab_begin] -= per_token when this rank holds the target.
// Element-wise, so dlogits may alias probs.
template <typename E>
__global__ void CrossEntropyBackwardKernel(const E* probs, const int32_t* targets, float per_token,
                                           E* dlogits, int64_t n, int64_t v, int64_t vocab_begin) {
  for (int64_t idx = GlobalIndex(); idx < n * v; idx += GlobalStride()) {
    const int64_t i = idx / v, j = idx % v;
    float d = per_token * Load(probs + idx);
    if (static_cast<int64_t>(targets[i]) - vocab_begin == j) d -= per_token;
    Store(dlogits + idx, d);
  }
}

// One block per row: (max, sum exp(z - max), z[target] if held here else 0), fp32.
template <typename E>
__global__ void VocabParallelStatsKernel(const E* logits, const int32_t* targets,
                                         int64_t vocab_begin, float* stats, int64_t v) {
  const int64_t i = blockIdx.x;
  const E* z = logits + i * v;
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x) m = fmaxf(m, Load(z + j));
  const float max = BlockMax(m);
  float s = 0.0f;
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x) s += expf(Load(z + j) - max);
  const float sum = BlockSum(s);
  if (threadIdx.x == 0) {
    const int64_t local = static_cast<int64_t>(targets[i]) - vocab_begin;
    stats[3 * i] = max;
    stats[3 * i + 1] = sum;
    stats[3 * i + 2] = local >= 0 && local < v ? Load(z + local) : 0.0f;
  }
}

template <typename E>
__global__ void SoftmaxFromLogSumExpKernel(E* logits, const float* lse, int64_t n, int64_t v) {
  for (int64_t idx = GlobalIndex(); idx < n * v; idx += GlobalStride()) {
    Store(logits + idx, expf(Load(logits + idx) - lse[idx / v]));
  }
}

}  // namespace

// Targets are not range-checked on the device (the CPU CHECKs them): an out-of-range target
// reads outside the row. The executor's targets come from the model's vocabulary.
template <typename T>
double CudaTypedKernels<T>::SoftmaxCrossEntropy(const T* logits, const int32_t* targets, T* probs,
                                                int64_t n, int64_t v) {
  if (n == 0) return 0;
  auto* row_loss = static_cast<float*>(
      ws_.Grow(CudaWorkspace::Slot::kRows, n * static_cast<int64_t>(sizeof(float))));
  SoftmaxCrossEntropyKernel<<<RowBlocks(n), kThreads, 0, ws_.stream()>>>(ToDev(logits), targets,
                                                                         ToDev(probs), row_loss, v);
  SHARDSIM_CUDA_CHECK_LAUNCH();
  return ws_.ReduceToHost(row_loss, n, /*square=*/false);
}

template <typename T>
void CudaTypedKernels<T>::CrossEntropyBackward(const T* probs, const int32_t* targets, float scale,
                                               int64_t mean_over, T* dlogits, int64_t n, int64_t v,
                                               int64_t vocab_begin) {
  CHECK(mean_over > 0) << mean_over;
  if (n * v == 0) return;
  const float per_token = scale / static_cast<float>(mean_over);
  CrossEntropyBackwardKernel<<<BlocksFor(n * v), kThreads, 0, ws_.stream()>>>(
      ToDev(probs), targets, per_token, ToDev(dlogits), n, v, vocab_begin);
  SHARDSIM_CUDA_CHECK_LAUNCH();
}

template <typename T>
void CudaTypedKernels<T>::VocabParallelStats(const T* logits, const int32_t* targets,
                                             int64_t vocab_begin, float* stats, int64_t n,
                                             int64_t v) {
  if (n == 0) return;
  VocabParallelStatsKernel<<<RowBlocks(n), kThreads, 0, ws_.stream()>>>(ToDev(logits), targets,
                                                                        vocab_begin, stats, v);
  SHARDSIM_CUDA_CHECK_LAUNCH();
}

template <typename T>
void CudaTypedKernels<T>::SoftmaxFromLogSumExp(T* logits, const float* lse, int64_t n, int64_t v) {
  if (n * v == 0) return;
  SoftmaxFromLogSumExpKernel<<<BlocksFor(n * v), kThreads, 0, ws_.stream()>>>(ToDev(logits), lse, n,
                                                                              v);
  SHARDSIM_CUDA_CHECK_LAUNCH();
}

// Explicit instantiations of the members defined here (the class itself is instantiated in
// cuda_typed_kernels.cu with the members defined there).
#define SHARDSIM_INSTANTIATE_CROSS_ENTROPY(T)                                                      \
  template double CudaTypedKernels<T>::SoftmaxCrossEntropy(const T*, const int32_t*, T*, int64_t,  \
                                                           int64_t);                               \
  template void CudaTypedKernels<T>::CrossEntropyBackward(const T*, const int32_t*, float,         \
                                                          int64_t, T*, int64_t, int64_t, int64_t); \
  template void CudaTypedKernels<T>::VocabParallelStats(const T*, const int32_t*, int64_t, float*, \
                                                        int64_t, int64_t);                         \
  template void CudaTypedKernels<T>::SoftmaxFromLogSumExp(T*, const float*, int64_t, int64_t);
SHARDSIM_INSTANTIATE_CROSS_ENTROPY(float)
SHARDSIM_INSTANTIATE_CROSS_ENTROPY(Bf16)
#undef SHARDSIM_INSTANTIATE_CROSS_ENTROPY

}  // namespace shardsim::runtime
