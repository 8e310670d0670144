// The GEMM-based members of CudaTypedKernels (see cuda_typed_kernels.h): the linear layer and
// causal GQA attention (unfused, and the flash variant that recomputes P), as cuBLAS calls
// (cuda_gemm.h: row-major conventions, precision per operand type) on the row-major buffers of
// backend.h, plus row kernels for the softmax.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "runtime/cuda/cuda_device.cuh"
#include "runtime/cuda/cuda_gemm.h"
#include "runtime/cuda/cuda_typed_kernels.h"
#include "runtime/cuda/flash_fused.h"

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
using cuda_gemm::In;
using cuda_gemm::Out;

// attention=flash in bf16 runs the fused tensor-core kernels (flash_fused.h) where they take
// the shape (not under context parallelism), unless SHARDSIM_FUSED_ATTENTION=0 selects the cuBLAS recomputation below (the same
// contract; a way to tell the two apart on a GPU). fp32 always takes the cuBLAS path.
bool UseFusedFlash(const AttentionDims& dims) {
  static const bool enabled = [] {
    const char* e = std::getenv("SHARDSIM_FUSED_ATTENTION");
    return e == nullptr || std::strcmp(e, "0") != 0;
  }();
  // Context parallelism (a query chunk at an offset against all keys) takes the cuBLAS path.
  return enabled && dims.keys() == dims.seq && dims.q_offset == 0 && flash_fused::FitsDevice(dims);
}

// out (n, c) = bias broadcast over rows: the C that a bf16 linear layer's GEMM adds into.
template <typename E>
__global__ void BroadcastRowsKernel(E* out, const E* bias, int64_t n, int64_t c) {
  for (int64_t idx = GlobalIndex(); idx < n * c; idx += GlobalStride()) out[idx] = bias[idx % c];
}

// One block per row r of the (rows, Tk) score matrices s (fp32; row r is query i = r % T of its
// matrix, at position q_off + i): p = softmax over key columns 0..q_off + i, zeros after, as
// attention.cc (q_off 0 and Tk = T without context parallelism). Scores are already scaled.
// p may alias s (fp32): the first two passes only read, and the last reads s[j] and writes
// p[j] in the same thread. The exponentials are recomputed in the last pass rather than
// stored unnormalised (a bf16 p is rounded once); on float the result is bitwise the same.
// lse, when not null, gets each row's log-sum-exp max + log(sum) (the flash forward's).
template <typename E>
__global__ void CausalSoftmaxKernel(const float* s, E* p, float* lse, int64_t t, int64_t tk, int64_t q_off) {
  const int64_t r = blockIdx.x;
  const int64_t i = q_off + r % t;  // the last key this query sees
  const float* srow = s + r * tk;
  E* prow = p + r * tk;
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j <= i; j += blockDim.x) m = fmaxf(m, srow[j]);
  const float max = BlockMax(m);
  float sum_e = 0.0f;
  for (int64_t j = threadIdx.x; j <= i; j += blockDim.x) sum_e += expf(srow[j] - max);
  const float sum = BlockSum(sum_e);
  if (lse != nullptr && threadIdx.x == 0) lse[r] = max + logf(sum);
  for (int64_t j = threadIdx.x; j < tk; j += blockDim.x) {
    Store(prow + j, j <= i ? expf(srow[j] - max) / sum : 0.0f);
  }
}

// The flash backward's recomputed probabilities, element-wise over (rows, Tk) fp32 scores s
// (row r is query i = r % T at position q_off + i): p = exp(s - lse[r]) for key columns
// 0..q_off + i, exactly 0 after. Every row has its diagonal, so lse is finite and p <= 1. p may
// alias s (fp32): each index is read, then written, by one thread.
template <typename E>
__global__ void CausalProbsFromLseKernel(const float* s, const float* lse, E* p, int64_t rows,
                                         int64_t t, int64_t tk, int64_t q_off) {
  for (int64_t idx = GlobalIndex(); idx < rows * tk; idx += GlobalStride()) {
    const int64_t r = idx / tk, j = idx % tk;
    Store(p + idx, j <= q_off + r % t ? expf(s[idx] - lse[r]) : 0.0f);
  }
}

