// See cuda_typed_kernels.h: embedding, norms, RoPE, GELU, SwiGLU and the element-wise helpers,
// on either storage type. Each kernel cites the CPU operator whose float operations it restates.
// Kernels are templated on the device element type E (float or __nv_bfloat16); every element is
// read with Load (widened to float) and written with Store (rounded once), so on float they do
// exactly the operations they did before mixed precision.
#include <cuda_runtime.h>

#include <cmath>

#include "runtime/cpu/layer_norm.h"
#include "runtime/cpu/rms_norm.h"
#include "runtime/cpu/rope.h"
#include "runtime/cuda/cuda_device.cuh"
#include "runtime/cuda/cuda_typed_kernels.h"

namespace shardsim::runtime {
namespace {

using cuda_device::BlocksFor;
using cuda_device::BlockSum;
using cuda_device::GlobalIndex;
using cuda_device::GlobalStride;
using cuda_device::kThreads;
using cuda_device::Load;
using cuda_device::RowBlocks;
using cuda_device::Store;
using cuda_device::ToDev;

// --- Embedding (embedding.cc, cpu_kernels.cc) ---------------------------------------------

// One block per row: out = wte[local] (+ wpe[pos]), or wpe[pos] / 0 for another rank's token.
template <typename E>
__global__ void EmbeddingForwardKernel(const int32_t* tokens, const E* wte, int64_t vocab_begin,
                                       int64_t vocab, const E* wpe, E* out, int64_t row0,
                                       int64_t seq, int64_t c) {
  const int64_t i = blockIdx.x;
  const int64_t local = static_cast<int64_t>(tokens[i]) - vocab_begin;
  const bool mine = local >= 0 && local < vocab;
  const E* pos = wpe == nullptr ? nullptr : wpe + ((row0 + i) % seq) * c;
  for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
    float x = mine ? Load(wte + local * c + j) : 0.0f;
    if (pos != nullptr) x = mine ? x + Load(pos + j) : Load(pos + j);
    Store(out + i * c + j, x);
  }
}

// Embedding backward in the CPU's order per address (so bitwise its sums) without one thread
// walking all n rows: first each row's link to the next row with the same token, then one block
// per token's first row, whose threads (one per channel) add that token's rows in order.
// next[i]: the next row with row i's token, or -1; first[i]: no earlier row has it. Rows of
// other shards' tokens get -1 and 0. Each thread scans the rows around its own: O(n) per row,
// ~n^2 / 2 L1-resident reads in all (a few tens of microseconds at n = 4096).
__global__ void TokenLinksKernel(const int32_t* tokens, int64_t vocab_begin, int64_t vocab,
                                 int64_t n, int32_t* next, uint8_t* first) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    const int32_t t = tokens[i];
    const int64_t local = static_cast<int64_t>(t) - vocab_begin;
    int32_t nx = -1;
    uint8_t f = local >= 0 && local < vocab;
    for (int64_t k = i + 1; k < n && f && nx < 0; ++k) {
      if (tokens[k] == t) nx = static_cast<int32_t>(k);
    }
    for (int64_t k = 0; k < i && f; ++k) f = tokens[k] != t;
    next[i] = nx;
    first[i] = f;
  }
}

// dwte[token] += its rows of dout, in row order; one block per row, working only at a token's
// first row.
template <typename E>
__global__ void EmbeddingBackwardKernel(const E* dout, const int32_t* tokens, const int32_t* next,
                                        const uint8_t* first, float* dwte, int64_t vocab_begin,
                                        int64_t c) {
  const int64_t i = blockIdx.x;
  if (!first[i]) return;
  float* row = dwte + (static_cast<int64_t>(tokens[i]) - vocab_begin) * c;
  for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
    float acc = row[j];
    for (int64_t r = i; r >= 0; r = next[r]) acc += Load(dout + r * c + j);
    row[j] = acc;
  }
}

// dwpe[p] += the rows at position p ((row0 + i) % seq == p), in row order; one block per p.
template <typename E>
__global__ void PositionBackwardKernel(const E* dout, float* dwpe, int64_t n, int64_t row0,
                                       int64_t seq, int64_t c) {
  const int64_t p = blockIdx.x;
  const int64_t i0 = ((p - row0) % seq + seq) % seq;
  for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
    float acc = dwpe[p * c + j];
    for (int64_t i = i0; i < n; i += seq) acc += Load(dout + i * c + j);
    dwpe[p * c + j] = acc;
  }
}

