// See cuda_kernels.h. Each kernel cites the CPU operator whose float operations it restates;
// the linear layer and attention are in cuda_attention.cu.
#include <cuda_runtime.h>

#include <cmath>

#include "runtime/cpu/layer_norm.h"
#include "runtime/cpu/rms_norm.h"
#include "runtime/cpu/rope.h"
#include "runtime/cuda/cuda_device.cuh"
#include "runtime/cuda/cuda_kernels.h"

namespace shardsim::runtime {
namespace {

using cuda_device::BlockMax;
using cuda_device::BlocksFor;
using cuda_device::BlockSum;
using cuda_device::GlobalIndex;
using cuda_device::GlobalStride;
using cuda_device::kThreads;
using cuda_device::RowBlocks;

// --- Embedding (embedding.cc, cpu_kernels.cc) ---------------------------------------------

// One block per row: out = wte[local] (+ wpe[pos]), or wpe[pos] / 0 for another rank's token.
__global__ void EmbeddingForwardKernel(const int32_t* tokens, const float* wte, int64_t vocab_begin,
                                       int64_t vocab, const float* wpe, float* out, int64_t row0,
                                       int64_t seq, int64_t c) {
  const int64_t i = blockIdx.x;
  const int64_t local = static_cast<int64_t>(tokens[i]) - vocab_begin;
  const bool mine = local >= 0 && local < vocab;
  const float* pos = wpe == nullptr ? nullptr : wpe + ((row0 + i) % seq) * c;
  for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
    float x = mine ? wte[local * c + j] : 0.0f;
    if (pos != nullptr) x = mine ? x + pos[j] : pos[j];
    out[i * c + j] = x;
  }
}

// One thread per channel j, rows in order: the CPU's additions, per address, in its order,
// with no two threads writing one address (so no atomics, and deterministic).
__global__ void EmbeddingBackwardKernel(const float* dout, const int32_t* tokens, float* dwte,
                                        int64_t vocab_begin, int64_t vocab, float* dwpe, int64_t n,
                                        int64_t row0, int64_t seq, int64_t c) {
  for (int64_t j = GlobalIndex(); j < c; j += GlobalStride()) {
    for (int64_t i = 0; i < n; ++i) {
      const float d = dout[i * c + j];
      const int64_t local = static_cast<int64_t>(tokens[i]) - vocab_begin;
      if (local >= 0 && local < vocab) dwte[local * c + j] += d;
      if (dwpe != nullptr) dwpe[((row0 + i) % seq) * c + j] += d;
    }
  }
}

// --- Norms (layer_norm.cc, rms_norm.cc) ----------------------------------------------------

// One block per row. LayerNorm: mean, var = mean((x - mean)^2), rstd = 1/sqrt(var + eps),
// y = (x - mean) rstd g + b. RMSNorm: rstd = 1/sqrt(mean(x^2) + eps), y = x rstd g.
__global__ void NormForwardKernel(bool layer_norm, const float* x, const float* gain,
                                  const float* bias, float* out, float* mean, float* rstd,
                                  int64_t c, float eps) {
  const int64_t i = blockIdx.x;
  const float* xi = x + i * c;
  float mu = 0.0f;
  if (layer_norm) {
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x) s += xi[j];
    mu = BlockSum(s) / static_cast<float>(c);
  }
  float sq = 0.0f;
  for (int64_t j = threadIdx.x; j < c; j += blockDim.x) sq += (xi[j] - mu) * (xi[j] - mu);
  const float r = 1.0f / sqrtf(BlockSum(sq) / static_cast<float>(c) + eps);
  if (threadIdx.x == 0) {
    if (layer_norm) mean[i] = mu;
    rstd[i] = r;
  }
  for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
    out[i * c + j] = layer_norm ? (xi[j] - mu) * r * gain[j] + bias[j] : xi[j] * r * gain[j];
  }
}

