// Calibration (issue 7): micro-benchmarks of the local machine through a Backend, fitted by
// least squares to the cost model's own parameters, so the simulator prices ops the way this
// machine runs them. Each sample (GEMMs over a grid of shapes or a model's shapes, its
// attention, its element-wise ops, streams) carries the cost model's op for it, and the fit is
// of src/cost/op_time.h's own forward time,
//     t = kernel_latency + max(flops / (peak x matmul_efficiency x wave), bytes / (bandwidth x memory_efficiency) + transcendentals / transcendental_rate),
// weighted by 1 / t (relative errors: small ops count as much as large ones): so the
// description written prices every sample exactly as the fit did, and the R^2 and worst error
// quoted are that description's (issue 14, item 7). A rate the samples cannot pin (fitted to
// nothing) is fixed at the fastest rate a sample showed and the others refitted. Collectives, when the backend
// has several ranks, are fitted to the ring all-reduce t = 2 (n - 1) latency + 2 (n - 1) / n x
// S / B_fabric (the simulator's model, Patarasuk and Yuan 2009), as nccl-tests reports them
// (size, time, algbw, busbw).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/backend/backend.h"
#include "src/hardware/hardware_spec.h"
#include "src/layout/layout.h"
#include "src/cost/ops.h"
#include "src/model/model_spec.h"
#include "src/util/status.h"

namespace shardsim::runtime {

struct CalibrationSample {
  std::string what;  // "gemm 128x64x256", "stream 1000000", "all-reduce 4096 B"
  Op op;             // the cost model's op for it (kernel samples)
  double flops = 0, bytes = 0;
  double transcendentals = 0;  // exp/tanh evaluations
  double time_s = 0;        // median over repetitions
  double predicted_s = 0;   // by the fitted model
};

struct CalibrationFit {
  double latency_s = 0;       // kernel latency
  double flop_rate = 0;       // GEMM FLOP/s (peak x matmul efficiency)
  double byte_rate = 0;       // bytes/s of memory-bound ops (bandwidth x memory efficiency)
  double transcendental_rate = 0;  // exp/tanh per second; 0: not priced
  // Where each rate comes from: "fitted", "the fastest sample's" (no fit pinned it), or "the
  // base's" (no sample moved bytes, or evaluated exp/tanh).
  std::string byte_rate_source, transcendental_rate_source;
  double r2 = 0;              // coefficient of determination of the times, as the description prices them
  double max_rel_error = 0;   // over the samples, |predicted - measured| / measured
};

struct CollectiveFit {
  int ranks = 0;
  double latency_s = 0;       // per ring step
  double bandwidth = 0;       // bytes/s per link
  double max_rel_error = 0;
};

struct CalibrationResult {
  HardwareSpec hardware;  // `base` with the fitted figures in place
  DType dtype = DType::kFp32;  // the kernels' storage type (CalibrationOptions::dtype)
  CalibrationFit compute;
  std::vector<CalibrationSample> samples;
  bool have_collectives = false;
  CollectiveFit collectives;
  std::vector<CalibrationSample> collective_samples;
};

// A GEMM out (rows, cols) = in (rows, inner) x w^T, as LinearForward runs it.
struct GemmShape {
  int64_t rows = 0, inner = 0, cols = 0;
};

struct CalibrationOptions {
  // The cases benchmarked; empty: a generic grid (tokens 64-1024 by weights 64-1024) and
  // streams of 1K-4M floats. WorkloadCases fills them with one model's shapes instead.
  std::vector<GemmShape> gemms;
  std::vector<int64_t> streams;  // element counts of dst += src
  struct Attention {
    int64_t batch = 0, seq = 0, heads = 0, kv_heads = 0, head_dim = 0;
  };
  std::vector<Attention> attention;  // unfused attention forward, timed as GEMM FLOPs
  // The element-wise ops of a model's op list, each timed on the kernel that runs it and
  // counted with the bytes the simulator charges it (so B is what these kernels achieve on
  // the simulator's byte counts, not a bare copy's rate).
  struct ElementwiseOp {
    std::string name;  // the simulator's op name, for display: norm1, mlp_swiglu, ...
    OpRole role = OpRole::kResidual;  // which kernel times it (src/cost/ops.h)
    int64_t rows = 0, cols = 0;  // tokens x width
    double bytes = 0;
    double transcendentals = 0;  // exp/tanh evaluations, as the simulator counts them
    Norm norm = Norm::kRmsNorm;
    Activation activation = Activation::kSwiglu;
  };
  std::vector<ElementwiseOp> elementwise;
  // The storage type the kernels are timed in (fp32, or bf16 for mixed precision); the fit
  // goes to that dtype's peak and the matmul efficiency is relative to it, so a description
  // calibrated in bf16 prices bf16 layouts.
  DType dtype = DType::kFp32;
  double min_sample_s = 2e-3;  // repeat each case until it runs this long, then take medians
  int repetitions = 5;         // timed medians per case
  std::function<void(const std::string&)> progress;  // one line per case; may be empty
};

// The shapes one model runs under `l` on a rank: each linear layer's forward GEMM and its two
// backward GEMMs (input and weight gradients), the attention, and a stream per element-wise
// op of the simulator's op list (src/cost/ops.h) moving the same bytes. Calibrating on them
// fits the figures where that model's predictions need them.
void AddWorkloadCases(const ModelSpec& m, const Layout& l, CalibrationOptions* o);

// Benchmarks `backend` (its kernels; its collectives when its world has several ranks, a
// collective call that every rank must make) and fits `base`'s figures: gpu.efficiency.matmul,
// .memory and .kernel_latency for the backend's fp32 kernels (attention stays as it is: the
// runtime's attention is unfused, which the simulator prices as GEMMs and streams), and
// node.fabric.efficiency and .latency (with collectives.base_latency 0) from the all-reduce.
StatusOr<CalibrationResult> Calibrate(Backend& backend, const HardwareSpec& base,
                                      const CalibrationOptions& options);

// The calibrated description as YAML (the schema of hardware/*.yaml) with a header of comments
// recording how each figure was measured and how well it fits.
std::string CalibratedHardwareYaml(const CalibrationResult& r, const std::string& name,
                                   const std::string& base_name);

// Fits r->hardware (the base description on entry) to r->samples (each with its op and
// measured time, in r->dtype's kernels): matmul and memory efficiency, kernel latency and
// transcendental rate in place, each sample's predicted_s set to the fitted description's
// OpForwardTime, and r->compute. Exposed for tests; Calibrate calls it.
Status FitOpTimes(CalibrationResult* r);

// Weighted non-negative least squares of t = x . theta over rows of x (one column per
// parameter), each row weighted by 1 / t: the minimizer of sum ((x_i . theta - t_i) / t_i)^2
// with theta >= 0 (rates and latencies are not negative); *r2 (if given) is the coefficient of
// determination of the fitted times. Exposed for tests.
std::vector<double> RelativeLeastSquares(const std::vector<std::vector<double>>& x,
                                         const std::vector<double>& t, double* r2);

}  // namespace shardsim::runtime
