// CpuBf16Kernels: the TypedKernels<Bf16> of backend.h on host memory, by widening and
// narrowing around the fp32 kernels. It is the CPU's reference for bf16 numerics: the CUDA bf16
// kernels (bf16 inputs, fp32 accumulation, one rounding of each output) are tested against it.
//
// Contract of every call: each Bf16 input is widened (exactly) to a float copy; the fp32 kernel
// runs on the copies; each Bf16 output is rounded once, to nearest even (ToBf16). An
// accumulating output ("+=": din, dx, dq/dk/dv, dgate/dup, Add's dst, AddRowBias's out) and an
// in-place one (Rope) is widened first, so the fp32 kernel adds into (or rotates) the widened
// value, which is then rounded again. float* arguments (weight and bias gradients, norm and
// softmax statistics) go to the fp32 kernel as they are. Since every input is copied before
// any output is written, outputs may alias inputs (SoftmaxCrossEntropy with probs == logits,
// CrossEntropyBackward with dlogits == probs) as the fp32 kernels allow.
// Results are therefore exactly ToBf16(fp32 kernel on the widened inputs), element by element.
// Not thread-safe: the float copies are scratch buffers kept between calls.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/backend/backend.h"

namespace shardsim::runtime {

class CpuBf16Kernels : public TypedKernels<Bf16> {
 public:
  // `f32` (the CPU's fp32 kernels) does the arithmetic; it must outlive this.
  explicit CpuBf16Kernels(TypedKernels<float>& f32) : f32_(f32) {}

  void EmbeddingForward(const int32_t* tokens, const Bf16* wte, int64_t vocab_begin, int64_t vocab,
                        const Bf16* wpe, Bf16* out, int64_t n, int64_t row0, int64_t seq,
                        int64_t c) override;
  void EmbeddingBackward(const Bf16* dout, const int32_t* tokens, float* dwte, int64_t vocab_begin,
                         int64_t vocab, float* dwpe, int64_t n, int64_t row0, int64_t seq,
                         int64_t c) override;
  void NormForward(Norm kind, const Bf16* x, const Bf16* gain, const Bf16* bias, Bf16* out,
                   float* mean, float* rstd, int64_t n, int64_t c) override;
  void NormBackward(Norm kind, const Bf16* dout, const Bf16* x, const Bf16* gain, const float* mean,
                    const float* rstd, Bf16* dx, float* dgain, float* dbias, int64_t n,
                    int64_t c) override;
  void LinearForward(const Bf16* in, const Bf16* w, const Bf16* bias, Bf16* out, int64_t n,
                     int64_t k, int64_t m) override;
  void LinearBackward(const Bf16* dout, const Bf16* in, const Bf16* w, Bf16* din, float* dw,
                      float* db, int64_t n, int64_t k, int64_t m) override;
  void RopeForward(Bf16* x, int64_t b, int64_t t, int64_t heads, int64_t d, double base, int64_t pos0) override;
  void RopeBackward(Bf16* dx, int64_t b, int64_t t, int64_t heads, int64_t d, double base, int64_t pos0) override;
  void AttentionForward(const Bf16* q, const Bf16* k, const Bf16* v, Bf16* probs, Bf16* out,
                        const AttentionDims& dims) override;
  void AttentionBackward(const Bf16* dout, const Bf16* q, const Bf16* k, const Bf16* v,
                         const Bf16* probs, Bf16* dq, Bf16* dk, Bf16* dv,
                         const AttentionDims& dims) override;
  void FlashAttentionForward(const Bf16* q, const Bf16* k, const Bf16* v, float* lse, Bf16* out,
                             const AttentionDims& dims) override;
  void FlashAttentionBackward(const Bf16* dout, const Bf16* q, const Bf16* k, const Bf16* v,
                              const Bf16* out, const float* lse, Bf16* dq, Bf16* dk, Bf16* dv,
                              const AttentionDims& dims) override;
  void GeluForward(const Bf16* in, Bf16* out, int64_t n) override;
  void GeluBackward(const Bf16* dout, const Bf16* in, Bf16* din, int64_t n) override;
  void SwigluForward(const Bf16* gate, const Bf16* up, Bf16* out, int64_t n) override;
  void SwigluBackward(const Bf16* dout, const Bf16* gate, const Bf16* up, Bf16* dgate, Bf16* dup,
                      int64_t n) override;
  double SoftmaxCrossEntropy(const Bf16* logits, const int32_t* targets, Bf16* probs, int64_t n,
                             int64_t v) override;
  void CrossEntropyBackward(const Bf16* probs, const int32_t* targets, float scale,
                            int64_t mean_over, Bf16* dlogits, int64_t n, int64_t v,
                            int64_t vocab_begin) override;
  void VocabParallelStats(const Bf16* logits, const int32_t* targets, int64_t vocab_begin,
                          float* stats, int64_t n, int64_t v) override;
  void SoftmaxFromLogSumExp(Bf16* logits, const float* lse, int64_t n, int64_t v) override;
  void Add(Bf16* dst, const Bf16* src, int64_t n) override;
  void AddRowBias(Bf16* out, const Bf16* bias, int64_t n, int64_t c) override;
  void AddColumnSums(const Bf16* x, float* out, int64_t n, int64_t c) override;
  void GatherRows(const Bf16* src, const int32_t* idx, Bf16* dst, int64_t rows, int64_t c) override;
  void ScatterAddRows(const Bf16* src, const int32_t* idx, Bf16* dst, int64_t rows, int64_t c) override;
  void ScaleRows(Bf16* x, const float* scale, int64_t rows, int64_t c) override;
  void RowDots(const Bf16* a, const Bf16* b, double* out, int64_t rows, int64_t c) override;

 private:
  class Scratch;  // one call's float copies (cpu_bf16_kernels.cc)

  TypedKernels<float>& f32_;
  std::vector<std::vector<float>> buffers_;  // reused by every call; grown as needed
};

}  // namespace shardsim::runtime