// One row of the softmax backward given the row's dot (block-wide): ds = p (dp - dot). ds may
// alias p or dp: each thread reads index j of both before writing it.
template <typename E>
__device__ void SoftmaxGradRow(const E* pr, const float* dr, E* sr, int64_t t, float dot) {
  for (int64_t j = threadIdx.x; j < t; j += blockDim.x) {
    const float pj = Load(pr + j);
    Store(sr + j, pj * (dr[j] - dot));
  }
}

// One block per row of Tk: dS = P (dP - rowsum(P dP)) from P (E) and dP (fp32) into ds (E).
// ds may alias dp (fp32): each thread reads dp[j] before writing ds[j], and the row sum is
// complete (BlockSum's barriers) before any write.
template <typename E>
__global__ void SoftmaxBackwardKernel(const E* p, const float* dp, E* ds, int64_t tk) {
  const int64_t r = blockIdx.x;
  const E* pr = p + r * tk;
  const float* dr = dp + r * tk;
  float s = 0.0f;
  for (int64_t j = threadIdx.x; j < tk; j += blockDim.x) s += Load(pr + j) * dr[j];
  SoftmaxGradRow(pr, dr, ds + r * tk, tk, BlockSum(s));
}

// The flash form, one block per row r of a group's (group*T, Tk) P and dP: dS = P (dP - D) with
// D = dO_r . O_r (FlashAttention's D, Dao et al. 2022 Alg. 2 line 19: equal to rowsum(P dP)
// since O = P V), an fp32 sum over the head_dim. Row r is query i = r % T of the group's head
// j = r / T, whose dO and O rows are d elements at i*ld + j*d of dout0 and out0 (the group's
// first head). ds may alias p: D reads neither, and SoftmaxGradRow reads p[j] before ds[j].
template <typename E>
__global__ void FlashSoftmaxBackwardKernel(const E* p, const float* dp, const E* dout0,
                                           const E* out0, int64_t ld, int64_t d, E* ds, int64_t t,
                                           int64_t tk) {
  const int64_t r = blockIdx.x;
  const int64_t at = (r % t) * ld + (r / t) * d;
  float s = 0.0f;
  for (int64_t c = threadIdx.x; c < d; c += blockDim.x) {
    s += Load(dout0 + at + c) * Load(out0 + at + c);
  }
  SoftmaxGradRow(p + r * tk, dp + r * tk, ds + r * tk, tk, BlockSum(s));
}

// Bytes rounded up to a multiple of 256, so each part of attention's scratch is 256-byte
// aligned, as cuBLAS's tensor-op kernels prefer.
int64_t AlignUp(int64_t bytes) { return (bytes + 255) / 256 * 256; }

// Attention's scratch, one Grow of the slot (a second Grow would invalidate the first's
// pointers): an fp32 block of `elems`, a T block of `elems`, and an fp32 block of `acc_elems`
// (the backward's dK_g / dV_g accumulator, see AddOverGroup), each 256-byte aligned:
// AlignUp(4 elems) + AlignUp(sizeof(T) elems) + 4 acc_elems bytes.
template <typename T>
struct AttentionScratch {
  float* f32;
  T* typed;
  float* acc;
};
template <typename T>
AttentionScratch<T> GrowAttentionScratch(CudaWorkspace& ws, int64_t elems, int64_t acc_elems = 0) {
  const int64_t typed_at = AlignUp(elems * static_cast<int64_t>(sizeof(float)));
  const int64_t acc_at = typed_at + AlignUp(elems * static_cast<int64_t>(sizeof(T)));
  auto* base = static_cast<char*>(ws.Grow(
      CudaWorkspace::Slot::kAttention, acc_at + acc_elems * static_cast<int64_t>(sizeof(float))));
  return {reinterpret_cast<float*>(base), reinterpret_cast<T*>(base + typed_at),
          reinterpret_cast<float*>(base + acc_at)};
}

