// Backend: what the executor (runtime/exec) needs from the hardware, behind one interface, so
// the same executor trains on CPUs (Eigen + MPI, runtime/cpu + runtime/mpi) and on GPUs (CUDA +
// cuBLAS + NCCL, issue 6). Four parts:
//   Memory      allocation with the runtime's own accounting (current and peak bytes by the
//               simulator's categories), and copies between host and device;
//   Kernels     the math, on device pointers, fp32 or bf16 storage (mixed precision);
//   Collectives the layout's process groups: all-reduce, reduce-scatter, all-gather, and
//               non-blocking sends with blocking receives on the pipeline group;
//   Clock       wall time once the work issued so far has finished.
// Every pointer a Kernels or Collectives call takes is device memory from Memory::Allocate,
// except the `double* host` arguments (small host-side reductions: losses, norms).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/backend/bf16.h"
#include "runtime/backend/fp8.h"
#include "src/model/model_spec.h"
#include "src/util/status.h"

namespace shardsim::runtime {

// ---------------------------------------------------------------------------------------------
// Memory

// The simulator's memory categories (src/cost/memory.h MemoryBreakdown), so measured and
// predicted breakdowns line up key by key.
enum class MemoryKind : uint8_t { kWeights, kGradients, kOptimizer, kActivations, kOther };
inline constexpr int kMemoryKindCount = 5;
const char* MemoryKindName(MemoryKind kind);  // "weights", "gradients", ... as in simulate --json

struct MemoryUsage {
  std::array<int64_t, kMemoryKindCount> bytes{};
  int64_t total() const;
  int64_t operator[](MemoryKind k) const { return bytes[static_cast<int>(k)]; }
};

class Memory;

// One allocation, owned: returned to its Memory when destroyed, so it must not outlive that
// Memory. Move-only. A zero-byte allocation is an empty buffer.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  void* data() const { return data_; }
  float* f() const { return static_cast<float*>(data_); }
  template <typename T>
  T* as() const { return static_cast<T*>(data_); }
  int32_t* i32() const { return static_cast<int32_t*>(data_); }
  int64_t bytes() const { return bytes_; }
  int64_t floats() const { return bytes_ / static_cast<int64_t>(sizeof(float)); }
  MemoryKind kind() const { return kind_; }
  bool empty() const { return data_ == nullptr; }
  void Reset();  // frees now

 private:
  friend class Memory;
  Memory* owner_ = nullptr;
  void* data_ = nullptr;
  int64_t bytes_ = 0;
  MemoryKind kind_ = MemoryKind::kOther;
  bool counted_ = true;
};

class Memory {
 public:
  virtual ~Memory() = default;

  // `bytes` of device memory counted under `kind`; an error naming `what` and the sizes when
  // the device cannot provide it. Contents are unspecified (Zero them if needed).
  StatusOr<DeviceBuffer> Allocate(MemoryKind kind, int64_t bytes, std::string_view what);
  StatusOr<DeviceBuffer> AllocateFloats(MemoryKind kind, int64_t n, std::string_view what) {
    return Allocate(kind, n * static_cast<int64_t>(sizeof(float)), what);
  }
  template <typename T>
  StatusOr<DeviceBuffer> AllocateOf(MemoryKind kind, int64_t n, std::string_view what) {
    return Allocate(kind, n * static_cast<int64_t>(sizeof(T)), what);
  }
  // Device memory that is not the training's own and is left out of the accounting: the
  // scratch that stands in for other ranks when one rank is emulated alone.
  StatusOr<DeviceBuffer> AllocateUncounted(int64_t bytes, std::string_view what);

  // Bytes held now, and the breakdown at the moment the total was highest since ResetPeak.
  const MemoryUsage& current() const { return current_; }
  const MemoryUsage& at_peak() const { return at_peak_; }
  int64_t peak_bytes() const { return at_peak_.total(); }
  void ResetPeak() { at_peak_ = current_; }

  virtual void CopyToDevice(void* dst, const void* host_src, int64_t bytes) = 0;
  virtual void CopyToHost(void* host_dst, const void* src, int64_t bytes) = 0;
  virtual void Copy(void* dst, const void* src, int64_t bytes) = 0;  // device to device
  virtual void Zero(void* dst, int64_t bytes) = 0;

