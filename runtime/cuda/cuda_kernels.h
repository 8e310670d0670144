// CudaKernels: the Kernels of backend.h on an NVIDIA GPU, fp32 storage: GEMMs through cuBLAS
// (fp32 compute, no TF32), everything else simple CUDA kernels (cuda_kernels.cu for the
// element-wise, norm, embedding, loss, reduction and optimizer kernels; cuda_attention.cu for
// the linear layer and attention). All work is enqueued on one stream, in call order.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/backend/backend.h"

namespace shardsim::runtime {

// Numerics against CpuKernels (tests/cuda/cuda_kernels_test.cc has the tolerances):
//  - element-wise kernels (GELU, SwiGLU, AdamW, Add, Scale, CrossEntropyBackward) do the CPU's
//    float operations in the same order; built with --fmad=false they differ from the CPU only
//    where CUDA's expf/tanhf/logf differ from glibc's (a few ulp); AdamW (sqrt and division
//    only) is expected bitwise equal;
//  - accumulations (embedding backward, dgain/dbias, column sums) add rows in the CPU's order,
//    one thread per column, so they are deterministic run to run (no atomics anywhere);
//  - row reductions (norms, softmax) and cuBLAS GEMMs sum in another order: fp32 rounding.
// Scalars returned to the host (losses, SumSquares) synchronise the stream; nothing else does.
class CudaKernels : public Kernels {
 public:
  // `stream` and `cublas` (already bound to `stream`) are owned by the caller (CudaBackend) and
  // outlive this object.
  CudaKernels(cudaStream_t stream, cublasHandle_t cublas);
  CudaKernels(const CudaKernels&) = delete;
  CudaKernels& operator=(const CudaKernels&) = delete;
  ~CudaKernels() override;

  void EmbeddingForward(const int32_t* tokens, const float* wte, int64_t vocab_begin, int64_t vocab,
                        const float* wpe, float* out, int64_t n, int64_t row0, int64_t seq,
                        int64_t c) override;
  void EmbeddingBackward(const float* dout, const int32_t* tokens, float* dwte, int64_t vocab_begin,
                         int64_t vocab, float* dwpe, int64_t n, int64_t row0, int64_t seq,
                         int64_t c) override;
  void NormForward(Norm kind, const float* x, const float* gain, const float* bias, float* out,
                   float* mean, float* rstd, int64_t n, int64_t c) override;
  void NormBackward(Norm kind, const float* dout, const float* x, const float* gain,
                    const float* mean, const float* rstd, float* dx, float* dgain, float* dbias,
                    int64_t n, int64_t c) override;
  void LinearForward(const float* in, const float* w, const float* bias, float* out, int64_t n,
                     int64_t k, int64_t m) override;
  void LinearBackward(const float* dout, const float* in, const float* w, float* din, float* dw,
                      float* db, int64_t n, int64_t k, int64_t m) override;
  // cos and sin of t * 10000^(-2i/d) computed in double in the kernel, as rope.cc's table.
  void RopeForward(float* x, int64_t b, int64_t t, int64_t heads, int64_t d) override;
  void RopeBackward(float* dx, int64_t b, int64_t t, int64_t heads, int64_t d) override;
  // Per (sequence, KV head): strided-batched cuBLAS GEMMs over the query heads sharing it,
  // and a causal row-softmax kernel; the full (T, T) score matrix is formed, as attention.cc.
  void AttentionForward(const float* q, const float* k, const float* v, float* probs, float* out,
                        const AttentionDims& dims) override;
  void AttentionBackward(const float* dout, const float* q, const float* k, const float* v,
                         const float* probs, float* dq, float* dk, float* dv,
                         const AttentionDims& dims) override;
  void GeluForward(const float* in, float* out, int64_t n) override;
  void GeluBackward(const float* dout, const float* in, float* din, int64_t n) override;
  void SwigluForward(const float* gate, const float* up, float* out, int64_t n) override;
  void SwigluBackward(const float* dout, const float* gate, const float* up, float* dgate,
                      float* dup, int64_t n) override;
  double SoftmaxCrossEntropy(const float* logits, const int32_t* targets, float* probs, int64_t n,
                             int64_t v) override;
  void CrossEntropyBackward(const float* probs, const int32_t* targets, float scale,
                            int64_t mean_over, float* dlogits, int64_t n, int64_t v,
                            int64_t vocab_begin) override;
  void VocabParallelStats(const float* logits, const int32_t* targets, int64_t vocab_begin,
                          float* stats, int64_t n, int64_t v) override;
  double VocabParallelLogSumExp(const float* all_stats, int64_t tp, float* lse, int64_t n) override;
  void SoftmaxFromLogSumExp(float* logits, const float* lse, int64_t n, int64_t v) override;
  void Add(float* dst, const float* src, int64_t n) override;
  void AddRowBias(float* out, const float* bias, int64_t n, int64_t c) override;
  void AddColumnSums(const float* x, float* out, int64_t n, int64_t c) override;
  void Scale(float* x, float s, int64_t n) override;
  double SumSquares(const float* x, int64_t n) override;
  void AdamW(float* p, const float* g, float* m, float* v, int64_t n, float grad_scale,
             const AdamWArgs& args) override;

 private:
  // Device scratch that grows on demand and is never shrunk: per-row losses (floats), the
  // reduction's per-block partial sums (doubles), and attention's dP/dS (group, T, T). Held
  // outside Memory's accounting: a few MB at the sizes the runtime trains.
  struct Scratch {
    void* data = nullptr;
    int64_t bytes = 0;
  };
  void* Grow(Scratch& s, int64_t bytes);
  // sum_i x[i] (or x[i]^2) in double over n floats, deterministic (fixed grid, fixed tree),
  // copied to the host after synchronising the stream.
  double ReduceToHost(const float* x, int64_t n, bool square);

  cudaStream_t stream_;
  cublasHandle_t cublas_;
  Scratch rows_, partials_, attention_;
  double* host_result_ = nullptr;  // pinned, one double
};

}  // namespace shardsim::runtime
