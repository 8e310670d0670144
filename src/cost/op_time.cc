// See op_time.h.
#include "src/cost/op_time.h"

#include <algorithm>
#include <cmath>

#include "src/cost/gemm_table.h"
#include "src/util/check.h"

namespace shardsim {
namespace {

double MatmulPeak(const GpuSpec& gpu, DType dtype) {
  if (auto p = gpu.Peak(dtype)) return *p;
  // Validation rejects a dtype the GPU lacks; fall back to the best rate it has.
  double best = 0;
  for (const auto& [d, rate] : gpu.peak_flops) best = std::max(best, rate);
  return best;
}

double AttentionPeak(const GpuSpec& gpu, DType dtype) {
  return MatmulPeak(gpu, dtype == DType::kFp8 ? DType::kBf16 : dtype);
}

// FLOP/s of a matmul's GEMM in `gemm` precision (op_time.h): the best-shape rate, peak x
// efficiency (matmul, or matmul_fp8 for fp8), times the shape factor: with a measured table
// s = min(1, GemmTableFlops(m, n, k) / the table's saturated rate), else WaveEfficiency(m, n).
double MatmulRate(const GpuSpec& gpu, DType gemm, const Op& op) {
  const GpuEfficiency& e = gpu.efficiency;
  const double eff = gemm == DType::kFp8 && e.matmul_fp8 > 0 ? e.matmul_fp8 : e.matmul;
  const double base = MatmulPeak(gpu, gemm) * eff;
  const GemmTable* table = e.matmul_table.get();
  if (table != nullptr && (gemm == DType::kBf16 || gemm == DType::kFp16 || gemm == DType::kFp8)) {
    return base * std::min(1.0, GemmTableFlops(gpu, *table, op.m, op.n, op.k) / table->saturated_flops());
  }
  return base * WaveEfficiency(gpu, op.m, op.n);
}

// The fused attention kernel's executed FLOPs against the op's: its head sizes padded to the
// size the kernel is compiled for (GpuEfficiency::attention_head_dims). FlashAttention-2 runs
// one kHeadDim for queries, keys and values, the smallest bucket not below the largest of them
// (csrc/flash_attn/src/static_switch.h, HEADDIM_SWITCH); both products (QK^T over the key
// size, PV over the value size) then run at kHeadDim: 2 kHeadDim / (head_dim + v_head_dim).
double HeadDimPadding(const GpuSpec& gpu, const Op& op) {
  const std::vector<int64_t>& dims = gpu.efficiency.attention_head_dims;
  const int64_t d = std::max(op.head_dim, op.v_head_dim);
  if (dims.empty() || d <= 0) return 1;
  const auto it = std::lower_bound(dims.begin(), dims.end(), d);
  if (it == dims.end()) return 1;  // beyond the kernel's sizes: priced as given
  return 2.0 * static_cast<double>(*it) / static_cast<double>(op.head_dim + op.v_head_dim);
}

// The fused attention kernel's measured fraction of the 16-bit peak at the op's length, from
// the description's table for its implementation (Op::attention_impl). CheckLayout refuses an
// implementation whose table the description lacks; should one get here, 0 would divide by
// zero, so the check is repeated.
double AttentionRate(const GpuEfficiency& e, const Op& op) {
  double rate = 0;
  switch (op.attention_impl) {
    case AttentionImpl::kFlash1: rate = e.AttentionV1At(op.attention_seq); break;
    case AttentionImpl::kCudnn: rate = e.AttentionCudnnAt(op.attention_seq); break;
    default: rate = e.AttentionAt(op.attention_seq); break;
  }
  CHECK(rate > 0) << "attention=" << AttentionName(op.attention_impl) << " has no rate in this description";
  return rate;
}

// Time for `work` units of the op's forward (1 = forward, backward_factor = backward).
double Time(const GpuSpec& gpu, DType dtype, const Op& op, double work) {
  const GpuEfficiency& e = gpu.efficiency;
  // The op's launches per pass (a backward GEMM pair counts as the passes it does).
  const double kernels = OpKernels(op, work);
  double compute = 0;
  if (op.kind == OpKind::kMatmul) {
    const DType gemm = dtype == DType::kFp8 && op.bf16_under_fp8 ? DType::kBf16 : dtype;
    compute = work * op.executed_flops / (MatmulRate(gpu, gemm, op) * e.sustained());
  } else if (op.kind == OpKind::kAttention) {
    compute = work * op.executed_flops * HeadDimPadding(gpu, op) /
              (AttentionPeak(gpu, dtype) * AttentionRate(e, op) * e.sustained());
  }
  double memory = work * op.bytes / (gpu.memory_bandwidth * e.memory);
  if (gpu.transcendental_rate > 0) memory += work * op.transcendentals / gpu.transcendental_rate;
  return kernels * e.kernel_latency_s + std::max(compute, memory);
}

}  // namespace

double OpKernels(const Op& op, double work) { return static_cast<double>(op.launches) * std::max(1.0, std::ceil(work)); }

double OpForwardKernels(const Op& op) { return OpKernels(op, 1.0) + (op.fp8_cast_forward_bytes > 0 ? 1 : 0); }

double OpBackwardKernels(const Op& op) {
  return OpKernels(op, op.backward_factor) + (op.fp8_cast_backward_bytes > 0 ? 1 : 0);
}

double WaveEfficiency(const GpuSpec& gpu, int64_t m, int64_t n) {
  const int64_t tm = gpu.efficiency.tile_m, tn = gpu.efficiency.tile_n;
  const int64_t tiles = ((m + tm - 1) / tm) * ((n + tn - 1) / tn);
  if (tiles <= 0) return 1;
  const int64_t waves = (tiles + gpu.sm_count - 1) / gpu.sm_count;
  return static_cast<double>(tiles) / static_cast<double>(waves * gpu.sm_count);
}

// A pass's fp8 quantization kernel (Op::fp8_cast_*_bytes), when it has one: one launch and
// its bytes at the achieved memory bandwidth.
double CastTime(const GpuSpec& gpu, double bytes) {
  return bytes > 0 ? gpu.efficiency.kernel_latency_s + MemoryTime(gpu, bytes) : 0;
}

double OpForwardTime(const GpuSpec& gpu, DType dtype, const Op& op) {
  return Time(gpu, dtype, op, 1.0) + CastTime(gpu, op.fp8_cast_forward_bytes);
}

double OpBackwardTime(const GpuSpec& gpu, DType dtype, const Op& op) {
  return Time(gpu, dtype, op, op.backward_factor) + CastTime(gpu, op.fp8_cast_backward_bytes);
}

double MemoryTime(const GpuSpec& gpu, double bytes) {
  CHECK(bytes >= 0) << "negative bytes";
  return bytes / (gpu.memory_bandwidth * gpu.efficiency.memory);
}

}  // namespace shardsim
