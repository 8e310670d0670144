// The GEMMs of Megatron-LM's Transformer Engine modules (linear_qkv, linear_proj, linear_fc1,
// linear_fc2, the experts' grouped fc1 and fc2), which dtype=fp8 runs in fp8 (TE's
// fp8_autocast with the HYBRID format and current scaling, runtime/backend/fp8.h) and every
// other dtype as the storage type's LinearForward / LinearBackward. The output layer and the
// router are not TE modules and stay 16-bit (megatron/core/models/gpt/gpt_model.py's
// output_layer is tensor_parallel.ColumnParallelLinear; the router's GEMM is a torch linear).
//
// A call is one module: projections that share an input (Q, K and V; SwiGLU's gate and up),
// whose fused weight Megatron keeps as one tensor, so one scale: the weights' amax, and in the
// backward the output gradients', are taken over all of them, and the input gradient is one
// fp32 sum rounded once. Under fp8 the forward quantizes the input (E4M3) and the weights
// (E4M3); the backward the output gradients (E5M2, and their transpose for the weight
// gradient), the input's transpose and the weights' transpose; the biases' gradients are the
// 16-bit output gradients' column sums, as TE's fused cast-and-dbias kernel computes them.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/exec/exec_context.h"

namespace shardsim::runtime {

template <typename T>
struct TeProj {
  const T* w;      // (m, k)
  const T* bias;   // (m), or null
  T* out;          // (n, m), written
  int64_t m;
};

// out_i = in (n, k) w_i^T + bias_i for each projection.
template <typename T>
Status TeForward(ExecContext& ctx, const T* in, int64_t n, int64_t k, const std::vector<TeProj<T>>& projs);

template <typename T>
struct TeGrad {
  const T* dout;   // (n, m)
  const T* w;      // (m, k); read when there is an input gradient
  float* dw;       // (m, k), added into; null: no weight gradient in this call
  float* db;       // (m), added into; or null
  int64_t m;
};

// din (n, k) += sum_i dout_i w_i (when din is not null); dw_i += dout_i^T in and db_i += the
// column sums of dout_i (when not null; `in` (n, k) is read only then). Without fp8 one
// LinearBackward per projection, in order, so the sums are those of the unfused calls.
template <typename T>
Status TeBackward(ExecContext& ctx, const std::vector<TeGrad<T>>& grads, const T* in, T* din, int64_t n,
                  int64_t k);

}  // namespace shardsim::runtime