 protected:
  virtual void* RawAllocate(int64_t bytes) = 0;  // nullptr when out of memory
  virtual void RawFree(void* p) = 0;

 private:
  friend class DeviceBuffer;
  void Release(DeviceBuffer& b);
  MemoryUsage current_;
  MemoryUsage at_peak_;
};

// ---------------------------------------------------------------------------------------------
// Kernels. Shapes: n rows (tokens), row-major. Backward functions ADD into weight gradients and,
// where stated, into input gradients (llm.c's convention), so micro-batches accumulate.

struct AttentionDims {
  int64_t batch = 0;     // B
  int64_t seq = 0;       // T, queries per sequence
  int64_t heads = 0;     // query heads on this rank
  int64_t kv_heads = 0;  // KV heads on this rank, divides heads
  int64_t head_dim = 0;  // d
  // Context parallelism (runtime/exec/context_parallel.h): T queries of each sequence, at
  // positions q_offset.., against all Tk = kv_seq keys (k, v: (B, Tk, KV, d); probs
  // (B, H, T, Tk)); query t sees keys 0..q_offset + t. 0, 0: the T queries' own keys.
  int64_t kv_seq = 0;
  int64_t q_offset = 0;
  int64_t keys() const { return kv_seq > 0 ? kv_seq : seq; }
};

// One AdamW update of a contiguous range whose tensors share one weight-decay setting
// (runtime/cpu/adamw.h has the formula). Factors computed by the caller.
struct AdamWArgs {
  float lr = 0, beta1 = 0, beta2 = 0, eps = 0;
  float weight_decay = 0;       // 0 for norms and biases
  float bias_correction1 = 1;   // 1 / (1 - beta1^t)
  float bias_correction2 = 1;   // 1 / (1 - beta2^t)
};

// The kernels of one storage type T of activations and working weights: float, or Bf16 under
// mixed precision (Micikevicius et al. 2018, "Mixed Precision Training"; Megatron-LM's bf16
// mode). Arithmetic is fp32 whatever T is: T inputs are widened, products and sums accumulate
// in fp32, T outputs are rounded once (to nearest even). Weight and bias gradients, norm
// statistics and softmax statistics are always fp32 (`float*`): Megatron accumulates bf16
// training's gradients in fp32 (arguments.py: "bfloat16 requires gradient accumulation and
// all-reduce to be done in fp32"). An accumulating T output ("+=") is widened, added to in
// fp32 and rounded again.
template <typename T>
class TypedKernels {
 public:
  virtual ~TypedKernels() = default;