// --- Column sums (bias and norm-gain gradients) ---------------------------------------------
// Deterministic and parallel in two steps: the rows in chunks of kChunkRows, each thread
// summing one column of one chunk in row order into a partial; then, per column, the partials
// in chunk order added to the output. (One thread per column over all rows would leave most
// of the GPU idle: c threads, each n dependent additions.)
constexpr int64_t kChunkRows = 64;

int64_t Chunks(int64_t n) { return (n + kChunkRows - 1) / kChunkRows; }

dim3 ChunkGrid(int64_t n, int64_t c) {
  const int64_t chunks = Chunks(n);
  CHECK(chunks <= 65535) << n << " rows exceed the column sums' grid";
  return dim3(static_cast<unsigned>(BlocksFor(c)), static_cast<unsigned>(chunks));
}

// out[j] += sum over chunks k (in order) of partial[k * c + j].
__global__ void AddPartialsKernel(const float* partial, int64_t chunks, int64_t c, float* out) {
  for (int64_t j = GlobalIndex(); j < c; j += GlobalStride()) {
    float s = 0.0f;
    for (int64_t k = 0; k < chunks; ++k) s += partial[k * c + j];
    out[j] += s;
  }
}

// --- Norms (layer_norm.cc, rms_norm.cc) ----------------------------------------------------

// One block per row. LayerNorm: mean, var = mean((x - mean)^2), rstd = 1/sqrt(var + eps),
// y = (x - mean) rstd g + b. RMSNorm: rstd = 1/sqrt(mean(x^2) + eps), y = x rstd g.
// mean and rstd are fp32.
template <typename E>
__global__ void NormForwardKernel(bool layer_norm, const E* x, const E* gain, const E* bias, E* out,
                                  float* mean, float* rstd, int64_t c, float eps) {
  const int64_t i = blockIdx.x;
  const E* xi = x + i * c;
  float mu = 0.0f;
  if (layer_norm) {
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x) s += Load(xi + j);
    mu = BlockSum(s) / static_cast<float>(c);
  }
  float sq = 0.0f;
  for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
    const float xj = Load(xi + j);
    sq += (xj - mu) * (xj - mu);
  }
  const float r = 1.0f / sqrtf(BlockSum(sq) / static_cast<float>(c) + eps);
  if (threadIdx.x == 0) {
    if (layer_norm) mean[i] = mu;
    rstd[i] = r;
  }
  for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
    const float xj = Load(xi + j);
    Store(out + i * c + j,
          layer_norm ? (xj - mu) * r * Load(gain + j) + Load(bias + j) : xj * r * Load(gain + j));
  }
}

// One block per row: dx += rstd (g dy - mean(g dy) - xhat mean(g dy xhat)); RMSNorm drops the
// mean(g dy) term and has xhat = x rstd.
template <typename E>
__global__ void NormBackwardDxKernel(bool layer_norm, const E* dout, const E* x, const E* gain,
                                     const float* mean, const float* rstd, E* dx, int64_t c) {
  const int64_t i = blockIdx.x;
  const float mu = layer_norm ? mean[i] : 0.0f;
  const float r = rstd[i];
  float s_g = 0.0f, s_gx = 0.0f;
  for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
    const float xhat = (Load(x + i * c + j) - mu) * r;
    const float gdy = Load(dout + i * c + j) * Load(gain + j);
    s_g += gdy;
    s_gx += gdy * xhat;
  }
  const float mean_g = layer_norm ? BlockSum(s_g) / static_cast<float>(c) : 0.0f;
  const float mean_gx = BlockSum(s_gx) / static_cast<float>(c);
  for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
    const float xhat = (Load(x + i * c + j) - mu) * r;
    const float gdy = Load(dout + i * c + j) * Load(gain + j);
    E* dxj = dx + i * c + j;
    Store(dxj, Load(dxj) + r * (gdy - mean_g - xhat * mean_gx));
  }
}

