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
// fp32 sum rounded once. Under fp8 the forward quantizes the input (E4M3) and takes the
// weights' codes from the module's cache (fp8_weight_cache.h); the backward quantizes the
// output gradients (E5M2, and their transpose for the weight gradient) and reads the cached
// weights' transpose and the input's transpose; the biases' gradients are the 16-bit output
// gradients' column sums, as TE's fused cast-and-dbias kernel computes them. A module may keep
// its quantized input for the backward (Fp8Saved), as TE saves the fp8 input, not the bf16.
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

#include "runtime/exec/exec_context.h"

namespace shardsim::runtime {

// A module's place in its layer (the weight cache's key with the layer, ExecContext::layer).
enum TeModule : int32_t { kTeQkv = 0, kTeProj = 1, kTeFc1 = 2, kTeFc2 = 3, kTeExperts = 4 };
// Local expert `e`'s fc1 (gate and up) or fc2.
inline int32_t TeExpertModule(int64_t e, bool fc2) { return kTeExperts + 2 * static_cast<int32_t>(e) + (fc2 ? 1 : 0); }

template <typename T>
struct TeProj {
  const T* w;      // (m, k)
  const T* bias;   // (m), or null
  T* out;          // (n, m), written
  int64_t m;
};

// A module's input as TE saves it under fp8 for the weight gradient: rows of its codes, and
// the factor back (1 byte an element, as activations).
struct Fp8Saved {
  DeviceBuffer codes;  // (rows, k), row-major
  float scale_inv = 1;
  bool empty() const { return codes.empty(); }
};

// Under fp8, where TeForward keeps rows [from, from + rows) of its quantized input (SP: this
// rank's rows of the gathered input). Ignored without fp8.
struct TeSave {
  Fp8Saved* to = nullptr;
  int64_t from = 0, rows = 0;
};

// out_i = in (n, k) w_i^T + bias_i for each projection.
template <typename T>
Status TeForward(ExecContext& ctx, int32_t module, const T* in, int64_t n, int64_t k,
                 const std::vector<TeProj<T>>& projs, TeSave save = {});

template <typename T>
struct TeGrad {
  const T* dout;   // (n, m)
  const T* w;      // (m, k); read when there is an input gradient
  float* dw;       // (m, k), added into; null: no weight gradient in this call
  float* db;       // (m), added into; or null
  int64_t m;
  int32_t slot = -1;  // its place among the module's forward projections (-1: its place here)
};

// The input a weight gradient reads: 16/32-bit values, or under fp8 the saved codes (n, k).
template <typename T>
struct TeIn {
  TeIn(const T* values) : x(values) {}  // NOLINT: a plain input converts
  TeIn(const uint8_t* fp8_codes, float fp8_scale_inv) : codes(fp8_codes), scale_inv(fp8_scale_inv) {}
  const T* x = nullptr;
  const uint8_t* codes = nullptr;
  float scale_inv = 1;
};

// din (n, k) += sum_i dout_i w_i (when din is not null); dw_i += dout_i^T in and db_i += the
// column sums of dout_i (when not null; `in` is read only then). `module` names the cached fp8
// weights (read for din). Without fp8 one LinearBackward per projection, in order, so the sums
// are those of the unfused calls.
template <typename T>
Status TeBackward(ExecContext& ctx, int32_t module, const std::vector<TeGrad<T>>& grads,
                  std::type_identity_t<TeIn<T>> in, T* din, int64_t n, int64_t k);

}  // namespace shardsim::runtime
