// Time of one operator on one GPU: a roofline with the hardware description's achievable
// efficiencies, GEMM wave quantization, and a fixed per-kernel latency:
//   t = kernels x kernel_latency + max(executed_flops / (peak x eff x wave_eff), bytes / (hbm_bw x eff_mem))
// (kernels: OpKernels, one per pass but for eager PyTorch's element-wise chains, Op::launches).
// Matmuls use the layout dtype's peak (fp8 GEMMs the fp8 peak); attention runs in 16-bit
// (fp8 runs keep bf16 attention, as Transformer Engine does by default). GEMM and attention
// rates are further multiplied by efficiency.sustained_compute when a description or the
// published-run fit sets it (hardware_spec.h; 1 otherwise); memory-bound time is not.
//
// With a measured GEMM table (efficiency.matmul_table, src/cost/gemm_table.h) the wave factor
// becomes the table's shape factor s = min(1, GemmTableFlops(m, n, k) / the table's saturated
// rate), for 16-bit and fp8 GEMMs alike:
//   compute = work x executed_flops / (peak x eff x s), eff = matmul (fp8: matmul_fp8).
// The best-shape rate stays the hardware description's (MAMF: a brute-force search over
// shapes with torch.matmul, REFERENCES 4.1) and the table says how much less a given shape
// reaches (its K dependence, its size and wave quantization, measured inside the grid and
// WaveEfficiency's ratio beyond it). The table's own best, 804.7 TFLOP/s at 4x4096^3, is above
// MAMF's 794.5: its kernels are XLA's, timed its own way, so only its ratios are used.
// Why one factor for fp8: Hopper's fp8 GEMMs run on the same SMs with the same output tiles,
// so their wave quantization and their loss at short K (fewer main-loop iterations to hide
// prologue and epilogue) have the same causes; fp8 doubles the math rate against the same
// memory and fixed costs, so its real factor at small shapes is if anything lower (s is
// optimistic there). The table's fp8 columns are not used (they exceed the dense fp8 peak;
// hardware/gemm/sm90-bf16.yaml). The backward pass (backward_factor x the forward's work)
// uses the forward's factor: its dgrad (m x k = m x n . n x k) and wgrad (n x k = n x m .
// m x k) GEMMs are permutations of the same sizes; over the grid's b = 1 shapes with m, n,
// k >= 1024 the mean of their rates differs from the forward's by a median 3.2 % and at most
// 9.7 % (4096x4096x1024: 685 TFLOP/s forward, 752 for both permutations). The table's
// times include each kernel's fixed cost, which kernel_latency adds again: at most 5 us per
// GEMM, visible only below ~1024^3.
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

// Kernels the op launches for `work` units of its forward: Op::launches per pass, a pass
// being each started unit (max(1, ceil(work))).
double OpKernels(const Op& op, double work);
// Kernels its forward and its backward launch, fp8 quantization kernels included: what the
// host issues (layer_plan.cc HostFloor).
double OpForwardKernels(const Op& op);
double OpBackwardKernels(const Op& op);

}  // namespace shardsim