// Partials of dgain (sum dy xhat) and dbias (sum dy; pb may be null) per chunk of rows; fp32.
template <typename E>
__global__ void NormParamsPartialKernel(bool layer_norm, const E* dout, const E* x,
                                        const float* mean, const float* rstd, float* pg, float* pb,
                                        int64_t n, int64_t c) {
  const int64_t k = blockIdx.y;
  const int64_t begin = k * kChunkRows, end = min(n, begin + kChunkRows);
  for (int64_t j = GlobalIndex(); j < c; j += GlobalStride()) {
    float dg = 0.0f, db = 0.0f;
    for (int64_t i = begin; i < end; ++i) {
      const float dy = Load(dout + i * c + j);
      const float xhat = (Load(x + i * c + j) - (layer_norm ? mean[i] : 0.0f)) * rstd[i];
      dg += dy * xhat;
      db += dy;
    }
    pg[k * c + j] = dg;
    if (pb != nullptr) pb[k * c + j] = db;
  }
}

// --- RoPE (rope.cc) ------------------------------------------------------------------------

// One thread per (row, head, pair i < d/2): the pair (x_i, x_{i+d/2}) rotated by
// sign * angle(pos, i), angle = pos * base^(-2i/d) in double, rounded to float once.
template <typename E>
__global__ void RopeKernel(E* x, int64_t rows, int64_t t, int64_t heads, int64_t d, double base, int64_t pos0,
                           float sign) {
  const int64_t half = d / 2;
  const int64_t total = rows * heads * half;
  for (int64_t idx = GlobalIndex(); idx < total; idx += GlobalStride()) {
    const int64_t i = idx % half;
    const int64_t row_head = idx / half;  // row * heads + h
    const int64_t pos = pos0 + (row_head / heads) % t;
    const double theta = pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(d));
    const double angle = static_cast<double>(pos) * theta;
    const float cs = static_cast<float>(cos(angle));
    const float sn = sign * static_cast<float>(sin(angle));
    E* v = x + row_head * d;
    const float a = Load(v + i);
    const float b = Load(v + i + half);
    Store(v + i, a * cs - b * sn);
    Store(v + i + half, a * sn + b * cs);
  }
}

// --- GELU (gelu.cc, tanh form) and SwiGLU (swiglu.cc) --------------------------------------

constexpr double kSqrt2OverPi = 0.79788456080286535588;  // as gelu.cc
constexpr double kCubic = 0.044715;

template <typename E>
__global__ void GeluForwardKernel(const E* in, E* out, int64_t n) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    const float x = Load(in + i);
    const float u = static_cast<float>(kSqrt2OverPi) * (x + static_cast<float>(kCubic) * x * x * x);
    Store(out + i, 0.5f * x * (1.0f + tanhf(u)));
  }
}

template <typename E>
__global__ void GeluBackwardKernel(const E* dout, const E* in, E* din, int64_t n) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    const float x = Load(in + i);
    const float u = static_cast<float>(kSqrt2OverPi) * (x + static_cast<float>(kCubic) * x * x * x);
    const float th = tanhf(u);
    const float du =
        static_cast<float>(kSqrt2OverPi) * (1.0f + static_cast<float>(3 * kCubic) * x * x);
    Store(din + i,
          Load(din + i) + Load(dout + i) * (0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du));
  }
}

__device__ inline float Sigmoid(float z) { return 1.0f / (1.0f + expf(-z)); }

template <typename E>
__global__ void SwigluForwardKernel(const E* gate, const E* up, E* out, int64_t n) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    const float g = Load(gate + i);
    Store(out + i, g * Sigmoid(g) * Load(up + i));
  }
}

template <typename E>
__global__ void SwigluBackwardKernel(const E* dout, const E* gate, const E* up, E* dgate, E* dup,
                                     int64_t n) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    const float z = Load(gate + i);
    const float s = Sigmoid(z);
    const float dy = Load(dout + i);
    Store(dgate + i, Load(dgate + i) + dy * Load(up + i) * s * (1.0f + z * (1.0f - s)));
    Store(dup + i, Load(dup + i) + dy * z * s);
  }
}

// --- Element-wise helpers ------------------------------------------------------------------

template <typename E>
__global__ void AddKernel(E* dst, const E* src, int64_t n) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    Store(dst + i, Load(dst + i) + Load(src + i));
  }
}

// --- A mixture-of-experts layer's row permutations (backend.h; runtime/cpu/row_ops.h) ------

template <typename E>
__global__ void GatherRowsKernel(const E* src, const int32_t* idx, E* dst, int64_t rows, int64_t c) {
  for (int64_t i = GlobalIndex(); i < rows * c; i += GlobalStride()) {
    dst[i] = src[static_cast<int64_t>(idx[i / c]) * c + i % c];
  }
}

