// bf16 matrix products on oneDNN (Debian's libdnnl-dev; CMakeLists.txt SHARDSIM_DNNL): bf16
// inputs, products and sums in fp32, the fp32 result written or added, as a GPU's tensor cores
// (and PyTorch's bf16 autocast on a CPU, which calls the same library) compute them. Where the
// CPU has AMX-BF16 or AVX512-BF16 oneDNN uses them; else its own conversion path. The CPU
// backend's bf16 kernels (cpu_bf16_kernels.h) call it for the linear layers' three products
// instead of widening both operands to fp32 first; without oneDNN they widen.
#pragma once

#include <cstdint>

#include "runtime/backend/bf16.h"

namespace shardsim::runtime {

// Whether the build has oneDNN.
bool HaveBf16Gemm();

// c (m x n, fp32, row-major) = op(a) op(b), or += with `accumulate`; op(a) is m x k, op(b)
// k x n; a and b are row-major bf16, stored transposed when trans_a / trans_b. Any size may be 0
// (nothing to write; k = 0 writes zeros). CHECK-fails without oneDNN or when oneDNN refuses the
// shapes. Deterministic for given shapes and threads.
void Bf16Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const Bf16* a, const Bf16* b,
              float* c, bool accumulate);

// oneDNN's threads (its OpenMP runtime's, for the calling thread); cpu_threads.h calls it.
void SetBf16GemmThreads(int threads);

}  // namespace shardsim::runtime
