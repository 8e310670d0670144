// Time of one operator on one GPU: a roofline with the hardware description's achievable
// efficiencies, GEMM wave quantization, and a fixed per-kernel latency:
//   t = kernel_latency + max(executed_flops / (peak x eff x wave_eff), bytes / (hbm_bw x eff_mem))
// Matmuls use the layout dtype's peak (fp8 GEMMs the fp8 peak); attention runs in 16-bit
// (fp8 runs keep bf16 attention, as Transformer Engine does by default).
#pragma once

#include "src/cost/ops.h"
#include "src/hardware/hardware_spec.h"

namespace shardsim {

// Fraction of the last wave of output tiles that keeps SMs busy: tiles / (waves x SMs).
double WaveEfficiency(const GpuSpec& gpu, int64_t m, int64_t n);

// Forward time of `op` in seconds.
double OpForwardTime(const GpuSpec& gpu, DType dtype, const Op& op);
// Backward time (backward_factor x the forward's work, same efficiencies).
double OpBackwardTime(const GpuSpec& gpu, DType dtype, const Op& op);

// Memory-bound time for `bytes` of HBM traffic (optimizer steps, copies).
double MemoryTime(const GpuSpec& gpu, double bytes);

}  // namespace shardsim