// One block per row: dx += rstd (g dy - mean(g dy) - xhat mean(g dy xhat)); RMSNorm drops the
// mean(g dy) term and has xhat = x rstd.
__global__ void NormBackwardDxKernel(bool layer_norm, const float* dout, const float* x,
                                     const float* gain, const float* mean, const float* rstd,
                                     float* dx, int64_t c) {
  const int64_t i = blockIdx.x;
  const float mu = layer_norm ? mean[i] : 0.0f;
  const float r = rstd[i];
  float s_g = 0.0f, s_gx = 0.0f;
  for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
    const float xhat = (x[i * c + j] - mu) * r;
    const float gdy = dout[i * c + j] * gain[j];
    s_g += gdy;
    s_gx += gdy * xhat;
  }
  const float mean_g = layer_norm ? BlockSum(s_g) / static_cast<float>(c) : 0.0f;
  const float mean_gx = BlockSum(s_gx) / static_cast<float>(c);
  for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
    const float xhat = (x[i * c + j] - mu) * r;
    const float gdy = dout[i * c + j] * gain[j];
    dx[i * c + j] += r * (gdy - mean_g - xhat * mean_gx);
  }
}

// One thread per column, rows in order: dgain += dy xhat, dbias += dy (bias may be null).
__global__ void NormBackwardParamsKernel(bool layer_norm, const float* dout, const float* x,
                                         const float* mean, const float* rstd, float* dgain,
                                         float* dbias, int64_t n, int64_t c) {
  for (int64_t j = GlobalIndex(); j < c; j += GlobalStride()) {
    float dg = dgain[j];
    float db = dbias != nullptr ? dbias[j] : 0.0f;
    for (int64_t i = 0; i < n; ++i) {
      const float dy = dout[i * c + j];
      const float xhat = (x[i * c + j] - (layer_norm ? mean[i] : 0.0f)) * rstd[i];
      dg += dy * xhat;
      db += dy;
    }
    dgain[j] = dg;
    if (dbias != nullptr) dbias[j] = db;
  }
}

// --- RoPE (rope.cc) ------------------------------------------------------------------------

// One thread per (row, head, pair i < d/2): the pair (x_i, x_{i+d/2}) rotated by
// sign * angle(pos, i), angle = pos * base^(-2i/d) in double, rounded to float once.
__global__ void RopeKernel(float* x, int64_t rows, int64_t t, int64_t heads, int64_t d,
                           float sign) {
  const int64_t half = d / 2;
  const int64_t total = rows * heads * half;
  for (int64_t idx = GlobalIndex(); idx < total; idx += GlobalStride()) {
    const int64_t i = idx % half;
    const int64_t row_head = idx / half;  // row * heads + h
    const int64_t pos = (row_head / heads) % t;
    const double theta = pow(kRopeBase, -2.0 * static_cast<double>(i) / static_cast<double>(d));
    const double angle = static_cast<double>(pos) * theta;
    const float cs = static_cast<float>(cos(angle));
    const float sn = sign * static_cast<float>(sin(angle));
    float* v = x + row_head * d;
    const float a = v[i];
    const float b = v[i + half];
    v[i] = a * cs - b * sn;
    v[i + half] = a * sn + b * cs;
  }
}

// --- GELU (gelu.cc, tanh form) and SwiGLU (swiglu.cc) --------------------------------------

constexpr double kSqrt2OverPi = 0.79788456080286535588;  // as gelu.cc
constexpr double kCubic = 0.044715;

__global__ void GeluForwardKernel(const float* in, float* out, int64_t n) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    const float x = in[i];
    const float u = static_cast<float>(kSqrt2OverPi) * (x + static_cast<float>(kCubic) * x * x * x);
    out[i] = 0.5f * x * (1.0f + tanhf(u));
  }
}

__global__ void GeluBackwardKernel(const float* dout, const float* in, float* din, int64_t n) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    const float x = in[i];
    const float u = static_cast<float>(kSqrt2OverPi) * (x + static_cast<float>(kCubic) * x * x * x);
    const float th = tanhf(u);
    const float du =
        static_cast<float>(kSqrt2OverPi) * (1.0f + static_cast<float>(3 * kCubic) * x * x);
    din[i] += dout[i] * (0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du);
  }
}

__device__ inline float Sigmoid(float z) { return 1.0f / (1.0f + expf(-z)); }

__global__ void SwigluForwardKernel(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    out[i] = gate[i] * Sigmoid(gate[i]) * up[i];
  }
}

__global__ void SwigluBackwardKernel(const float* dout, const float* gate, const float* up,
                                     float* dgate, float* dup, int64_t n) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    const float z = gate[i];
    const float s = Sigmoid(z);
    dgate[i] += dout[i] * up[i] * s * (1.0f + z * (1.0f - s));
    dup[i] += dout[i] * z * s;
  }
}

// --- Cross-entropy (cpu_kernels.cc) --------------------------------------------------------