// One thread per column visits every source row in order, so repeated destinations add in the
// CPU's order (deterministic, no atomics).
template <typename E>
__global__ void ScatterAddRowsKernel(const E* src, const int32_t* idx, E* dst, int64_t rows, int64_t c) {
  for (int64_t j = GlobalIndex(); j < c; j += GlobalStride()) {
    for (int64_t i = 0; i < rows; ++i) {
      E* to = dst + static_cast<int64_t>(idx[i]) * c + j;
      Store(to, Load(to) + Load(src + i * c + j));
    }
  }
}

template <typename E>
__global__ void ScaleRowsKernel(E* x, const float* scale, int64_t rows, int64_t c) {
  for (int64_t i = GlobalIndex(); i < rows * c; i += GlobalStride()) Store(x + i, Load(x + i) * scale[i / c]);
}

// One thread per row, summing left to right in double as the CPU does.
template <typename E>
__global__ void RowDotsKernel(const E* a, const E* b, double* out, int64_t rows, int64_t c) {
  for (int64_t i = GlobalIndex(); i < rows; i += GlobalStride()) {
    double sum = 0;
    for (int64_t j = 0; j < c; ++j) sum += static_cast<double>(Load(a + i * c + j)) * Load(b + i * c + j);
    out[i] = sum;
  }
}

template <typename E>
__global__ void AddRowBiasKernel(E* out, const E* bias, int64_t n, int64_t c) {
  for (int64_t idx = GlobalIndex(); idx < n * c; idx += GlobalStride()) {
    Store(out + idx, Load(out + idx) + Load(bias + idx % c));
  }
}

// Partials of the column sums of x per chunk of rows; fp32.
template <typename E>
__global__ void ColumnSumsPartialKernel(const E* x, float* partial, int64_t n, int64_t c) {
  const int64_t k = blockIdx.y;
  const int64_t begin = k * kChunkRows, end = min(n, begin + kChunkRows);
  for (int64_t j = GlobalIndex(); j < c; j += GlobalStride()) {
    float s = 0.0f;
    for (int64_t i = begin; i < end; ++i) s += Load(x + i * c + j);
    partial[k * c + j] = s;
  }
}

}  // namespace

template <typename T>
void CudaTypedKernels<T>::EmbeddingForward(const int32_t* tokens, const T* wte, int64_t vocab_begin,
                                           int64_t vocab, const T* wpe, T* out, int64_t n,
                                           int64_t row0, int64_t seq, int64_t c) {
  CHECK(seq > 0 && row0 >= 0) << "seq " << seq << ", row0 " << row0;
  if (n == 0) return;
  EmbeddingForwardKernel<<<RowBlocks(n), kThreads, 0, ws_.stream()>>>(
      tokens, ToDev(wte), vocab_begin, vocab, ToDev(wpe), ToDev(out), row0, seq, c);
  SHARDSIM_CUDA_CHECK_LAUNCH();
}

template <typename T>
void CudaTypedKernels<T>::EmbeddingBackward(const T* dout, const int32_t* tokens, float* dwte,
                                            int64_t vocab_begin, int64_t vocab, float* dwpe,
                                            int64_t n, int64_t row0, int64_t seq, int64_t c) {
  CHECK(seq > 0 && row0 >= 0) << "seq " << seq << ", row0 " << row0;
  if (n == 0) return;
  auto* next = static_cast<int32_t*>(ws_.Grow(CudaWorkspace::Slot::kTokens, n * 5));
  auto* first = reinterpret_cast<uint8_t*>(next + n);
  TokenLinksKernel<<<BlocksFor(n), kThreads, 0, ws_.stream()>>>(tokens, vocab_begin, vocab, n,
                                                                  next, first);
  SHARDSIM_CUDA_CHECK_LAUNCH();
  EmbeddingBackwardKernel<<<RowBlocks(n), kThreads, 0, ws_.stream()>>>(
      ToDev(dout), tokens, next, first, dwte, vocab_begin, c);
  SHARDSIM_CUDA_CHECK_LAUNCH();
  if (dwpe != nullptr) {
    PositionBackwardKernel<<<RowBlocks(seq), kThreads, 0, ws_.stream()>>>(ToDev(dout), dwpe, n,
                                                                           row0, seq, c);
    SHARDSIM_CUDA_CHECK_LAUNCH();
  }
}

