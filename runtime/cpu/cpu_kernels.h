// CpuKernels: the Kernels of backend.h on host memory, single-threaded. Its fp32 kernels
// (itself, as TypedKernels<float>) call the templated Eigen operators of runtime/cpu
// (embedding.h, norm.h, linear.h, ...), so the executor's fp32 math on the CPU is the same code
// the single-process Transformer runs; its bf16 kernels (CpuBf16Kernels) widen to those.
#pragma once

#include <cstdint>
#include <map>

#include "runtime/backend/backend.h"
#include "runtime/cpu/cpu_bf16_kernels.h"
#include "runtime/cpu/cpu_fp8_kernels.h"
#include "runtime/cpu/rope.h"

namespace shardsim::runtime {

class CpuKernels : public Kernels, public TypedKernels<float> {
 public:
  CpuKernels() : bf16_(*this) {}
  CpuKernels(const CpuKernels&) = delete;  // bf16_ refers to this object
  CpuKernels& operator=(const CpuKernels&) = delete;

  TypedKernels<float>& f32() override { return *this; }
  TypedKernels<Bf16>& bf16() override { return bf16_; }
  Fp8Kernels* fp8() override { return &fp8_; }

  // TypedKernels<float>.
  // Token ids outside [vocab_begin, vocab_begin + vocab) belong to another TP rank: zero rows.
  void EmbeddingForward(const int32_t* tokens, const float* wte, int64_t vocab_begin,
                        int64_t vocab, const float* wpe, float* out, int64_t n, int64_t row0,
                        int64_t seq, int64_t c) override;
  void EmbeddingBackward(const float* dout, const int32_t* tokens, float* dwte,
                         int64_t vocab_begin, int64_t vocab, float* dwpe, int64_t n, int64_t row0,
                         int64_t seq, int64_t c) override;
  void NormForward(Norm kind, const float* x, const float* gain, const float* bias, float* out,
                   float* mean, float* rstd, int64_t n, int64_t c) override;
  void NormBackward(Norm kind, const float* dout, const float* x, const float* gain,
                    const float* mean, const float* rstd, float* dx, float* dgain, float* dbias,
                    int64_t n, int64_t c) override;
  void LinearForward(const float* in, const float* w, const float* bias, float* out, int64_t n,
                     int64_t k, int64_t m) override;
  void LinearBackward(const float* dout, const float* in, const float* w, float* din, float* dw,
                      float* db, int64_t n, int64_t k, int64_t m) override;
  void RopeForward(float* x, int64_t b, int64_t t, int64_t heads, int64_t d, double base, int64_t pos0) override;
  void RopeBackward(float* dx, int64_t b, int64_t t, int64_t heads, int64_t d, double base, int64_t pos0) override;
  void AttentionForward(const float* q, const float* k, const float* v, float* probs, float* out,
                        const AttentionDims& dims) override;
  void AttentionBackward(const float* dout, const float* q, const float* k, const float* v,
                         const float* probs, float* dq, float* dk, float* dv,
                         const AttentionDims& dims) override;
  void FlashAttentionForward(const float* q, const float* k, const float* v, float* lse,
                             float* out, const AttentionDims& dims) override;
  void FlashAttentionBackward(const float* dout, const float* q, const float* k, const float* v,
                              const float* out, const float* lse, float* dq, float* dk, float* dv,
                              const AttentionDims& dims) override;
  void GeluForward(const float* in, float* out, int64_t n) override;
  void GeluBackward(const float* dout, const float* in, float* din, int64_t n) override;
  void SwigluForward(const float* gate, const float* up, float* out, int64_t n) override;
  void SwigluBackward(const float* dout, const float* gate, const float* up, float* dgate,
                      float* dup, int64_t n) override;
  // Per row the formula of CrossEntropyForward (cross_entropy.cc), so the sum divided by n is
  // the mean that function returns; safe in place (probs == logits).
  double SoftmaxCrossEntropy(const float* logits, const int32_t* targets, float* probs, int64_t n,
                             int64_t v) override;
  // The float operations of CrossEntropyBackward on a zeroed dlogits, so results are bitwise
  // those of the single-process model when mean_over == n.
  void CrossEntropyBackward(const float* probs, const int32_t* targets, float scale,
                            int64_t mean_over, float* dlogits, int64_t n, int64_t v,
                            int64_t vocab_begin) override;
  void VocabParallelStats(const float* logits, const int32_t* targets, int64_t vocab_begin,
                          float* stats, int64_t n, int64_t v) override;
  void SoftmaxFromLogSumExp(float* logits, const float* lse, int64_t n, int64_t v) override;
  void Add(float* dst, const float* src, int64_t n) override;
  void AddRowBias(float* out, const float* bias, int64_t n, int64_t c) override;
  void AddColumnSums(const float* x, float* out, int64_t n, int64_t c) override;
  void GatherRows(const float* src, const int32_t* idx, float* dst, int64_t rows, int64_t c) override;
  void ScatterAddRows(const float* src, const int32_t* idx, float* dst, int64_t rows, int64_t c) override;
  void ScaleRows(float* x, const float* scale, int64_t rows, int64_t c) override;
  void RowDots(const float* a, const float* b, double* out, int64_t rows, int64_t c) override;

  // Kernels' fp32-only operations.
  double VocabParallelLogSumExp(const float* all_stats, int64_t tp, float* lse,
                                int64_t n) override;
  void Scale(float* x, float s, int64_t n) override;
  double SumSquares(const float* x, int64_t n) override;
  // The per-element float arithmetic of AdamW<float>::StepRange (adamw.cc) in the same order,
  // so a step is bitwise that of AdamW<float> given the same factors.
  void AdamW(float* p, const float* g, float* m, float* v, int64_t n, float grad_scale,
             const AdamWArgs& args) override;
  void CastToBf16(const float* src, Bf16* dst, int64_t n) override;  // ToBf16 per element

 private:
  // The RoPE table for head_dim d, covering the longest sequence seen so far (a position's
  // angles do not depend on the table's length).
  const RopeTable<float>& Rope(int64_t t, int64_t d, double base);

  std::map<std::pair<int64_t, double>, RopeTable<float>> rope_;  // by head_dim and base
  CpuBf16Kernels bf16_;                       // widens to this object's fp32 kernels
  CpuFp8Kernels fp8_;
};

}  // namespace shardsim::runtime