// dst (rows, cols) fp32, dense = src (rows, cols) at leading dimension ld, widened; and back,
// rounded once.
template <typename E>
__global__ void WidenBlockKernel(const E* src, int64_t ld, float* dst, int64_t rows, int64_t cols) {
  for (int64_t idx = GlobalIndex(); idx < rows * cols; idx += GlobalStride()) {
    dst[idx] = Load(src + (idx / cols) * ld + idx % cols);
  }
}
template <typename E>
__global__ void NarrowBlockKernel(const float* src, E* dst, int64_t ld, int64_t rows, int64_t cols) {
  for (int64_t idx = GlobalIndex(); idx < rows * cols; idx += GlobalStride()) {
    Store(dst + (idx / cols) * ld + idx % cols, src[idx]);
  }
}

// One (sequence b, KV head g) of attention, the unit every member below loops over. The query
// heads h = g*group + j (j < group) share K_g, V_g; Q_h is the (T, d) block at row b*T, column
// h*d (ld H*d), so consecutive j are d elements apart (the batch stride), and K_g's stride is 0.
// Under context parallelism (AttentionDims::kv_seq, q_offset) the T queries sit at positions
// q_off.. and face all Tk keys: K_g is the (Tk, d) block at row b*Tk, the score and probability
// matrices are (T, Tk); otherwise Tk = T and q_off = 0.
struct GroupGeometry {
  int64_t t, tk, q_off, d, group, ldq, ldk;
  float scale;  // 1 / sqrt(d)
  // Element offsets of block (b, g): in q, out, dout (and their gradients) at the group's first
  // query head g*group; in k, v (dk, dv) at K_g.
  int64_t QAt(int64_t b, int64_t g) const { return b * t * ldq + g * group * d; }
  int64_t KAt(int64_t b, int64_t g) const { return b * tk * ldk + g * d; }
  // Row offset of (b, g*group) in (B, H, T)-indexed rows (lse; probs with per_row Tk).
  int64_t RowsAt(int64_t b, int64_t g, int64_t heads, int64_t per_row) const {
    return (b * heads + g * group) * t * per_row;
  }
};

GroupGeometry GeometryOf(const AttentionDims& s) {
  CHECK(s.kv_heads > 0 && s.heads % s.kv_heads == 0) << s.heads << " / " << s.kv_heads;
  GroupGeometry x;
  x.t = s.seq;
  x.tk = s.keys();
  x.q_off = s.q_offset;
  CHECK(x.q_off >= 0 && x.q_off + x.t <= x.tk) << "queries at " << x.q_off << ".." << x.q_off + x.t << " of " << x.tk
                                               << " keys";
  x.d = s.head_dim;
  x.group = s.heads / s.kv_heads;
  x.ldq = s.heads * x.d;
  x.ldk = s.kv_heads * x.d;
  x.scale = 1.0f / std::sqrt(static_cast<float>(x.d));
  return x;
}

// S_h (T, Tk) = scale Q_h K_g^T into fp32 scores (group, T, Tk), batched over j (stride T*Tk).
template <typename T>
void GroupScores(cuda_gemm::Gemm& g, const GroupGeometry& x, const T* q0, const T* kg,
                 float* scores) {
  g.Run(x.t, x.tk, x.d, x.scale, In(q0, x.ldq, false, x.d), In(kg, x.ldk, true, 0), 0.0f,
               Out(scores, x.tk, x.t * x.tk), x.group);
}

// O_h (T, d) = P_h V_g from P (group, T, Tk), batched over j.
template <typename T>
void GroupOutput(cuda_gemm::Gemm& g, const GroupGeometry& x, const T* p0, const T* vg, T* out0) {
  g.Run(x.t, x.d, x.tk, 1.0f, In<T>(p0, x.tk, false, x.t * x.tk), In(vg, x.ldk, false, 0),
               0.0f, Out(out0, x.ldq, x.d), x.group);
}