template <typename T>
void CudaTypedKernels<T>::NormForward(Norm kind, const T* x, const T* gain, const T* bias, T* out,
                                      float* mean, float* rstd, int64_t n, int64_t c) {
  if (n == 0) return;
  const bool ln = kind == Norm::kLayerNorm;
  const float eps = static_cast<float>(ln ? kLayerNormEps : kRmsNormEps);
  NormForwardKernel<<<RowBlocks(n), kThreads, 0, ws_.stream()>>>(
      ln, ToDev(x), ToDev(gain), ToDev(bias), ToDev(out), mean, rstd, c, eps);
  SHARDSIM_CUDA_CHECK_LAUNCH();
}

template <typename T>
void CudaTypedKernels<T>::NormBackward(Norm kind, const T* dout, const T* x, const T* gain,
                                       const float* mean, const float* rstd, T* dx, float* dgain,
                                       float* dbias, int64_t n, int64_t c) {
  if (n == 0) return;
  const bool ln = kind == Norm::kLayerNorm;
  NormBackwardDxKernel<<<RowBlocks(n), kThreads, 0, ws_.stream()>>>(
      ln, ToDev(dout), ToDev(x), ToDev(gain), mean, rstd, ToDev(dx), c);
  SHARDSIM_CUDA_CHECK_LAUNCH();
  const int64_t chunks = Chunks(n);
  auto* pg = static_cast<float*>(ws_.Grow(CudaWorkspace::Slot::kColumns, 2 * chunks * c * 4));
  float* pb = ln && dbias != nullptr ? pg + chunks * c : nullptr;
  NormParamsPartialKernel<<<ChunkGrid(n, c), kThreads, 0, ws_.stream()>>>(
      ln, ToDev(dout), ToDev(x), mean, rstd, pg, pb, n, c);
  SHARDSIM_CUDA_CHECK_LAUNCH();
  AddPartialsKernel<<<BlocksFor(c), kThreads, 0, ws_.stream()>>>(pg, chunks, c, dgain);
  SHARDSIM_CUDA_CHECK_LAUNCH();
  if (pb != nullptr) {
    AddPartialsKernel<<<BlocksFor(c), kThreads, 0, ws_.stream()>>>(pb, chunks, c, dbias);
    SHARDSIM_CUDA_CHECK_LAUNCH();
  }
}

template <typename T>
void CudaTypedKernels<T>::RopeForward(T* x, int64_t b, int64_t t, int64_t heads, int64_t d, double base, int64_t pos0) {
  CHECK(d % 2 == 0) << "RoPE needs an even head_dim, got " << d;
  const int64_t total = b * t * heads * (d / 2);
  if (total == 0) return;
  RopeKernel<<<BlocksFor(total), kThreads, 0, ws_.stream()>>>(ToDev(x), b * t, t, heads, d, base, pos0, 1.0f);
  SHARDSIM_CUDA_CHECK_LAUNCH();
}

template <typename T>
void CudaTypedKernels<T>::RopeBackward(T* dx, int64_t b, int64_t t, int64_t heads, int64_t d, double base, int64_t pos0) {
  CHECK(d % 2 == 0) << "RoPE needs an even head_dim, got " << d;
  const int64_t total = b * t * heads * (d / 2);
  if (total == 0) return;
  RopeKernel<<<BlocksFor(total), kThreads, 0, ws_.stream()>>>(ToDev(dx), b * t, t, heads, d, base, pos0, -1.0f);
  SHARDSIM_CUDA_CHECK_LAUNCH();
}

template <typename T>
void CudaTypedKernels<T>::GeluForward(const T* in, T* out, int64_t n) {
  if (n == 0) return;
  GeluForwardKernel<<<BlocksFor(n), kThreads, 0, ws_.stream()>>>(ToDev(in), ToDev(out), n);
  SHARDSIM_CUDA_CHECK_LAUNCH();
}

template <typename T>
void CudaTypedKernels<T>::GeluBackward(const T* dout, const T* in, T* din, int64_t n) {
  if (n == 0) return;
  GeluBackwardKernel<<<BlocksFor(n), kThreads, 0, ws_.stream()>>>(ToDev(dout), ToDev(in),
                                                                  ToDev(din), n);
  SHARDSIM_CUDA_CHECK_LAUNCH();
}

