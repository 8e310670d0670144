// See cuda_fp8_kernels.h. The conversions restate backend/fp8.cc's through a table of each
// format's 256 code values (FromFp8, computed on the host): decoding looks a code up; encoding
// finds the largest non-negative code value at or below |v| (binary search over the ordered
// finite codes) and rounds to the nearer of it and the next, a tie to the even code. Codes of a
// binade step by 2^(e - m) with the mantissa field counting up, so the even code is the even
// mantissa (at a binade's top the next binade's first, mantissa 0), which is fp8.cc's
// nearbyint on q; values at or past the largest finite code give it (SATFINITE).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "runtime/backend/fp8.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/cuda_device.cuh"
#include "runtime/cuda/cuda_fp8_kernels.h"
#include "runtime/cuda/cuda_gemm.h"

namespace shardsim::runtime {
namespace {

using cuda_device::BlockMax;
using cuda_device::BlocksFor;
using cuda_device::GlobalIndex;
using cuda_device::GlobalStride;
using cuda_device::kThreads;
using cuda_device::Load;
using cuda_device::Store;
using cuda_device::ToDev;
using cuda_gemm::In;
using cuda_gemm::Out;

// A format's code values, passed to the kernels by value: value[c] for codes 0..255, and the
// largest finite non-negative code (0x7E for E4M3, whose 0x7F is NaN; 0x7B for E5M2, whose 0x7C
// is infinity) and the NaN code without its sign.
struct Fp8Table {
  float value[256];
  int max_code;
  int nan_code;
};

Fp8Table TableOf(Fp8Format f) {
  Fp8Table t;
  for (int c = 0; c < 256; ++c) t.value[c] = FromFp8(static_cast<uint8_t>(c), f);
  t.max_code = f == Fp8Format::kE4M3 ? 0x7E : 0x7B;
  t.nan_code = f == Fp8Format::kE4M3 ? 0x7F : 0x7E;
  return t;
}

const Fp8Table& Table(Fp8Format f) {
  static const Fp8Table e4m3 = TableOf(Fp8Format::kE4M3), e5m2 = TableOf(Fp8Format::kE5M2);
  return f == Fp8Format::kE4M3 ? e4m3 : e5m2;
}

__device__ inline uint8_t Encode(float v, const Fp8Table& t) {
  // copysignf and v != v: the sign bit (of -0 too) and NaN with the same calls in nvcc's
  // device code and the emulator's C++.
  const uint8_t sign = copysignf(1.0f, v) < 0 ? 0x80 : 0;
  if (v != v) return sign | static_cast<uint8_t>(t.nan_code);
  const float a = fabsf(v);
  if (a >= t.value[t.max_code]) return sign | static_cast<uint8_t>(t.max_code);
  int lo = 0, hi = t.max_code;  // value[lo] <= a < value[hi]
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (t.value[mid] <= a) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  // The midpoint of two neighbouring fp8 values needs one more mantissa bit: exact in float.
  const float half = 0.5f * (t.value[lo] + t.value[hi]);
  const int code = a < half ? lo : a > half ? hi : ((lo & 1) == 0 ? lo : hi);
  return sign | static_cast<uint8_t>(code);
}

// Each block's largest magnitude into partial[blockIdx.x] (grid-stride), then one block's over
// those: max is exact in any order, so the result does not depend on the grid.
__global__ void AmaxKernel(const __nv_bfloat16* x, int64_t n, float* partial) {
  float m = 0.0f;
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) m = fmaxf(m, fabsf(Load(x + i)));
  const float block = BlockMax(m);
  if (threadIdx.x == 0) partial[blockIdx.x] = block;
}

__global__ void MaxOfKernel(const float* partial, int64_t n, float* out) {
  float m = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) m = fmaxf(m, partial[i]);
  const float all = BlockMax(m);
  if (threadIdx.x == 0) *out = all;
}

__global__ void QuantizeKernel(const __nv_bfloat16* x, int64_t rows, int64_t cols, float scale, Fp8Table t,
                               uint8_t* codes, uint8_t* transposed) {
  for (int64_t idx = GlobalIndex(); idx < rows * cols; idx += GlobalStride()) {
    const uint8_t q = Encode(Load(x + idx) * scale, t);
    if (codes != nullptr) codes[idx] = q;
    if (transposed != nullptr) transposed[(idx % cols) * rows + idx / cols] = q;
  }
}

__global__ void TransposeKernel(const uint8_t* codes, int64_t rows, int64_t cols, uint8_t* out) {
  for (int64_t idx = GlobalIndex(); idx < rows * cols; idx += GlobalStride()) {
    out[(idx % cols) * rows + idx / cols] = codes[idx];
  }
}

__global__ void DecodeKernel(const uint8_t* codes, int64_t n, Fp8Table t, __nv_bfloat16* out) {
  for (int64_t idx = GlobalIndex(); idx < n; idx += GlobalStride()) Store(out + idx, t.value[codes[idx]]);
}

// out (n, m) bf16 = c (+ bias[j]) (+ out when accumulating), in CpuFp8Kernels::Gemm's order,
// rounded once.
__global__ void FinishKernel(const float* c, const __nv_bfloat16* bias, bool accumulate, __nv_bfloat16* out,
                             int64_t n, int64_t m) {
  for (int64_t idx = GlobalIndex(); idx < n * m; idx += GlobalStride()) {
    float v = c[idx];
    if (bias != nullptr) v += Load(bias + idx % m);
    if (accumulate) v += Load(out + idx);
    Store(out + idx, v);
  }
}