  // Vocab-parallel embedding (Megatron's VocabParallelEmbedding): wte holds rows
  // [vocab_begin, vocab_begin + vocab) of the table. out (n, c) = wte[tokens[i] - vocab_begin]
  // for tokens in that range, else 0; plus wpe[(row0 + i) % seq] when wpe is given (learned
  // positions). Rows are tokens of (B, seq) sequences; row0 is the first row's index there.
  // Backward adds into the rows of dwte this rank holds, and into dwpe when given.
  virtual void EmbeddingForward(const int32_t* tokens, const T* wte, int64_t vocab_begin,
                                int64_t vocab, const T* wpe, T* out, int64_t n, int64_t row0,
                                int64_t seq, int64_t c) = 0;
  virtual void EmbeddingBackward(const T* dout, const int32_t* tokens, float* dwte,
                                 int64_t vocab_begin, int64_t vocab, float* dwpe, int64_t n,
                                 int64_t row0, int64_t seq, int64_t c) = 0;
  // LayerNorm (bias non-null) or RMSNorm per `kind`; mean is unused by RMSNorm. dx += .
  virtual void NormForward(Norm kind, const T* x, const T* gain, const T* bias, T* out,
                           float* mean, float* rstd, int64_t n, int64_t c) = 0;
  virtual void NormBackward(Norm kind, const T* dout, const T* x, const T* gain,
                            const float* mean, const float* rstd, T* dx, float* dgain,
                            float* dbias, int64_t n, int64_t c) = 0;
  // out (n, m) = in (n, k) w^T + bias; w is (m, k). Backward: din += dout w (din may be null),
  // dw += dout^T in, db += column sums of dout (db may be null). dw may be null too (`in` is
  // then unused and may be null): overlap_tp's split backward computes din alone first and the
  // weight gradients (din null) while din's TP reduction is in flight.
  virtual void LinearForward(const T* in, const T* w, const T* bias, T* out, int64_t n,
                             int64_t k, int64_t m) = 0;
  virtual void LinearBackward(const T* dout, const T* in, const T* w, T* din, float* dw,
                              float* db, int64_t n, int64_t k, int64_t m) = 0;
  // x (B, T, heads, d) rotated in place by RoPE of `base` (the model's rotary_base: RopeBaseOf,
  // runtime/cpu/rope.h), positions pos0..pos0+T-1 (pos0 > 0 for a context-parallel chunk of
  // each sequence); backward applies the inverse rotation to a gradient in place.
  virtual void RopeForward(T* x, int64_t b, int64_t t, int64_t heads, int64_t d, double base, int64_t pos0) = 0;
  virtual void RopeBackward(T* dx, int64_t b, int64_t t, int64_t heads, int64_t d, double base, int64_t pos0) = 0;
  // Causal GQA attention; probs (B, H, T, Tk) saved (AttentionDims). Backward adds into dq, dk, dv.
  virtual void AttentionForward(const T* q, const T* k, const T* v, T* probs, T* out,
                                const AttentionDims& dims) = 0;
  virtual void AttentionBackward(const T* dout, const T* q, const T* k, const T* v,
                                 const T* probs, T* dq, T* dk, T* dv,
                                 const AttentionDims& dims) = 0;
  // The layout's attention=flash: the same attention without storing the probabilities.
  // Forward keeps only each row's log-sum-exp of the scaled, masked scores, lse (B, H, T) fp32;
  // backward recomputes P = exp(S - lse) from q and k, and takes D_i = dO_i . O_i from the
  // saved output (FlashAttention, Dao et al. 2022, Alg. 1 line 13 and Alg. 2 / Appendix B.4).
  // Backward adds into dq, dk, dv. Workspace, if any, is the backend's own (uncounted).
  virtual void FlashAttentionForward(const T* q, const T* k, const T* v, float* lse, T* out,
                                     const AttentionDims& dims) = 0;
  virtual void FlashAttentionBackward(const T* dout, const T* q, const T* k, const T* v,
                                      const T* out, const float* lse, T* dq, T* dk, T* dv,
                                      const AttentionDims& dims) = 0;
  virtual void GeluForward(const T* in, T* out, int64_t n) = 0;
  // Backward of GELU and SwiGLU adds into din (dgate, dup).
  virtual void GeluBackward(const T* dout, const T* in, T* din, int64_t n) = 0;
  virtual void SwigluForward(const T* gate, const T* up, T* out, int64_t n) = 0;
  virtual void SwigluBackward(const T* dout, const T* gate, const T* up, T* dgate, T* dup,
                              int64_t n) = 0;
  // Row softmax of logits into probs (may be the same buffer); returns sum_i -log p[i, t_i]
  // in nats, accumulated in double.
  virtual double SoftmaxCrossEntropy(const T* logits, const int32_t* targets, T* probs,
                                     int64_t n, int64_t v) = 0;
  // dlogits = (scale / mean_over) (probs - onehot(targets - vocab_begin)), overwriting
  // (dlogits may be probs); v columns, the vocabulary [vocab_begin, vocab_begin + v).
  virtual void CrossEntropyBackward(const T* probs, const int32_t* targets, float scale,
                                    int64_t mean_over, T* dlogits, int64_t n, int64_t v,
                                    int64_t vocab_begin) = 0;
  // Vocab-parallel softmax cross-entropy (Megatron's vocab_parallel_cross_entropy), in three
  // steps around an all-gather of the statistics over the TP group:
  //   stats (n, 3) per row of this rank's logits (n, v): (max m_r, sum exp(z - m_r), the
  //     target's logit if vocab_begin <= target < vocab_begin + v, else 0);
  //   from all ranks' stats (tp, n, 3): lse (n) = M + log sum_r s_r exp(m_r - M), M = max m_r
  //     (Kernels::VocabParallelLogSumExp, fp32 only);
  //   probs = exp(logits - lse) in place.
  virtual void VocabParallelStats(const T* logits, const int32_t* targets, int64_t vocab_begin,
                                  float* stats, int64_t n, int64_t v) = 0;
  virtual void SoftmaxFromLogSumExp(T* logits, const float* lse, int64_t n, int64_t v) = 0;
  virtual void Add(T* dst, const T* src, int64_t n) = 0;  // dst += src
  virtual void AddRowBias(T* out, const T* bias, int64_t n, int64_t c) = 0;
  // out (c) += column sums of x (n, c): a bias's gradient.
  virtual void AddColumnSums(const T* x, float* out, int64_t n, int64_t c) = 0;
  // A mixture-of-experts layer's token permutations (runtime/cpu/row_ops.h), on (rows, c)
  // buffers: dst row i = src row idx[i]; dst row idx[i] += src row i, i in order; x row i *=
  // scale[i]; out[i] = a row i . b row i, summed in double left to right. idx, scale and out are
  // device arrays.
  virtual void GatherRows(const T* src, const int32_t* idx, T* dst, int64_t rows, int64_t c) = 0;
  virtual void ScatterAddRows(const T* src, const int32_t* idx, T* dst, int64_t rows, int64_t c) = 0;
  virtual void ScaleRows(T* x, const float* scale, int64_t rows, int64_t c) = 0;
  virtual void RowDots(const T* a, const T* b, double* out, int64_t rows, int64_t c) = 0;
};