template <typename T>
void CudaTypedKernels<T>::SwigluForward(const T* gate, const T* up, T* out, int64_t n) {
  if (n == 0) return;
  SwigluForwardKernel<<<BlocksFor(n), kThreads, 0, ws_.stream()>>>(ToDev(gate), ToDev(up),
                                                                   ToDev(out), n);
  SHARDSIM_CUDA_CHECK_LAUNCH();
}

template <typename T>
void CudaTypedKernels<T>::SwigluBackward(const T* dout, const T* gate, const T* up, T* dgate,
                                         T* dup, int64_t n) {
  if (n == 0) return;
  SwigluBackwardKernel<<<BlocksFor(n), kThreads, 0, ws_.stream()>>>(
      ToDev(dout), ToDev(gate), ToDev(up), ToDev(dgate), ToDev(dup), n);
  SHARDSIM_CUDA_CHECK_LAUNCH();
}

template <typename T>
void CudaTypedKernels<T>::Add(T* dst, const T* src, int64_t n) {
  if (n == 0) return;
  AddKernel<<<BlocksFor(n), kThreads, 0, ws_.stream()>>>(ToDev(dst), ToDev(src), n);
  SHARDSIM_CUDA_CHECK_LAUNCH();
}

template <typename T>
void CudaTypedKernels<T>::GatherRows(const T* src, const int32_t* idx, T* dst, int64_t rows, int64_t c) {
  if (rows * c == 0) return;
  GatherRowsKernel<<<BlocksFor(rows * c), kThreads, 0, ws_.stream()>>>(ToDev(src), idx, ToDev(dst), rows, c);
  SHARDSIM_CUDA_CHECK_LAUNCH();
}

template <typename T>
void CudaTypedKernels<T>::ScatterAddRows(const T* src, const int32_t* idx, T* dst, int64_t rows, int64_t c) {
  if (rows * c == 0) return;
  ScatterAddRowsKernel<<<BlocksFor(c), kThreads, 0, ws_.stream()>>>(ToDev(src), idx, ToDev(dst), rows, c);
  SHARDSIM_CUDA_CHECK_LAUNCH();
}

template <typename T>
void CudaTypedKernels<T>::ScaleRows(T* x, const float* scale, int64_t rows, int64_t c) {
  if (rows * c == 0) return;
  ScaleRowsKernel<<<BlocksFor(rows * c), kThreads, 0, ws_.stream()>>>(ToDev(x), scale, rows, c);
  SHARDSIM_CUDA_CHECK_LAUNCH();
}

template <typename T>
void CudaTypedKernels<T>::RowDots(const T* a, const T* b, double* out, int64_t rows, int64_t c) {
  if (rows == 0) return;
  RowDotsKernel<<<BlocksFor(rows), kThreads, 0, ws_.stream()>>>(ToDev(a), ToDev(b), out, rows, c);
  SHARDSIM_CUDA_CHECK_LAUNCH();
}

template <typename T>
void CudaTypedKernels<T>::AddRowBias(T* out, const T* bias, int64_t n, int64_t c) {
  if (n * c == 0) return;
  AddRowBiasKernel<<<BlocksFor(n * c), kThreads, 0, ws_.stream()>>>(ToDev(out), ToDev(bias), n, c);
  SHARDSIM_CUDA_CHECK_LAUNCH();
}

template <typename T>
void CudaTypedKernels<T>::AddColumnSums(const T* x, float* out, int64_t n, int64_t c) {
  if (c == 0 || n == 0) return;
  const int64_t chunks = Chunks(n);
  auto* partial = static_cast<float*>(ws_.Grow(CudaWorkspace::Slot::kColumns, chunks * c * 4));
  ColumnSumsPartialKernel<<<ChunkGrid(n, c), kThreads, 0, ws_.stream()>>>(ToDev(x), partial, n, c);
  SHARDSIM_CUDA_CHECK_LAUNCH();
  AddPartialsKernel<<<BlocksFor(c), kThreads, 0, ws_.stream()>>>(partial, chunks, c, out);
  SHARDSIM_CUDA_CHECK_LAUNCH();
}

// The class's members defined here; cuda_cross_entropy.cu and cuda_attention.cu instantiate
// theirs.
template class CudaTypedKernels<float>;
template class CudaTypedKernels<Bf16>;

}  // namespace shardsim::runtime