int64_t AlignUp(int64_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace

CudaFp8Kernels::CudaFp8Kernels(CudaWorkspace& ws) : ws_(ws) {
  SHARDSIM_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&host_amax_), sizeof(float)));
}

CudaFp8Kernels::~CudaFp8Kernels() { (void)cudaFreeHost(host_amax_); }

float CudaFp8Kernels::Amax(const Bf16* x, int64_t count) {
  if (count == 0) return 0;
  const int blocks = BlocksFor(count);
  auto* partial = static_cast<float*>(ws_.Grow(CudaWorkspace::Slot::kFp8, (blocks + 1) * static_cast<int64_t>(sizeof(float))));
  float* out = partial + blocks;
  AmaxKernel<<<blocks, kThreads, 0, ws_.stream()>>>(ToDev(x), count, partial);
  SHARDSIM_CUDA_CHECK_LAUNCH();
  MaxOfKernel<<<1, kThreads, 0, ws_.stream()>>>(partial, blocks, out);
  SHARDSIM_CUDA_CHECK_LAUNCH();
  SHARDSIM_CUDA_CHECK(cudaMemcpyAsync(host_amax_, out, sizeof(float), cudaMemcpyDeviceToHost, ws_.stream()));
  SHARDSIM_CUDA_CHECK(cudaStreamSynchronize(ws_.stream()));
  return *host_amax_;
}

void CudaFp8Kernels::Quantize(const Bf16* x, int64_t rows, int64_t cols, Fp8Format format, float scale,
                              uint8_t* codes, uint8_t* transposed) {
  if (rows * cols == 0 || (codes == nullptr && transposed == nullptr)) return;
  QuantizeKernel<<<BlocksFor(rows * cols), kThreads, 0, ws_.stream()>>>(ToDev(x), rows, cols, scale, Table(format),
                                                                         codes, transposed);
  SHARDSIM_CUDA_CHECK_LAUNCH();
}

void CudaFp8Kernels::Transpose(const uint8_t* codes, int64_t rows, int64_t cols, uint8_t* out) {
  if (rows * cols == 0) return;
  TransposeKernel<<<BlocksFor(rows * cols), kThreads, 0, ws_.stream()>>>(codes, rows, cols, out);
  SHARDSIM_CUDA_CHECK_LAUNCH();
}

// Per term: a (n, k) and b (m, k) decoded to bf16, then C (n, m) += scale_inv_a scale_inv_b a b^T
// in fp32 (the first term with beta 0 into the scratch, or beta 1 into out_f32). Scratch (Slot
// kFp8): the fp32 C (when writing bf16), then the largest term's two decoded operands.
void CudaFp8Kernels::Gemm(const std::vector<Product>& terms, int64_t n, int64_t m, Bf16* out_bf16, bool accumulate,
                          float* out_f32, const Bf16* bias) {
  CHECK((out_bf16 == nullptr) != (out_f32 == nullptr)) << "an fp8 GEMM writes bf16 or adds into fp32";
  int64_t k_max = 0;
  for (const Product& t : terms) k_max = std::max(k_max, t.k);
  const int64_t c_bytes = out_bf16 != nullptr ? AlignUp(n * m * static_cast<int64_t>(sizeof(float))) : 0;
  const int64_t a_bytes = AlignUp(n * k_max * static_cast<int64_t>(sizeof(__nv_bfloat16)));
  const int64_t b_bytes = m * k_max * static_cast<int64_t>(sizeof(__nv_bfloat16));
  auto* base = static_cast<char*>(ws_.Grow(CudaWorkspace::Slot::kFp8, std::max<int64_t>(c_bytes + a_bytes + b_bytes, 1)));
  float* c = out_bf16 != nullptr ? reinterpret_cast<float*>(base) : out_f32;
  auto* a = reinterpret_cast<Bf16*>(base + c_bytes);
  auto* b = reinterpret_cast<Bf16*>(base + c_bytes + a_bytes);
  if (out_bf16 != nullptr && n * m > 0) SHARDSIM_CUDA_CHECK(cudaMemsetAsync(c, 0, n * m * sizeof(float), ws_.stream()));
  for (const Product& t : terms) {
    if (n * m * t.k == 0) continue;
    DecodeKernel<<<BlocksFor(n * t.k), kThreads, 0, ws_.stream()>>>(t.a.codes, n * t.k, Table(t.a.format), ToDev(a));
    SHARDSIM_CUDA_CHECK_LAUNCH();
    DecodeKernel<<<BlocksFor(m * t.k), kThreads, 0, ws_.stream()>>>(t.b.codes, m * t.k, Table(t.b.format), ToDev(b));
    SHARDSIM_CUDA_CHECK_LAUNCH();
    ws_.gemm().Run(n, m, t.k, t.a.scale_inv * t.b.scale_inv, In<Bf16>(a, t.k, false), In<Bf16>(b, t.k, true), 1.0f,
                   Out(c, m));
  }
  if (out_bf16 != nullptr && n * m > 0) {
    FinishKernel<<<BlocksFor(n * m), kThreads, 0, ws_.stream()>>>(c, ToDev(bias), accumulate, ToDev(out_bf16), n, m);
    SHARDSIM_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace shardsim::runtime