// dX_g (Tk, d, ld ldk) += sum over j < group of one GEMM each (gemm(j, C) adds term j into C with
// beta 1; the outputs coincide, so they cannot be one batched call). fp32, or a bf16 group of 1:
// straight into dX_g, as attention.cc adds head by head. A bf16 group of several heads: into an
// fp32 copy of dX_g (acc, Tk*d floats), rounded back once, so the accumulated T output is rounded
// once per call (backend.h), not once per query head.
template <typename T, typename GemmJ>
void AddOverGroup(cudaStream_t stream, const GroupGeometry& x, T* dxg, float* acc, GemmJ gemm) {
  bool direct = x.group == 1;
  if constexpr (std::is_same_v<T, float>) direct = true;
  if (direct) {
    for (int64_t j = 0; j < x.group; ++j) gemm(j, Out(dxg, x.ldk));
    return;
  }
  CHECK(acc != nullptr);
  WidenBlockKernel<<<BlocksFor(x.tk * x.d), kThreads, 0, stream>>>(ToDev(dxg), x.ldk, acc, x.tk, x.d);
  SHARDSIM_CUDA_CHECK_LAUNCH();
  for (int64_t j = 0; j < x.group; ++j) gemm(j, Out(acc, x.d));
  NarrowBlockKernel<<<BlocksFor(x.tk * x.d), kThreads, 0, stream>>>(acc, ToDev(dxg), x.ldk, x.tk, x.d);
  SHARDSIM_CUDA_CHECK_LAUNCH();
}

// dP_h = dO_h V_g^T into fp32 dp (group, T, Tk), batched over j; then dV_g += P_h^T dO_h, one
// GEMM per j (AddOverGroup).
template <typename T>
void GroupGradProbsAndV(cuda_gemm::Gemm& g, cudaStream_t stream, const GroupGeometry& x,
                        const T* do0, const T* vg, const T* p0, float* dp, T* dvg, float* acc) {
  g.Run(x.t, x.tk, x.d, 1.0f, In(do0, x.ldq, false, x.d), In(vg, x.ldk, true, 0), 0.0f,
               Out(dp, x.tk, x.t * x.tk), x.group);
  AddOverGroup(stream, x, dvg, acc, [&](int64_t j, const cuda_gemm::Output& c) {
    g.Run(x.tk, x.d, x.t, 1.0f, In(p0 + j * x.t * x.tk, x.tk, true),
                 In(do0 + j * x.d, x.ldq, false), 1.0f, c);
  });
}

// dQ_h += scale dS_h K_g (batched over j), then dK_g += scale dS_h^T Q_h (one GEMM per j,
// AddOverGroup).
template <typename T>
void GroupAddGradQK(cuda_gemm::Gemm& g, cudaStream_t stream, const GroupGeometry& x, const T* ds,
                    const T* kg, const T* q0, T* dq0, T* dkg, float* acc) {
  g.Run(x.t, x.d, x.tk, x.scale, In<T>(ds, x.tk, false, x.t * x.tk), In(kg, x.ldk, false, 0),
               1.0f, Out(dq0, x.ldq, x.d), x.group);
  AddOverGroup(stream, x, dkg, acc, [&](int64_t j, const cuda_gemm::Output& c) {
    g.Run(x.tk, x.d, x.t, x.scale, In<T>(ds + j * x.t * x.tk, x.tk, true),
                 In(q0 + j * x.d, x.ldq, false), 1.0f, c);
  });
}

}  // namespace

// out (n, m) = in (n, k) w^T: the row-major GEMM M=n, N=m, K=k, A=in (ld k), B=w transposed
// (ld k), i.e. column-major gemm(T, N, m, n, k, w, k, in, k, out, m) (cuda_gemm.h). fp32: then += bias (as before). bf16:
// out = bias rows first and the GEMM accumulates into them (beta 1): one rounding.
template <typename T>
void CudaTypedKernels<T>::LinearForward(const T* in, const T* w, const T* bias, T* out, int64_t n,
                                        int64_t k, int64_t m) {
  if (n * m == 0) return;
  if constexpr (std::is_same_v<T, float>) {
    ws_.gemm().Run(n, m, k, 1.0f, In(in, k, false), In(w, k, true), 0.0f, Out(out, m));
    if (bias != nullptr) AddRowBias(out, bias, n, m);
  } else {
    float beta = 0.0f;
    if (bias != nullptr) {
      BroadcastRowsKernel<<<BlocksFor(n * m), kThreads, 0, ws_.stream()>>>(ToDev(out), ToDev(bias),
                                                                           n, m);
      SHARDSIM_CUDA_CHECK_LAUNCH();
      beta = 1.0f;
    }
    ws_.gemm().Run(n, m, k, 1.0f, In(in, k, false), In(w, k, true), beta, Out(out, m));
  }
}