// One block per row: p = exp(z - max) / sum; row_loss = log(sum) - (z[target] - max).
// z[target] is read before any write, so probs may alias logits.
__global__ void SoftmaxCrossEntropyKernel(const float* logits, const int32_t* targets, float* probs,
                                          float* row_loss, int64_t v) {
  const int64_t i = blockIdx.x;
  const float* z = logits + i * v;
  float* p = probs + i * v;
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x) m = fmaxf(m, z[j]);
  const float max = BlockMax(m);
  const float shifted_target = z[targets[i]] - max;  // BlockMax ends in a barrier; no write yet
  __syncthreads();                                   // every thread has read z[target]
  float s = 0.0f;
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x) {
    const float e = expf(z[j] - max);
    p[j] = e;
    s += e;
  }
  const float sum = BlockSum(s);
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x) p[j] /= sum;
  if (threadIdx.x == 0) row_loss[i] = logf(sum) - shifted_target;
}

// d = per_token p, then d[target - vocab_begin] -= per_token when this rank holds the target.
__global__ void CrossEntropyBackwardKernel(const float* probs, const int32_t* targets,
                                           float per_token, float* dlogits, int64_t n, int64_t v,
                                           int64_t vocab_begin) {
  for (int64_t idx = GlobalIndex(); idx < n * v; idx += GlobalStride()) {
    const int64_t i = idx / v, j = idx % v;
    float d = per_token * probs[idx];
    if (static_cast<int64_t>(targets[i]) - vocab_begin == j) d -= per_token;
    dlogits[idx] = d;
  }
}

// One block per row: (max, sum exp(z - max), z[target] if held here else 0).
__global__ void VocabParallelStatsKernel(const float* logits, const int32_t* targets,
                                         int64_t vocab_begin, float* stats, int64_t v) {
  const int64_t i = blockIdx.x;
  const float* z = logits + i * v;
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x) m = fmaxf(m, z[j]);
  const float max = BlockMax(m);
  float s = 0.0f;
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x) s += expf(z[j] - max);
  const float sum = BlockSum(s);
  if (threadIdx.x == 0) {
    const int64_t local = static_cast<int64_t>(targets[i]) - vocab_begin;
    stats[3 * i] = max;
    stats[3 * i + 1] = sum;
    stats[3 * i + 2] = local >= 0 && local < v ? z[local] : 0.0f;
  }
}

// One thread per row, ranks in order, as CpuKernels::VocabParallelLogSumExp.
__global__ void VocabParallelLogSumExpKernel(const float* all_stats, int64_t tp, float* lse,
                                             float* row_loss, int64_t n) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    float max = all_stats[3 * i];
    for (int64_t r = 1; r < tp; ++r) max = fmaxf(max, all_stats[(r * n + i) * 3]);
    float sum = 0.0f, target = 0.0f;
    for (int64_t r = 0; r < tp; ++r) {
      const float* s = all_stats + (r * n + i) * 3;
      sum += s[1] * expf(s[0] - max);
      target += s[2];
    }
    lse[i] = max + logf(sum);
    row_loss[i] = logf(sum) - (target - max);
  }
}

__global__ void SoftmaxFromLogSumExpKernel(float* logits, const float* lse, int64_t n, int64_t v) {
  for (int64_t idx = GlobalIndex(); idx < n * v; idx += GlobalStride()) {
    logits[idx] = expf(logits[idx] - lse[idx / v]);
  }
}

// --- Element-wise helpers ------------------------------------------------------------------

__global__ void AddKernel(float* dst, const float* src, int64_t n) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) dst[i] += src[i];
}

__global__ void AddRowBiasKernel(float* out, const float* bias, int64_t n, int64_t c) {
  for (int64_t idx = GlobalIndex(); idx < n * c; idx += GlobalStride()) out[idx] += bias[idx % c];
}

// One thread per column, rows in order (deterministic).
__global__ void AddColumnSumsKernel(const float* x, float* out, int64_t n, int64_t c) {
  for (int64_t j = GlobalIndex(); j < c; j += GlobalStride()) {
    float s = 0.0f;
    for (int64_t i = 0; i < n; ++i) s += x[i * c + j];
    out[j] += s;
  }
}

__global__ void ScaleKernel(float* x, float s, int64_t n) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) x[i] *= s;
}

// --- Reductions to double ------------------------------------------------------------------

