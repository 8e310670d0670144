// GemmTable: measured GEMM throughput over a grid of shapes (hardware/gemm/*.yaml) and the
// achieved FLOP/s of any M x N x K GEMM read from it. It exists because one best-shape
// efficiency (efficiency.matmul) has no K dependence and makes mid-size GEMMs too fast: on
// sm_90, 1x1024x1024x2048 bf16 reaches 35 % of peak and 1x4096x4096x256 40 % (REFERENCES 4.2).
//
// File schema (strict; unknown or missing keys are errors with file:line and key path):
//   arch: sm_90                 # the device family the rates were measured on
//   dtype: bf16                 # the GEMM dtype they belong to (only bf16 is read)
//   rates:                      # one map per measured shape, the full grid b x m x n x k
//     - {b: 1, m: 256, n: 256, k: 256, tflops: 6.72}   # b batched m x k by k x n GEMMs, TFLOP/s
// Every combination of the b, m, n and k values that appear must be present exactly once.
//
// The model, for a GEMM of M rows (tokens), N columns and inner size K:
//   1. Rows to (b, m). b x m is the table's row count (a batch of b m-row GEMMs does the
//      work of one (b m)-row GEMM on the same weights' shape). M <= m_max: b = b_min (1),
//      m = M. Larger M: b = the smallest table batch >= ceil(M / m_max), or the largest
//      (4 for sm_90), and m = M / b. So M = 6000 reads b = 2, m = 3000 (measured, not
//      extrapolated), and M = 10000 reads b = 4, m = 2500.
//   2. Interpolate: m, n, k clamped into [smallest, largest] grid value of their axis, then
//      trilinear interpolation of the rate, linear in log2 m, log2 n, log2 k (the grid
//      doubles, and GEMM efficiency grows roughly with the log of each size), at batch b.
//   3. Beyond the grid: a GEMM larger than the largest grid point in m or n (or k) reads the
//      edge value (bigger GEMMs are at least as efficient: the measured rates saturate at
//      ~750-805 TFLOP/s at the 4096 edge) times wave(M, N) / wave(b x m_c, n_c), where m_c,
//      n_c are the sizes the rate was read at and wave() is WaveEfficiency (op_time.h): the
//      measured edge already contains its own wave quantization, so only the difference
//      between the real output's tile waves and the edge shape's is applied. Inside the
//      grid the ratio is 1 (the measurements contain wave quantization). Below the smallest
//      grid point the smallest point's rate is used, with no wave factor.
// The measured rates are of whole kernels, fixed cost included (hardware kernel_latency was
// derived from the same table); op_time.h says what that double counts.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "src/hardware/hardware_spec.h"
#include "src/util/status.h"

namespace shardsim {

class GemmTable {
 public:
  // Parses a table file; `name` stands for the file in messages.
  static StatusOr<std::shared_ptr<const GemmTable>> Parse(const std::string& text,
                                                          const std::string& name);
  // Loads `path`, once per process: a second call with the same file returns the same table.
  static StatusOr<std::shared_ptr<const GemmTable>> Load(const std::string& path);

  // The measured rate (FLOP/s) at a grid point, or nullopt off the grid.
  std::optional<double> Measured(int64_t b, int64_t m, int64_t n, int64_t k) const;
  // Step 2 above at table batch `b` (a value of batches()): FLOP/s.
  double Interpolate(int64_t b, double m, double n, double k) const;
  // The largest measured rate (FLOP/s): the table's saturated rate.
  double saturated_flops() const { return saturated_; }

  const std::string& arch() const { return arch_; }
  const std::string& file() const { return file_; }
  // Sorted axis values.
  const std::vector<int64_t>& batches() const { return axes_[0]; }
  const std::vector<int64_t>& ms() const { return axes_[1]; }
  const std::vector<int64_t>& ns() const { return axes_[2]; }
  const std::vector<int64_t>& ks() const { return axes_[3]; }

 private:
  GemmTable() = default;
  size_t Index(size_t b, size_t m, size_t n, size_t k) const;

  std::string arch_, file_;
  std::vector<int64_t> axes_[4];  // b, m, n, k
  std::vector<double> rates_;     // FLOP/s, [b][m][n][k] row-major over axes_
  double saturated_ = 0;
};

// Step 1 above: the table batch and the per-batch row count a GEMM of `rows` rows reads.
struct GemmTableRows {
  int64_t b = 1;
  double m = 0;
};
GemmTableRows MapGemmRows(const GemmTable& table, int64_t rows);

// Achieved FLOP/s of an m x n x k (rows x columns x inner) 16-bit GEMM on `gpu`: steps 1-3.
double GemmTableFlops(const GpuSpec& gpu, const GemmTable& table, int64_t m, int64_t n, int64_t k);

}  // namespace shardsim