// din (n, k) += dout (n, m) w (m, k); dw (m, k) += dout^T (m, n) in (n, k); db += colsum(dout);
// each skipped when null.
// dw and db are fp32 whatever T is: on bf16 the dw GEMM takes bf16 operands and accumulates
// into the fp32 C (beta 1).
template <typename T>
void CudaTypedKernels<T>::LinearBackward(const T* dout, const T* in, const T* w, T* din, float* dw,
                                         float* db, int64_t n, int64_t k, int64_t m) {
  if (n == 0) return;
  if (din != nullptr) {
    ws_.gemm().Run(n, k, m, 1.0f, In(dout, m, false), In(w, k, false), 1.0f,
                 Out(din, k));
  }
  if (dw != nullptr) {
    ws_.gemm().Run(m, k, n, 1.0f, In(dout, m, true), In(in, k, false), 1.0f,
                 Out(dw, k));
  }
  if (db != nullptr) AddColumnSums(dout, db, n, m);
}

// Buffers: q, out (B*T, H*d); k, v (B*Tk, KV*d); probs (B, H, T, Tk) (Tk = T but under context
// parallelism, AttentionDims). Per (b, g) (GroupGeometry):
//   S_h (T, Tk) = scale Q_h K_g^T       (batched over j, stride T*Tk) into fp32 scores: probs[b, h]
//                                       itself on fp32, the scratch (group, T, Tk) on bf16
//   P_h = causal row-softmax of S_h     into probs[b, h] (group*T rows, one kernel)
//   O_h (T, d) = P_h V_g                (batched over j)
template <typename T>
void CudaTypedKernels<T>::AttentionForward(const T* q, const T* k, const T* v, T* probs, T* out,
                                           const AttentionDims& s) {
  const GroupGeometry x = GeometryOf(s);
  if (s.batch * s.heads * x.t == 0) return;
  float* scratch = nullptr;
  if constexpr (!std::is_same_v<T, float>) {
    scratch =
        static_cast<float*>(ws_.Grow(CudaWorkspace::Slot::kAttention,
                                     x.group * x.t * x.tk * static_cast<int64_t>(sizeof(float))));
  }
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t g = 0; g < s.kv_heads; ++g) {
      T* p0 = probs + x.RowsAt(b, g, s.heads, x.tk);
      float* scores;
      if constexpr (std::is_same_v<T, float>) {
        scores = p0;
      } else {
        scores = scratch;
      }
      GroupScores(ws_.gemm(), x, q + x.QAt(b, g), k + x.KAt(b, g), scores);
      CausalSoftmaxKernel<<<RowBlocks(x.group * x.t), kThreads, 0, ws_.stream()>>>(
          scores, ToDev(p0), nullptr, x.t, x.tk, x.q_off);
      SHARDSIM_CUDA_CHECK_LAUNCH();
      GroupOutput(ws_.gemm(), x, p0, v + x.KAt(b, g), out + x.QAt(b, g));
    }
  }
}

// Per (b, g), with dP for the group's heads in fp32 scratch (group, T, Tk), and dS in place of
// dP on fp32 or in a bf16 scratch (group, T, Tk) after it on bf16:
//   dP_h = dO_h V_g^T                        (batched over j)
//   dV_g += P_h^T dO_h                       (one GEMM per j: the outputs coincide)
//   dS_h = P_h (dP_h - rowsum(P_h dP_h))     (row kernel)
//   dQ_h += scale dS_h K_g                   (batched over j)
//   dK_g += scale dS_h^T Q_h                 (one GEMM per j)
// On bf16 with group > 1, dV_g and dK_g accumulate their group terms in an fp32 (Tk, d) scratch
// after the others and are rounded once (AddOverGroup).
template <typename T>
void CudaTypedKernels<T>::AttentionBackward(const T* dout, const T* q, const T* k, const T* v,
                                            const T* probs, T* dq, T* dk, T* dv,
                                            const AttentionDims& s) {
  const GroupGeometry x = GeometryOf(s);
  if (s.batch * s.heads * x.t == 0) return;
  float* dp;
  T* ds;
  float* acc = nullptr;
  if constexpr (std::is_same_v<T, float>) {
    dp = static_cast<float*>(ws_.Grow(CudaWorkspace::Slot::kAttention,
                                      x.group * x.t * x.tk * static_cast<int64_t>(sizeof(float))));
    ds = dp;
  } else {
    const AttentionScratch<T> scratch = GrowAttentionScratch<T>(ws_, x.group * x.t * x.tk, x.tk * x.d);
    dp = scratch.f32;
    ds = scratch.typed;
    acc = scratch.acc;
  }
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t g = 0; g < s.kv_heads; ++g) {
      const T* p0 = probs + x.RowsAt(b, g, s.heads, x.tk);
      const int64_t qa = x.QAt(b, g), ka = x.KAt(b, g);
      GroupGradProbsAndV(ws_.gemm(), ws_.stream(), x, dout + qa, v + ka, p0, dp, dv + ka, acc);
      SoftmaxBackwardKernel<<<RowBlocks(x.group * x.t), kThreads, 0, ws_.stream()>>>(
          ToDev(p0), dp, ToDev(ds), x.tk);
      SHARDSIM_CUDA_CHECK_LAUNCH();
      GroupAddGradQK(ws_.gemm(), ws_.stream(), x, ds, k + ka, q + qa, dq + qa, dk + ka, acc);
    }
  }
}