// Stage 1: block b sums a fixed strided subset of x (x^2 when `square`) in double into
// partials[b]. Stage 2: one block sums the partials. Grid and block sizes are constants, so
// the order of additions, and thus the result, is the same on every run.
constexpr int kReduceBlocks = 256;

__global__ void PartialSumKernel(const float* x, int64_t n, bool square, double* partials) {
  double s = 0;
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    const double xi = x[i];
    s += square ? xi * xi : xi;
  }
  const double total = BlockSum(s);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

__global__ void FinalSumKernel(double* partials, int count) {
  double s = 0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) s += partials[i];
  const double total = BlockSum(s);
  if (threadIdx.x == 0) partials[0] = total;
}

// --- AdamW (adamw.cc, as CpuKernels::AdamW) ------------------------------------------------

__global__ void AdamWKernel(float* p, const float* g, float* m, float* v, int64_t n,
                            float grad_scale, AdamWArgs a) {
  const bool scaled = grad_scale != 1.0f;
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    float gi = g[i];
    if (scaled) gi *= grad_scale;
    m[i] = a.beta1 * m[i] + (1.0f - a.beta1) * gi;
    v[i] = a.beta2 * v[i] + (1.0f - a.beta2) * gi * gi;
    const float m_hat = m[i] * a.bias_correction1;
    const float v_hat = v[i] * a.bias_correction2;
    p[i] -= a.lr * (m_hat / (sqrtf(v_hat) + a.eps) + a.weight_decay * p[i]);
  }
}

}  // namespace

CudaKernels::CudaKernels(cudaStream_t stream, cublasHandle_t cublas)
    : stream_(stream), cublas_(cublas) {
  SHARDSIM_CUDA_CHECK(cudaMallocHost(&host_result_, sizeof(double)));
}

CudaKernels::~CudaKernels() {
  // The scratch is freed in stream order, after the pending work that may still use it, and the
  // stream drained before the pinned result goes (errors here are ignored; the process is
  // ending or the device is already lost).
  for (Scratch* s : {&rows_, &partials_, &attention_}) {
    if (s->data != nullptr) (void)cudaFreeAsync(s->data, stream_);
  }
  (void)cudaStreamSynchronize(stream_);
  (void)cudaFreeHost(host_result_);
}

void* CudaKernels::Grow(Scratch& s, int64_t bytes) {
  if (bytes > s.bytes) {
    // Stream-ordered, as CudaMemory: the old block is reused only after the kernels enqueued so
    // far, and no device-wide synchronisation waits on NCCL kernels (cuda_memory.h).
    if (s.data != nullptr) SHARDSIM_CUDA_CHECK(cudaFreeAsync(s.data, stream_));
    s.data = nullptr;
    s.bytes = 0;
    SHARDSIM_CUDA_CHECK(cudaMallocAsync(&s.data, static_cast<size_t>(bytes), stream_));
    s.bytes = bytes;
  }
  return s.data;
}

double CudaKernels::ReduceToHost(const float* x, int64_t n, bool square) {
  if (n <= 0) return 0;
  auto* partials = static_cast<double*>(Grow(partials_, kReduceBlocks * sizeof(double)));
  PartialSumKernel<<<kReduceBlocks, kThreads, 0, stream_>>>(x, n, square, partials);
  SHARDSIM_CUDA_CHECK_LAUNCH();
  FinalSumKernel<<<1, kThreads, 0, stream_>>>(partials, kReduceBlocks);
  SHARDSIM_CUDA_CHECK_LAUNCH();
  SHARDSIM_CUDA_CHECK(
      cudaMemcpyAsync(host_result_, partials, sizeof(double), cudaMemcpyDeviceToHost, stream_));
  SHARDSIM_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return *host_result_;
}

void CudaKernels::EmbeddingForward(const int32_t* tokens, const float* wte, int64_t vocab_begin,
                                   int64_t vocab, const float* wpe, float* out, int64_t n,
                                   int64_t row0, int64_t seq, int64_t c) {
  CHECK(seq > 0 && row0 >= 0) << "seq " << seq << ", row0 " << row0;
  if (n == 0) return;
  EmbeddingForwardKernel<<<RowBlocks(n), kThreads, 0, stream_>>>(tokens, wte, vocab_begin, vocab,
                                                                 wpe, out, row0, seq, c);
  SHARDSIM_CUDA_CHECK_LAUNCH();
}

