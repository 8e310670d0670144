// CudaTypedKernels<T>: backend.h's TypedKernels on an NVIDIA GPU for one storage type T (float,
// or Bf16 under mixed precision). Instantiated for both; CudaKernels (cuda_kernels.h) owns one of
// each. Sources: cuda_typed_kernels.cu (embedding, norms, RoPE, GELU, SwiGLU, element-wise),
// cuda_cross_entropy.cu (the losses), cuda_attention.cu (the linear layer and attention, cuBLAS).
#pragma once

#include <cstdint>

#include "runtime/backend/backend.h"
#include "runtime/cuda/cuda_workspace.h"

namespace shardsim::runtime {

// Numerics. T = float, against CpuKernels().f32() (tests/cuda/cuda_kernels_test.cc has the
// tolerances):
//  - element-wise kernels (GELU, SwiGLU, Add, CrossEntropyBackward) do the CPU's float
//    operations in the same order; built with --fmad=false they differ from the CPU only where
//    CUDA's expf/tanhf/logf differ from glibc's (a few ulp);
//  - the embedding backward adds each address's rows in the CPU's order (bitwise its sums);
//    dgain/dbias and column sums add rows in chunks of 64, then the chunks in order: another
//    order than the CPU's, but a fixed one, so every sum is deterministic run to run (no
//    atomics anywhere);
//  - row reductions (norms, softmax) and cuBLAS GEMMs sum in another order: fp32 rounding.
// T = Bf16: the same kernels and the same fp32 arithmetic on widened elements, each T output
// rounded once (an accumulating one: widened, added to in fp32, rounded), as the CPU's bf16
// reference (widen, run the fp32 kernel, round). Where the GPU rounds an intermediate to bf16,
// the comment at the function says so (attention's probabilities and dS feed bf16 GEMMs).
// GEMMs: bf16 tensor-op GEMMs with fp32 accumulation (cuda_gemm.h).
// Scalars returned to the host (losses) synchronise the stream; nothing else does.
template <typename T>
class CudaTypedKernels final : public TypedKernels<T> {
 public:
  explicit CudaTypedKernels(CudaWorkspace& workspace) : ws_(workspace) {}
  CudaTypedKernels(const CudaTypedKernels&) = delete;
  CudaTypedKernels& operator=(const CudaTypedKernels&) = delete;

  void EmbeddingForward(const int32_t* tokens, const T* wte, int64_t vocab_begin, int64_t vocab,
                        const T* wpe, T* out, int64_t n, int64_t row0, int64_t seq,
                        int64_t c) override;
  void EmbeddingBackward(const T* dout, const int32_t* tokens, float* dwte, int64_t vocab_begin,
                         int64_t vocab, float* dwpe, int64_t n, int64_t row0, int64_t seq,
                         int64_t c) override;
  void NormForward(Norm kind, const T* x, const T* gain, const T* bias, T* out, float* mean,
                   float* rstd, int64_t n, int64_t c) override;
  void NormBackward(Norm kind, const T* dout, const T* x, const T* gain, const float* mean,
                    const float* rstd, T* dx, float* dgain, float* dbias, int64_t n,
                    int64_t c) override;
  // bf16 with a bias: the bias rows are written into out first and the GEMM adds into them
  // (beta 1), so out is rounded once; fp32: GEMM, then AddRowBias, as before.
  void LinearForward(const T* in, const T* w, const T* bias, T* out, int64_t n, int64_t k,
                     int64_t m) override;
  void LinearBackward(const T* dout, const T* in, const T* w, T* din, float* dw, float* db,
                      int64_t n, int64_t k, int64_t m) override;
  // cos and sin of t * 10000^(-2i/d) computed in double in the kernel, as rope.cc's table.
  void RopeForward(T* x, int64_t b, int64_t t, int64_t heads, int64_t d, double base, int64_t pos0) override;
  void RopeBackward(T* dx, int64_t b, int64_t t, int64_t heads, int64_t d, double base, int64_t pos0) override;
  // Per (sequence, KV head): strided-batched cuBLAS GEMMs over the query heads sharing it, and
  // a causal row-softmax kernel; the full (T, T) score matrix is formed, as attention.cc.
  // bf16: scores, dP and the softmax in fp32 scratch; probs (stored) and dS (fed to the dQ/dK
  // GEMMs) rounded to bf16, as FlashAttention's bf16 backward does. dK, dV sum their query
  // heads' terms in fp32 and are rounded once.
  void AttentionForward(const T* q, const T* k, const T* v, T* probs, T* out,
                        const AttentionDims& dims) override;
  void AttentionBackward(const T* dout, const T* q, const T* k, const T* v, const T* probs, T* dq,
                         T* dk, T* dv, const AttentionDims& dims) override;
  // The same steps per (sequence, KV head) with P in the workspace (not a caller buffer): the
  // forward's softmax also writes lse; the backward recomputes S by GEMM and P = exp(S - lse),
  // and takes D = dO . O from the saved out. Workspace 8 group T^2 bytes (fp32) or 6 group T^2
  // (bf16), see cuda_attention.cu. bf16: P and dS rounded to bf16 for the GEMMs, as above.
  void FlashAttentionForward(const T* q, const T* k, const T* v, float* lse, T* out,
                             const AttentionDims& dims) override;
  void FlashAttentionBackward(const T* dout, const T* q, const T* k, const T* v, const T* out,
                              const float* lse, T* dq, T* dk, T* dv,
                              const AttentionDims& dims) override;
  void GeluForward(const T* in, T* out, int64_t n) override;
  void GeluBackward(const T* dout, const T* in, T* din, int64_t n) override;
  void SwigluForward(const T* gate, const T* up, T* out, int64_t n) override;
  void SwigluBackward(const T* dout, const T* gate, const T* up, T* dgate, T* dup,
                      int64_t n) override;
  double SoftmaxCrossEntropy(const T* logits, const int32_t* targets, T* probs, int64_t n,
                             int64_t v) override;
  void CrossEntropyBackward(const T* probs, const int32_t* targets, float scale, int64_t mean_over,
                            T* dlogits, int64_t n, int64_t v, int64_t vocab_begin) override;
  void VocabParallelStats(const T* logits, const int32_t* targets, int64_t vocab_begin,
                          float* stats, int64_t n, int64_t v) override;
  void SoftmaxFromLogSumExp(T* logits, const float* lse, int64_t n, int64_t v) override;
  void Add(T* dst, const T* src, int64_t n) override;
  void AddRowBias(T* out, const T* bias, int64_t n, int64_t c) override;
  void AddColumnSums(const T* x, float* out, int64_t n, int64_t c) override;
  void GatherRows(const T* src, const int32_t* idx, T* dst, int64_t rows, int64_t c) override;
  void ScatterAddRows(const T* src, const int32_t* idx, T* dst, int64_t rows, int64_t c) override;
  void ScaleRows(T* x, const float* scale, int64_t rows, int64_t c) override;
  void RowDots(const T* a, const T* b, double* out, int64_t rows, int64_t c) override;

 private:
  CudaWorkspace& ws_;
};

}  // namespace shardsim::runtime