// Memory-efficient attention with recomputation (backend.h's FlashAttention*): the unfused
// steps above per (b, g), with the probabilities in the workspace instead of a caller buffer.
// Scratch (GrowAttentionScratch, one (b, g) at a time): fp32 (group, T, Tk) for S (and dP in the
// backward), then T (group, T, Tk) for P (and dS in place of P in the backward):
// AlignUp(4 group T Tk) + AlignUp(sizeof(T) group T Tk) bytes, 8 group T Tk on fp32 and 6 group T Tk
// on bf16 (e.g. 384 MiB for bf16, group 4, T = Tk = 4096), plus, in the backward, the (Tk, d) fp32
// accumulator of dK_g / dV_g (AddOverGroup), outside Memory's accounting as the rest of the
// workspace. On bf16, P is rounded to bf16 for the P V and P^T dO GEMMs and dS for the dQ, dK
// GEMMs, as the unfused bf16 path rounds its stored probs and dS.
//
// Forward, per (b, g):
//   S_h = scale Q_h K_g^T                    (batched over j) into the fp32 scratch
//   P_h = causal row-softmax of S_h          into the T scratch; lse[b, h, i] = max + log(sum)
//   O_h = P_h V_g                            (batched over j)
template <typename T>
void CudaTypedKernels<T>::FlashAttentionForward(const T* q, const T* k, const T* v, float* lse,
                                                T* out, const AttentionDims& s) {
  const GroupGeometry x = GeometryOf(s);
  if (s.batch * s.heads * x.t == 0) return;
  if constexpr (std::is_same_v<T, Bf16>) {
    if (UseFusedFlash(s)) {  // not under context parallelism: the fused kernels take no offset
      flash_fused::Forward(ws_.stream(), ToDev(q), ToDev(k), ToDev(v), lse, ToDev(out), s);
      return;
    }
  }
  const AttentionScratch<T> scratch = GrowAttentionScratch<T>(ws_, x.group * x.t * x.tk);
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t g = 0; g < s.kv_heads; ++g) {
      GroupScores(ws_.gemm(), x, q + x.QAt(b, g), k + x.KAt(b, g), scratch.f32);
      CausalSoftmaxKernel<<<RowBlocks(x.group * x.t), kThreads, 0, ws_.stream()>>>(
          scratch.f32, ToDev(scratch.typed), lse + x.RowsAt(b, g, s.heads, 1), x.t, x.tk, x.q_off);
      SHARDSIM_CUDA_CHECK_LAUNCH();
      GroupOutput(ws_.gemm(), x, scratch.typed, v + x.KAt(b, g), out + x.QAt(b, g));
    }
  }
}