// fp8 GEMMs as Transformer Engine runs them under dtype=fp8 (runtime/backend/fp8.h: E4M3 weights
// and activations, E5M2 gradients, current scaling). A tensor's codes and the factor that turns
// their values back into the tensor's.
struct Fp8Tensor {
  const uint8_t* codes = nullptr;
  float scale_inv = 1;
  Fp8Format format = Fp8Format::kE4M3;
};

class Fp8Kernels {
 public:
  virtual ~Fp8Kernels() = default;
  // The largest magnitude of x's `count` elements (0 for none), for current scaling's factor
  // (Fp8Scale), taken over all the tensors one TE module quantizes as one.
  virtual float Amax(const Bf16* x, int64_t count) = 0;
  // x (rows, cols) times `scale`, converted: codes (rows, cols) and, when `transposed` is not
  // null, the codes of x^T (cols, rows) (TE's cast-transpose, which the backward's GEMMs read).
  // Either output may be null.
  virtual void Quantize(const Bf16* x, int64_t rows, int64_t cols, Fp8Format format, float scale, uint8_t* codes,
                        uint8_t* transposed) = 0;
  // codes (rows, cols) -> their transpose (cols, rows): a saved fp8 input's rows, gathered,
  // made the weight gradient's operand.
  virtual void Transpose(const uint8_t* codes, int64_t rows, int64_t cols, uint8_t* out) = 0;
  // (n, m) = the sum over `terms` of a (n, k) . b (m, k)^T, the codes' values multiplied and
  // summed in fp32 and each term times its two scale_inv: written into out_bf16 (rounded once;
  // `bias` (m) and, when `accumulate`, what is there added first), or added into out_f32,
  // whichever is not null. Several terms: one TE module's fused GEMM over the concatenation
  // of its projections (Q, K and V's input gradients into one tensor).
  struct Product {
    Fp8Tensor a, b;
    int64_t k = 0;
  };
  virtual void Gemm(const std::vector<Product>& terms, int64_t n, int64_t m, Bf16* out_bf16, bool accumulate,
                    float* out_f32, const Bf16* bias) = 0;
};

// All of a backend's kernels: one TypedKernels per storage type, and the fp32-only ones
// (optimizer, norms of gradients, the loss's log-sum-exp, the master-to-working-copy cast).
class Kernels {
 public:
  virtual ~Kernels() = default;
  virtual TypedKernels<float>& f32() = 0;
  virtual TypedKernels<Bf16>& bf16() = 0;
  // The fp8 GEMMs, or null where the backend has none (the executor then refuses dtype=fp8).
  virtual Fp8Kernels* fp8() { return nullptr; }
  template <typename T>
  TypedKernels<T>& of();