void CudaKernels::EmbeddingBackward(const float* dout, const int32_t* tokens, float* dwte,
                                    int64_t vocab_begin, int64_t vocab, float* dwpe, int64_t n,
                                    int64_t row0, int64_t seq, int64_t c) {
  CHECK(seq > 0 && row0 >= 0) << "seq " << seq << ", row0 " << row0;
  if (n == 0) return;
  EmbeddingBackwardKernel<<<BlocksFor(c), kThreads, 0, stream_>>>(dout, tokens, dwte, vocab_begin,
                                                                  vocab, dwpe, n, row0, seq, c);
  SHARDSIM_CUDA_CHECK_LAUNCH();
}

void CudaKernels::NormForward(Norm kind, const float* x, const float* gain, const float* bias,
                              float* out, float* mean, float* rstd, int64_t n, int64_t c) {
  if (n == 0) return;
  const bool ln = kind == Norm::kLayerNorm;
  const float eps = static_cast<float>(ln ? kLayerNormEps : kRmsNormEps);
  NormForwardKernel<<<RowBlocks(n), kThreads, 0, stream_>>>(ln, x, gain, bias, out, mean, rstd, c,
                                                            eps);
  SHARDSIM_CUDA_CHECK_LAUNCH();
}

void CudaKernels::NormBackward(Norm kind, const float* dout, const float* x, const float* gain,
                               const float* mean, const float* rstd, float* dx, float* dgain,
                               float* dbias, int64_t n, int64_t c) {
  if (n == 0) return;
  const bool ln = kind == Norm::kLayerNorm;
  NormBackwardDxKernel<<<RowBlocks(n), kThreads, 0, stream_>>>(ln, dout, x, gain, mean, rstd, dx,
                                                               c);
  SHARDSIM_CUDA_CHECK_LAUNCH();
  NormBackwardParamsKernel<<<BlocksFor(c), kThreads, 0, stream_>>>(ln, dout, x, mean, rstd, dgain,
                                                                   ln ? dbias : nullptr, n, c);
  SHARDSIM_CUDA_CHECK_LAUNCH();
}

void CudaKernels::RopeForward(float* x, int64_t b, int64_t t, int64_t heads, int64_t d) {
  CHECK(d % 2 == 0) << "RoPE needs an even head_dim, got " << d;
  const int64_t total = b * t * heads * (d / 2);
  if (total == 0) return;
  RopeKernel<<<BlocksFor(total), kThreads, 0, stream_>>>(x, b * t, t, heads, d, 1.0f);
  SHARDSIM_CUDA_CHECK_LAUNCH();
}

void CudaKernels::RopeBackward(float* dx, int64_t b, int64_t t, int64_t heads, int64_t d) {
  CHECK(d % 2 == 0) << "RoPE needs an even head_dim, got " << d;
  const int64_t total = b * t * heads * (d / 2);
  if (total == 0) return;
  RopeKernel<<<BlocksFor(total), kThreads, 0, stream_>>>(dx, b * t, t, heads, d, -1.0f);
  SHARDSIM_CUDA_CHECK_LAUNCH();
}

void CudaKernels::GeluForward(const float* in, float* out, int64_t n) {
  if (n == 0) return;
  GeluForwardKernel<<<BlocksFor(n), kThreads, 0, stream_>>>(in, out, n);
  SHARDSIM_CUDA_CHECK_LAUNCH();
}

void CudaKernels::GeluBackward(const float* dout, const float* in, float* din, int64_t n) {
  if (n == 0) return;
  GeluBackwardKernel<<<BlocksFor(n), kThreads, 0, stream_>>>(dout, in, din, n);
  SHARDSIM_CUDA_CHECK_LAUNCH();
}

void CudaKernels::SwigluForward(const float* gate, const float* up, float* out, int64_t n) {
  if (n == 0) return;
  SwigluForwardKernel<<<BlocksFor(n), kThreads, 0, stream_>>>(gate, up, out, n);
  SHARDSIM_CUDA_CHECK_LAUNCH();
}

void CudaKernels::SwigluBackward(const float* dout, const float* gate, const float* up,
                                 float* dgate, float* dup, int64_t n) {
  if (n == 0) return;
  SwigluBackwardKernel<<<BlocksFor(n), kThreads, 0, stream_>>>(dout, gate, up, dgate, dup, n);
  SHARDSIM_CUDA_CHECK_LAUNCH();
}

