// Fused causal GQA attention for bf16 on tensor cores (FlashAttention-2, Dao 2023): the forward
// pass keeps only each row's log-sum-exp and the backward pass recomputes P tile by tile, so
// neither writes a (T, T) matrix to global memory, as the cuBLAS path (cuda_attention.cu) does.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/backend/backend.h"

namespace shardsim::runtime::flash_fused {

// The contract is TypedKernels<Bf16>::FlashAttentionForward / Backward's (backend.h): q, out,
// dout, dq (B*T, H*d) row-major; k, v, dk, dv (B*T, KV*d); query head h reads KV head
// h / (H / KV); lse (B, H, T) fp32; scale 1/sqrt(d); causal. Inputs bf16, arithmetic fp32; P
// and dS are rounded to bf16 for the tensor-core products, as FlashAttention does.

// Whether these kernels take `dims`: every size positive, head_dim a multiple of 16 (whole
// 16x16x16 tensor-core tiles) up to 128 (shared memory: see flash_fused.cu), kv_heads dividing
// heads, and T within the grid's y limit (T <= 65535 * 64). Any T >= 1: partial tiles are
// masked.
bool Supported(const AttentionDims& dims);

// Dynamic shared memory per block of the forward kernel, and the larger of the two backward
// kernels', for head_dim d (flash_fused.cu, flash_fused_backward.cu: 113,152 and 147,968 B at
// d = 128).
int64_t ForwardSharedBytes(int64_t d);
int64_t BackwardSharedBytes(int64_t d);
// Supported(dims), and all three kernels fit the current device's opt-in shared memory per
// block (cudaDevAttrMaxSharedMemoryPerBlockOptin: 227 KB on Hopper, 163 KB on A100, 99 KB on
// sm_86/sm_89, where d >= 80 does not fit and the caller takes the cuBLAS path instead).
bool FitsDevice(const AttentionDims& dims);

// out (B*T, H*d) = softmax(scale Q K^T, causal) V per head, and lse (B, H, T) = each row's
// log sum_j exp(scale q_i . k_j). Asynchronous on `stream`. Requires Supported(dims).
void Forward(cudaStream_t stream, const __nv_bfloat16* q, const __nv_bfloat16* k,
             const __nv_bfloat16* v, float* lse, __nv_bfloat16* out, const AttentionDims& dims);

// Bytes of fp32 workspace Backward needs: delta, B*H*T floats (rounded up to 64), and under GQA
// (heads > kv_heads) the per-query-head dK and dV partials, 2 x B*T*H*d floats (32 MiB at
// Llama 3.2 1B's B 1, T 2048, 32 heads of 64).
int64_t BackwardWorkspaceBytes(const AttentionDims& dims);

// dq += scale dS K, dk += scale dS^T Q, dv += P^T dO, with P = exp(scale Q K^T - lse) (causal)
// and dS = P o (dO V^T - delta), delta_i = dO_i . O_i (Dao 2023, Alg. 2). Each gradient
// element is rounded to bf16 once: new = bf16(float(old) + fp32 sum), the sum in a fixed order
// (no atomics: bitwise the same run to run). `workspace` (BackwardWorkspaceBytes, 256-byte
// aligned) is overwritten; it must stay allocated until the stream reaches the end of this
// call. Asynchronous on `stream`. Requires Supported(dims).
void Backward(cudaStream_t stream, const __nv_bfloat16* dout, const __nv_bfloat16* q,
              const __nv_bfloat16* k, const __nv_bfloat16* v, const __nv_bfloat16* out,
              const float* lse, __nv_bfloat16* dq, __nv_bfloat16* dk, __nv_bfloat16* dv,
              const AttentionDims& dims, float* workspace);

}  // namespace shardsim::runtime::flash_fused