  // See TypedKernels::VocabParallelStats: returns sum_i (lse_i - z_target_i) in nats,
  // accumulated in double.
  virtual double VocabParallelLogSumExp(const float* all_stats, int64_t tp, float* lse,
                                        int64_t n) = 0;
  virtual void Scale(float* x, float s, int64_t n) = 0;
  virtual double SumSquares(const float* x, int64_t n) = 0;  // in double
  // m, v, p updated from g (g * grad_scale is the clipped gradient).
  virtual void AdamW(float* p, const float* g, float* m, float* v, int64_t n, float grad_scale,
                     const AdamWArgs& args) = 0;
  // dst (n) = src rounded to bf16 (nearest even): mixed precision's working copy of the fp32
  // master weights, refreshed after each optimizer step.
  virtual void CastToBf16(const float* src, Bf16* dst, int64_t n) = 0;
};

template <>
inline TypedKernels<float>& Kernels::of<float>() { return f32(); }
template <>
inline TypedKernels<Bf16>& Kernels::of<Bf16>() { return bf16(); }

// ---------------------------------------------------------------------------------------------
// Collectives

// kDp is the dense weights' replicas, DP x CP (placement.h's DpCpGroupOf, Megatron-Core's data-
// parallel group with context parallelism): every gradient reduction and ZeRO shard spans it.
// It is the DP group when cp = 1. kCp exchanges keys and values (context_parallel.h). The
// experts' groups fold a stage's TP x CP x DP ranks (placement.h ExpertCoordOf): kEp, the ranks
// that split a MoE layer's experts between them; kEdp, the ranks holding the same experts
// (Layout::edp), over which their gradients are reduced; kEtp, the ranks an expert's MLP is split
// over where that is not the TP group (Layout::etp set apart from tp; of one rank otherwise).
enum class Group : uint8_t { kWorld, kTp, kCp, kDp, kPp, kEp, kEdp, kEtp };
inline constexpr int kGroupCount = 8;
const char* GroupName(Group g);

class Collectives {
 public:
  virtual ~Collectives() = default;
  virtual int rank(Group g) const = 0;
  virtual int size(Group g) const = 0;

  // Device data of `type` (kFp32 or kBf16: float or Bf16 elements; a bf16 sum rounds each
  // partial sum to bf16, as NCCL's does). n counts elements. The typed templates below are
  // what callers use.
  //   AllReduce: sum in place.
  //   ReduceScatter: in holds size(g) blocks of n; block i summed over the group lands in
  //     rank i's out (n).
  //   AllGather: each rank's n elements, concatenated in rank order into out (size(g) * n).
  virtual Status AllReduce(Group g, void* data, int64_t n, DType type) = 0;
  virtual Status ReduceScatter(Group g, const void* in, void* out, int64_t n, DType type) = 0;
  virtual Status AllGatherOf(Group g, const void* in, void* out, int64_t n, DType type) = 0;
  //   AllToAllV: this rank's `in` holds size() blocks in member order, send[p] elements for
  //     member p; `out` receives recv[p] from each member p, in member order (MPI_Alltoallv).
  //     The counts are host arrays of size() entries and must agree pairwise across members.
  virtual Status AllToAllV(Group g, const void* in, const int64_t* send, void* out, const int64_t* recv,
                           DType type) = 0;
  // Non-blocking send of n elements to rank `peer` of `g`; `data` must stay alive and
  // unchanged until the handle completes (Wait, or Test returning true). Messages are matched
  // by tag (MPI); a backend without tags (NCCL) matches them in issue order within each class
  // tag % 2, so a caller issues each class in the same order on both sides.
  virtual StatusOr<int64_t> Send(Group g, const void* data, int64_t n, DType type, int peer,
                                 int tag) = 0;
  virtual Status Receive(Group g, void* data, int64_t n, DType type, int peer, int tag) = 0;

  template <typename T>
  Status AllReduceSum(Group g, T* data, int64_t n) { return AllReduce(g, data, n, DTypeOf<T>()); }
  template <typename T>
  Status ReduceScatterSum(Group g, const T* in, T* out, int64_t n) {
    return ReduceScatter(g, in, out, n, DTypeOf<T>());
  }
  template <typename T>
  Status AllGather(Group g, const T* in, T* out, int64_t n) {
    return AllGatherOf(g, in, out, n, DTypeOf<T>());
  }
  template <typename T>
  Status AllToAllVOf(Group g, const T* in, const int64_t* send, T* out, const int64_t* recv) {
    return AllToAllV(g, in, send, out, recv, DTypeOf<T>());
  }
  template <typename T>
  StatusOr<int64_t> Isend(Group g, const T* data, int64_t n, int peer, int tag) {
    return Send(g, data, n, DTypeOf<T>(), peer, tag);
  }
  template <typename T>
  Status Recv(Group g, T* data, int64_t n, int peer, int tag) {
    return Receive(g, data, n, DTypeOf<T>(), peer, tag);
  }