// Targets are not range-checked on the device (the CPU CHECKs them): an out-of-range target
// reads outside the row. The executor's targets come from the model's vocabulary.
double CudaKernels::SoftmaxCrossEntropy(const float* logits, const int32_t* targets, float* probs,
                                        int64_t n, int64_t v) {
  if (n == 0) return 0;
  auto* row_loss = static_cast<float*>(Grow(rows_, n * static_cast<int64_t>(sizeof(float))));
  SoftmaxCrossEntropyKernel<<<RowBlocks(n), kThreads, 0, stream_>>>(logits, targets, probs,
                                                                    row_loss, v);
  SHARDSIM_CUDA_CHECK_LAUNCH();
  return ReduceToHost(row_loss, n, /*square=*/false);
}

void CudaKernels::CrossEntropyBackward(const float* probs, const int32_t* targets, float scale,
                                       int64_t mean_over, float* dlogits, int64_t n, int64_t v,
                                       int64_t vocab_begin) {
  CHECK(mean_over > 0) << mean_over;
  if (n * v == 0) return;
  const float per_token = scale / static_cast<float>(mean_over);
  CrossEntropyBackwardKernel<<<BlocksFor(n * v), kThreads, 0, stream_>>>(
      probs, targets, per_token, dlogits, n, v, vocab_begin);
  SHARDSIM_CUDA_CHECK_LAUNCH();
}

void CudaKernels::VocabParallelStats(const float* logits, const int32_t* targets,
                                     int64_t vocab_begin, float* stats, int64_t n, int64_t v) {
  if (n == 0) return;
  VocabParallelStatsKernel<<<RowBlocks(n), kThreads, 0, stream_>>>(logits, targets, vocab_begin,
                                                                   stats, v);
  SHARDSIM_CUDA_CHECK_LAUNCH();
}

double CudaKernels::VocabParallelLogSumExp(const float* all_stats, int64_t tp, float* lse,
                                           int64_t n) {
  if (n == 0) return 0;
  auto* row_loss = static_cast<float*>(Grow(rows_, n * static_cast<int64_t>(sizeof(float))));
  VocabParallelLogSumExpKernel<<<BlocksFor(n), kThreads, 0, stream_>>>(all_stats, tp, lse, row_loss,
                                                                       n);
  SHARDSIM_CUDA_CHECK_LAUNCH();
  return ReduceToHost(row_loss, n, /*square=*/false);
}

void CudaKernels::SoftmaxFromLogSumExp(float* logits, const float* lse, int64_t n, int64_t v) {
  if (n * v == 0) return;
  SoftmaxFromLogSumExpKernel<<<BlocksFor(n * v), kThreads, 0, stream_>>>(logits, lse, n, v);
  SHARDSIM_CUDA_CHECK_LAUNCH();
}

void CudaKernels::Add(float* dst, const float* src, int64_t n) {
  if (n == 0) return;
  AddKernel<<<BlocksFor(n), kThreads, 0, stream_>>>(dst, src, n);
  SHARDSIM_CUDA_CHECK_LAUNCH();
}

void CudaKernels::AddRowBias(float* out, const float* bias, int64_t n, int64_t c) {
  if (n * c == 0) return;
  AddRowBiasKernel<<<BlocksFor(n * c), kThreads, 0, stream_>>>(out, bias, n, c);
  SHARDSIM_CUDA_CHECK_LAUNCH();
}

void CudaKernels::AddColumnSums(const float* x, float* out, int64_t n, int64_t c) {
  if (c == 0) return;
  AddColumnSumsKernel<<<BlocksFor(c), kThreads, 0, stream_>>>(x, out, n, c);
  SHARDSIM_CUDA_CHECK_LAUNCH();
}

void CudaKernels::Scale(float* x, float s, int64_t n) {
  if (n == 0) return;
  ScaleKernel<<<BlocksFor(n), kThreads, 0, stream_>>>(x, s, n);
  SHARDSIM_CUDA_CHECK_LAUNCH();
}

double CudaKernels::SumSquares(const float* x, int64_t n) {
  return ReduceToHost(x, n, /*square=*/true);
}

void CudaKernels::AdamW(float* p, const float* g, float* m, float* v, int64_t n, float grad_scale,
                        const AdamWArgs& args) {
  if (n == 0) return;
  AdamWKernel<<<BlocksFor(n), kThreads, 0, stream_>>>(p, g, m, v, n, grad_scale, args);
  SHARDSIM_CUDA_CHECK_LAUNCH();
}

}  // namespace shardsim::runtime