// Backward, per (b, g) (Dao et al. 2022, Alg. 2 with one block of the whole sequence):
//   S_h = scale Q_h K_g^T                    (batched over j) into the fp32 scratch
//   P_h = exp(S_h - lse_h), 0 above diagonal into the T scratch (element-wise kernel)
//   dP_h = dO_h V_g^T                        (batched over j) into the fp32 scratch, over S
//   dV_g += P_h^T dO_h                       (one GEMM per j)
//   dS_h = P_h (dP_h - D_h), D = rowsum(dO O) into the T scratch, over P (row kernel)
//   dQ_h += scale dS_h K_g, dK_g += scale dS_h^T Q_h, as the unfused backward
template <typename T>
void CudaTypedKernels<T>::FlashAttentionBackward(const T* dout, const T* q, const T* k, const T* v,
                                                 const T* out, const float* lse, T* dq, T* dk,
                                                 T* dv, const AttentionDims& s) {
  const GroupGeometry x = GeometryOf(s);
  if (s.batch * s.heads * x.t == 0) return;
  if constexpr (std::is_same_v<T, Bf16>) {
    if (UseFusedFlash(s)) {
      auto* delta = static_cast<float*>(
          ws_.Grow(CudaWorkspace::Slot::kFlash, flash_fused::BackwardWorkspaceBytes(s)));
      flash_fused::Backward(ws_.stream(), ToDev(dout), ToDev(q), ToDev(k), ToDev(v), ToDev(out),
                            lse, ToDev(dq), ToDev(dk), ToDev(dv), s, delta);
      return;
    }
  }
  const AttentionScratch<T> scratch = GrowAttentionScratch<T>(ws_, x.group * x.t * x.tk, x.tk * x.d);
  float* const sdp = scratch.f32;  // S, then dP
  T* const pds = scratch.typed;    // P, then dS
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t g = 0; g < s.kv_heads; ++g) {
      const int64_t qa = x.QAt(b, g), ka = x.KAt(b, g);
      GroupScores(ws_.gemm(), x, q + qa, k + ka, sdp);
      CausalProbsFromLseKernel<<<BlocksFor(x.group * x.t * x.tk), kThreads, 0, ws_.stream()>>>(
          sdp, lse + x.RowsAt(b, g, s.heads, 1), ToDev(pds), x.group * x.t, x.t, x.tk, x.q_off);
      SHARDSIM_CUDA_CHECK_LAUNCH();
      GroupGradProbsAndV(ws_.gemm(), ws_.stream(), x, dout + qa, v + ka, pds, sdp, dv + ka,
                         scratch.acc);
      FlashSoftmaxBackwardKernel<<<RowBlocks(x.group * x.t), kThreads, 0, ws_.stream()>>>(
          ToDev(pds), sdp, ToDev(dout + qa), ToDev(out + qa), x.ldq, x.d, ToDev(pds), x.t, x.tk);
      SHARDSIM_CUDA_CHECK_LAUNCH();
      GroupAddGradQK(ws_.gemm(), ws_.stream(), x, pds, k + ka, q + qa, dq + qa, dk + ka,
                     scratch.acc);
    }
  }
}

// Explicit instantiations of the members defined here (the class itself is instantiated in
// cuda_typed_kernels.cu with the members defined there).
#define SHARDSIM_INSTANTIATE_GEMM_KERNELS(T)                                                      \
  template void CudaTypedKernels<T>::LinearForward(const T*, const T*, const T*, T*, int64_t,     \
                                                   int64_t, int64_t);                             \
  template void CudaTypedKernels<T>::LinearBackward(const T*, const T*, const T*, T*, float*,     \
                                                    float*, int64_t, int64_t, int64_t);           \
  template void CudaTypedKernels<T>::AttentionForward(const T*, const T*, const T*, T*, T*,       \
                                                      const AttentionDims&);                      \
  template void CudaTypedKernels<T>::AttentionBackward(                                           \
      const T*, const T*, const T*, const T*, const T*, T*, T*, T*, const AttentionDims&);        \
  template void CudaTypedKernels<T>::FlashAttentionForward(const T*, const T*, const T*, float*,  \
                                                           T*, const AttentionDims&);             \
  template void CudaTypedKernels<T>::FlashAttentionBackward(const T*, const T*, const T*,         \
                                                            const T*, const T*, const float*, T*, \
                                                            T*, T*, const AttentionDims&);
SHARDSIM_INSTANTIATE_GEMM_KERNELS(float)
SHARDSIM_INSTANTIATE_GEMM_KERNELS(Bf16)
#undef SHARDSIM_INSTANTIATE_GEMM_KERNELS

}  // namespace shardsim::runtime