  virtual Status AllReduceSumHost(Group g, double* host, int64_t n) = 0;
  virtual Status AllReduceMaxHost(Group g, double* host, int64_t n) = 0;
  // The all-gather on host doubles (timelines, per-rank figures gathered for the report).
  virtual Status AllGatherHost(Group g, const double* in, double* out, int64_t n) = 0;

  // Non-blocking all-reduce (sum, in place) and reduce-scatter (as ReduceScatter: size(g)
  // blocks of n in `in`, this rank's summed block into `out`) of `type` (fp32, or bf16 summed
  // as the blocking ones), for overlapping them with computation: the layout's overlap_dp
  // (ZeRO 0's all-reduces, ZeRO 1-3's reduce-scatters) and overlap_tp's input-gradient
  // reduction. The buffers stay alive, and the inputs unchanged, until the handle completes.
  virtual StatusOr<int64_t> IallReduce(Group g, void* data, int64_t n, DType type) = 0;
  virtual StatusOr<int64_t> IreduceScatter(Group g, const void* in, void* out, int64_t n,
                                           DType type) = 0;
  template <typename T>
  StatusOr<int64_t> IallReduceSum(Group g, T* data, int64_t n) {
    return IallReduce(g, data, n, DTypeOf<T>());
  }
  template <typename T>
  StatusOr<int64_t> IreduceScatterSum(Group g, const T* in, T* out, int64_t n) {
    return IreduceScatter(g, in, out, n, DTypeOf<T>());
  }
  // Non-blocking all-gather (as AllGatherOf), for SP's backward re-gather under overlap_tp;
  // both buffers stay alive and `in` unchanged until the handle completes.
  virtual StatusOr<int64_t> IallGatherOf(Group g, const void* in, void* out, int64_t n,
                                         DType type) = 0;
  template <typename T>
  StatusOr<int64_t> IallGather(Group g, const T* in, T* out, int64_t n) {
    return IallGatherOf(g, in, out, n, DTypeOf<T>());
  }
  // Completes a handle of Send, IallReduce, IreduceScatter or IallGatherOf: Wait blocks (bounded by the timeout); Test
  // returns whether it is done without waiting. A completed handle is released.
  virtual Status Wait(int64_t handle) = 0;
  virtual StatusOr<bool> Test(int64_t handle) = 0;
  virtual Status Barrier(Group g) = 0;
};

// Bytes of one element of a runtime storage type (kFp32 or kBf16); CHECK-fails on others.
int64_t ElementBytes(DType type);

// ---------------------------------------------------------------------------------------------

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;  // "cpu", "cuda"
  virtual Memory& memory() = 0;
  virtual Kernels& kernels() = 0;
  virtual Collectives& comm() = 0;
  // Seconds on a monotonic clock, read after the work issued so far has finished.
  virtual double Now() = 0;
  // Timestamps of the work's progress without waiting for it at each one (the timeline's
  // phase boundaries; CUDA events on a GPU): Mark() notes the point the work issued so far
  // reaches, MarkSeconds(m) reads when it was reached on Now()'s clock (waiting for it if it
  // has not been), and ClearMarks() ends the marks' life. By default (a host backend, whose
  // work is done when issued) Mark() reads Now() at once.
  virtual int64_t Mark();
  virtual double MarkSeconds(int64_t mark);
  virtual void ClearMarks() { host_marks_.clear(); }
  // Bytes the device reports in use by everything (this process's allocations, the driver's
  // context, library workspaces: cudaMemGetInfo), or -1 where the device has no such figure
  // (a CPU host). Shows what the allocation tracking does not see.
  virtual int64_t DeviceBytesInUse() { return -1; }

 private:
  std::vector<double> host_marks_;  // the default marks: Now() readings
};

}  // namespace shardsim::runtime
