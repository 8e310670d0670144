// See calibrate.h.
#include "runtime/calibrate/calibrate.h"

#include <type_traits>

#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "src/cost/ops.h"
#include "src/io/plan_file.h"

namespace shardsim::runtime {
namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

// Calls per timed repetition so one repetition lasts at least min_sample_s. For a collective,
// `agree` makes every rank see the slowest rank's time, so all make the same calls.
StatusOr<int> CallsFor(Backend& b, const std::function<void()>& op, double min_sample_s,
                       const std::function<Status(double*)>& agree = nullptr) {
  int calls = 1;
  while (calls < (1 << 20)) {
    const double t0 = b.Now();
    for (int i = 0; i < calls; ++i) op();
    double elapsed = b.Now() - t0;
    if (agree) SHARDSIM_RETURN_IF_ERROR(agree(&elapsed));
    if (elapsed >= min_sample_s) break;
    calls *= 2;
  }
  return calls;
}

// Median seconds per call over the repetitions, `calls` calls each.
double TimePerCall(Backend& b, const std::function<void()>& op, int calls, int repetitions) {
  std::vector<double> per_call;
  for (int r = 0; r < repetitions; ++r) {
    const double t0 = b.Now();
    for (int i = 0; i < calls; ++i) op();
    per_call.push_back((b.Now() - t0) / calls);
  }
  return Median(per_call);
}

std::string Fmt(const char* format, double a, double b = 0, double c = 0) {
  char text[160];
  std::snprintf(text, sizeof(text), format, a, b, c);
  return text;
}

}  // namespace

std::vector<double> RelativeLeastSquares(const std::vector<std::vector<double>>& x,
                                         const std::vector<double>& t, double* r2) {
  const Eigen::Index rows = static_cast<Eigen::Index>(x.size());
  const Eigen::Index cols = rows == 0 ? 0 : static_cast<Eigen::Index>(x[0].size());
  Eigen::MatrixXd a(rows, cols);
  const Eigen::VectorXd y = Eigen::VectorXd::Ones(rows);  // t_i / t_i
  for (Eigen::Index i = 0; i < rows; ++i) {
    for (Eigen::Index j = 0; j < cols; ++j) a(i, j) = x[i][j] / t[i];
  }
  // Non-negative least squares by enumeration: every subset of free parameters (the others
  // 0), solved by QR; the best fit with no negative parameter wins. 2^cols solves, cols <= 4.
  Eigen::VectorXd best = Eigen::VectorXd::Zero(cols);
  double best_residual = y.squaredNorm();
  for (unsigned mask = 1; mask < (1u << cols); ++mask) {
    std::vector<Eigen::Index> free;
    for (Eigen::Index j = 0; j < cols; ++j) {
      if (mask & (1u << j)) free.push_back(j);
    }
    Eigen::MatrixXd sub(rows, static_cast<Eigen::Index>(free.size()));
    for (size_t f = 0; f < free.size(); ++f) sub.col(static_cast<Eigen::Index>(f)) = a.col(free[f]);
    const Eigen::VectorXd part = sub.colPivHouseholderQr().solve(y);
    if ((part.array() < 0).any()) continue;
    const double residual = (sub * part - y).squaredNorm();
    if (residual < best_residual) {
      best_residual = residual;
      best.setZero();
      for (size_t f = 0; f < free.size(); ++f) best(free[f]) = part(static_cast<Eigen::Index>(f));
    }
  }
  if (r2 != nullptr) {
    // Coefficient of determination of the times themselves: 1 - SS_res / SS_tot.
    double mean = 0;
    for (double v : t) mean += v / static_cast<double>(t.size());
    double res = 0, tot = 0;
    for (Eigen::Index i = 0; i < rows; ++i) {
      const double fitted = a.row(i).dot(best) * t[i];  // rows of `a` are x_i / t_i
      res += (t[i] - fitted) * (t[i] - fitted);
      tot += (t[i] - mean) * (t[i] - mean);
    }
    *r2 = tot > 0 ? 1.0 - res / tot : 1.0;
  }
  return std::vector<double>(best.data(), best.data() + best.size());
}

void AddWorkloadCases(const ModelSpec& m, const Layout& l, CalibrationOptions* o) {
  std::vector<Op> ops = LayerOps(m, l, false);
  for (const Op& op : HeadOps(m, l)) ops.push_back(op);
  for (const Op& op : EmbeddingOps(m, l)) ops.push_back(op);
  const int64_t tokens = l.mbs * m.seq_len / l.cp;
  for (const Op& op : ops) {
    switch (op.role) {
      case OpRole::kQkv:
      case OpRole::kProjection:
      case OpRole::kRouter:
      case OpRole::kMlpUp:
      case OpRole::kMlpDown:
      case OpRole::kLmHead:
        o->gemms.push_back({op.m, op.k, op.n});  // forward: tokens x in -> out
        o->gemms.push_back({op.m, op.n, op.k});  // input gradient: dY W
        o->gemms.push_back({op.n, op.m, op.k});  // weight gradient: dY^T X
        break;
      case OpRole::kNorm:
      case OpRole::kResidual:
      case OpRole::kEmbedding:
        o->elementwise.push_back({op.name, op.role, tokens, m.hidden, op.bytes, op.transcendentals, m.norm, m.activation});
        break;
      case OpRole::kMlpActivation:
        o->elementwise.push_back({op.name, op.role, tokens, m.ffn_hidden / l.tp, op.bytes, op.transcendentals, m.norm, m.activation});
        break;
      case OpRole::kCrossEntropy:
        o->elementwise.push_back({op.name, op.role, tokens, m.vocab / l.tp, op.bytes, op.transcendentals, m.norm, m.activation});
        break;
      case OpRole::kAttentionScores:  // the attention (scores, softmax, dropout, context, or
      case OpRole::kSoftmax:          // the fused kernel) is timed as one case below
      case OpRole::kAttentionDropout:
      case OpRole::kAttentionContext:
      case OpRole::kFlashAttention:
        break;
    }
  }
  o->attention.push_back({l.mbs, m.seq_len, m.heads / l.tp, std::max<int64_t>(1, m.kv_heads / l.tp), m.head_dim});
}

namespace {

using Measure = std::function<void(const std::string& what, double flops, double bytes,
                                   double specials, const std::function<void()>& op)>;

// Elements of scratch the cases need (at least 4M, at most 256M).
int64_t ScratchElements(const CalibrationOptions& o) {
  int64_t need = int64_t{1} << 22;
  for (const GemmShape& g : o.gemms) need = std::max({need, g.rows * g.inner, g.inner * g.cols, g.rows * g.cols});
  for (const CalibrationOptions::Attention& at : o.attention) {
    need = std::max({need, at.batch * at.heads * at.seq * at.seq, at.batch * at.seq * at.heads * at.head_dim});
  }
  for (const CalibrationOptions::ElementwiseOp& e : o.elementwise) need = std::max(need, 3 * e.rows * e.cols);
  return std::min<int64_t>(need, int64_t{1} << 28);
}

// The kernel samples on storage type T: GEMMs, the attention, the model's element-wise ops and
// streams, on scratch of `max_elems` elements filled with small values (denormal-free).
template <typename T>
Status MeasureKernels(Backend& backend, const CalibrationOptions& o, int64_t max_elems,
                      const Measure& measure) {
  TypedKernels<T>& k = backend.kernels().of<T>();
  Memory& mem = backend.memory();
  const int64_t bytes = max_elems * static_cast<int64_t>(sizeof(T));
  std::vector<T> host(max_elems);
  for (int64_t i = 0; i < max_elems; ++i) {
    const float x = 0.001f * static_cast<float>((i * 7919) % 1000 - 500);
    if constexpr (std::is_same_v<T, float>) {
      host[i] = x;
    } else {
      host[i] = ToBf16(x);
    }
  }
  DeviceBuffer a, w, out, stats;
  for (DeviceBuffer* b : {&a, &w, &out}) {
    SHARDSIM_ASSIGN_OR_RETURN(*b, mem.AllocateUncounted(bytes, "calibration"));
    mem.CopyToDevice(b->data(), host.data(), bytes);
  }
  std::vector<GemmShape> gemms = o.gemms;
  std::vector<int64_t> streams = o.streams;
  if (gemms.empty()) {  // tokens by weight shapes
    for (int64_t n : {64, 128, 256, 512, 1024}) {
      for (const auto& [kk, m] : std::vector<std::pair<int64_t, int64_t>>{
               {64, 64}, {64, 256}, {256, 64}, {128, 128}, {64, 512}, {512, 64}, {256, 256},
               {512, 512}, {1024, 1024}}) {
        gemms.push_back({n, kk, m});
      }
    }
  }
  if (streams.empty() && o.elementwise.empty()) {
    for (int64_t n = 1 << 10; n <= max_elems; n *= 4) streams.push_back(n);
  }
  T* pa = a.as<T>();
  T* pw = w.as<T>();
  T* po = out.as<T>();
  for (const GemmShape& g : gemms) {
    if (g.rows * g.inner > max_elems || g.inner * g.cols > max_elems || g.rows * g.cols > max_elems) {
      continue;  // beyond the scratch; the grid's cases suffice for the fit
    }
    measure("gemm " + std::to_string(g.rows) + "x" + std::to_string(g.inner) + "x" + std::to_string(g.cols),
            2.0 * g.rows * g.inner * g.cols, 0.0, 0.0,
            [&, g] { k.LinearForward(pa, pw, nullptr, po, g.rows, g.inner, g.cols); });
  }
  for (const CalibrationOptions::Attention& at : o.attention) {
    const AttentionDims dims{at.batch, at.seq, at.heads, at.kv_heads, at.head_dim};
    const int64_t probs = at.batch * at.heads * at.seq * at.seq;
    if (probs > max_elems || at.batch * at.seq * at.heads * at.head_dim > max_elems) continue;
    // Q K^T and P V per head: 4 b h T^2 d FLOPs, as the simulator's unfused attention GEMMs.
    measure("attention " + std::to_string(at.batch) + "x" + std::to_string(at.seq) + "x" +
                std::to_string(at.heads) + "x" + std::to_string(at.head_dim),
            4.0 * at.batch * at.heads * at.seq * at.seq * at.head_dim, 0.0,
            static_cast<double>(at.batch) * at.heads * at.seq * at.seq,  // the softmax's exp
            [&, dims] { k.AttentionForward(pa, pw, pw, po, pa, dims); });
  }
  // A model's element-wise ops on their own kernels, with the simulator's bytes.
  std::vector<int32_t> ids(max_elems / 4, 1);
  DeviceBuffer tokens_buf;
  SHARDSIM_ASSIGN_OR_RETURN(tokens_buf, mem.AllocateUncounted(static_cast<int64_t>(ids.size() * sizeof(int32_t)), "calibration ids"));
  mem.CopyToDevice(tokens_buf.data(), ids.data(), static_cast<int64_t>(ids.size() * sizeof(int32_t)));
  int64_t rows = 1;  // the norms' fp32 statistics
  for (const CalibrationOptions::ElementwiseOp& e : o.elementwise) rows = std::max(rows, e.rows);
  SHARDSIM_ASSIGN_OR_RETURN(stats, mem.AllocateUncounted(2 * rows * static_cast<int64_t>(sizeof(float)), "calibration statistics"));
  for (const CalibrationOptions::ElementwiseOp& e : o.elementwise) {
    const int64_t n = e.rows, c = e.cols;
    if (n * c * 3 > max_elems) continue;
    std::function<void()> op;
    switch (e.role) {
      case OpRole::kNorm:
        op = [&, e] { k.NormForward(e.norm, pa, pw, e.norm == Norm::kLayerNorm ? pw : nullptr, po,
                                    stats.f(), stats.f() + e.rows, e.rows, e.cols); };
        break;
      case OpRole::kMlpActivation:
        if (e.activation == Activation::kSwiglu) {
          op = [&, n, c] { k.SwigluForward(pa, pw, po, n * c); };
        } else {
          op = [&, n, c] { k.GeluForward(pa, po, n * c); };
        }
        break;
      case OpRole::kCrossEntropy:
        op = [&, n, c] { (void)k.SoftmaxCrossEntropy(pa, tokens_buf.i32(), po, n, c); };
        break;
      case OpRole::kEmbedding:
        op = [&, n, c] { k.EmbeddingForward(tokens_buf.i32(), pw, 0, 2, nullptr, po, n, 0, n, c); };
        break;
      case OpRole::kResidual:
        op = [&, n, c] { k.Add(po, pa, n * c); };
        break;
      default:
        return Status::Error("calibrate: no kernel times an element-wise op of role " +
                             std::string(OpRoleName(e.role)) + " ('" + e.name + "')");
    }
    measure(e.name + " " + std::to_string(n) + "x" + std::to_string(c), 0.0, e.bytes, e.transcendentals, op);
  }
  // Streams dst += src: two reads and one write of an element each.
  for (int64_t n : streams) {
    n = std::min(n, max_elems);
    measure("stream " + std::to_string(n), 0.0, 3.0 * sizeof(T) * n, 0.0, [&, n] { k.Add(po, pa, n); });
  }
  return Status::Ok();
}

}  // namespace

StatusOr<CalibrationResult> Calibrate(Backend& backend, const HardwareSpec& base,
                                      const CalibrationOptions& o) {
  auto say = [&](const std::string& line) {
    if (o.progress) o.progress(line);
  };
  if (o.dtype != DType::kFp32 && o.dtype != DType::kBf16) {
    return Status::Error("calibrate: the runtime's kernels run fp32 or bf16, not " + DTypeName(o.dtype));
  }
  CalibrationResult r;
  r.hardware = base;
  r.dtype = o.dtype;
  std::vector<std::vector<double>> rows;
  std::vector<double> times;
  const Measure measure = [&](const std::string& what, double flops, double bytes, double specials,
                              const std::function<void()>& op) {
    const int calls = *CallsFor(backend, op, o.min_sample_s);  // no collective: cannot fail
    const double t = TimePerCall(backend, op, calls, o.repetitions);
    r.samples.push_back({what, flops, bytes, specials, t, 0});
    rows.push_back({1.0, flops, bytes, specials});
    times.push_back(t);
    say(what + Fmt(": %.3g s", t));
  };
  const int64_t max_elems = ScratchElements(o);
  SHARDSIM_RETURN_IF_ERROR(o.dtype == DType::kBf16 ? MeasureKernels<Bf16>(backend, o, max_elems, measure)
                                                   : MeasureKernels<float>(backend, o, max_elems, measure));
  // Without transcendental samples that column is all zero: fit the other three.
  const bool specials = std::any_of(r.samples.begin(), r.samples.end(),
                                    [](const CalibrationSample& s) { return s.transcendentals > 0; });
  if (!specials) {
    for (std::vector<double>& row : rows) row.pop_back();
  }
  double r2 = 0;
  std::vector<double> theta = RelativeLeastSquares(rows, times, &r2);
  if (!specials) theta.push_back(0.0);
  if (theta[1] <= 0) {
    return Status::Error("calibration: the GEMM samples fit no positive FLOP rate; the machine was "
                         "too noisy, run again");
  }
  // A zero inverse rate: that term explains nothing the others do not (the figure stays the
  // base's for bytes; no transcendental rate).
  r.compute = {theta[0], 1.0 / theta[1], theta[2] > 0 ? 1.0 / theta[2] : 0.0,
               theta[3] > 0 ? 1.0 / theta[3] : 0.0, r2, 0};
  for (CalibrationSample& s : r.samples) {
    s.predicted_s = theta[0] + s.flops * theta[1] + s.bytes * theta[2] + s.transcendentals * theta[3];
    r.compute.max_rel_error = std::max(r.compute.max_rel_error, std::fabs(s.predicted_s - s.time_s) / s.time_s);
  }
  // Into the description, as the rate of the dtype the kernels ran in.
  GpuSpec& gpu = r.hardware.gpu;
  double& peak = gpu.peak_flops[o.dtype];
  if (peak < r.compute.flop_rate) peak = r.compute.flop_rate;  // a nominal peak below a measured rate
  gpu.efficiency.matmul = r.compute.flop_rate / peak;
  if (r.compute.byte_rate > 0) {
    if (gpu.memory_bandwidth < r.compute.byte_rate) gpu.memory_bandwidth = r.compute.byte_rate;
    gpu.efficiency.memory = r.compute.byte_rate / gpu.memory_bandwidth;
  }
  gpu.efficiency.kernel_latency_s = r.compute.latency_s;
  if (r.compute.transcendental_rate > 0) gpu.transcendental_rate = r.compute.transcendental_rate;

  Collectives& comm = backend.comm();
  const int ranks = comm.size(Group::kWorld);
  if (ranks > 1) {
    std::vector<std::vector<double>> crows;
    std::vector<double> ctimes;
    DeviceBuffer out;
    SHARDSIM_ASSIGN_OR_RETURN(out, backend.memory().AllocateUncounted(max_elems * static_cast<int64_t>(sizeof(float)), "calibration all-reduce"));
    backend.memory().Zero(out.data(), out.bytes());
    for (int64_t n = 1; n <= max_elems; n *= 8) {
      auto op = [&, n = n] { (void)comm.AllReduceSum(Group::kWorld, out.f(), n); };
      auto agree = [&](double* t) { return comm.AllReduceMaxHost(Group::kWorld, t, 1); };
      SHARDSIM_ASSIGN_OR_RETURN(const int calls, CallsFor(backend, op, o.min_sample_s, agree));
      double t = TimePerCall(backend, op, calls, o.repetitions);
      SHARDSIM_RETURN_IF_ERROR(comm.AllReduceMaxHost(Group::kWorld, &t, 1));  // the slowest rank
      const double bytes = 4.0 * n;
      const double algbw = bytes / t, busbw = algbw * 2.0 * (ranks - 1) / ranks;
      r.collective_samples.push_back({"all-reduce " + std::to_string(static_cast<int64_t>(bytes)) + " B", 0, bytes, 0, t, 0});
      crows.push_back({2.0 * (ranks - 1), 2.0 * (ranks - 1) / ranks * bytes});
      ctimes.push_back(t);
      say("all-reduce" + Fmt(" %.0f B: %.3g s, algbw %.3g GB/s", bytes, t, algbw / 1e9) +
          Fmt(", busbw %.3g GB/s", busbw / 1e9));
    }
    const std::vector<double> c = RelativeLeastSquares(crows, ctimes, nullptr);
    if (c[1] <= 0) return Status::Error("calibration: the all-reduce fit has no positive bandwidth; run again");
    r.have_collectives = true;
    r.collectives = {ranks, std::max(c[0], 0.0), 1.0 / c[1], 0};
    for (CalibrationSample& s : r.collective_samples) {
      s.predicted_s = 2.0 * (ranks - 1) * r.collectives.latency_s +
                      2.0 * (ranks - 1) / ranks * s.bytes / r.collectives.bandwidth;
      r.collectives.max_rel_error = std::max(r.collectives.max_rel_error, std::fabs(s.predicted_s - s.time_s) / s.time_s);
    }
    FabricSpec& fabric = r.hardware.node.fabric;
    if (fabric.bandwidth < r.collectives.bandwidth) fabric.bandwidth = r.collectives.bandwidth;
    fabric.efficiency = r.collectives.bandwidth / fabric.bandwidth;
    fabric.latency_s = r.collectives.latency_s;
    r.hardware.collective_base_latency_s = 0;
  }
  return r;
}

std::string CalibratedHardwareYaml(const CalibrationResult& r, const std::string& name,
                                   const std::string& base_name) {
  HardwareSpec hw = r.hardware;
  hw.name = name;
  hw.source = "shardsim calibrate from " + base_name;
  std::ostringstream o;
  o << "# Written by `shardsim calibrate` from " << base_name << ": the figures below marked\n"
    << "# [C] are least-squares fits to micro-benchmarks of this machine's backend kernels\n"
    << "# (runtime/calibrate/calibrate.h); the rest are the base description's.\n";
  o << "# [C] op time t = a + flops / R + bytes / B + transcendentals / S over " << r.samples.size()
    << " GEMM, attention and element-wise samples (weighted by 1/t):\n";
  o << Fmt("#     a = %.3g s (kernel_latency), R = %.4g GFLOP/s", r.compute.latency_s, r.compute.flop_rate / 1e9)
    << Fmt(" (matmul efficiency %.4f of the ", hw.gpu.efficiency.matmul) << DTypeName(r.dtype)
    << Fmt(" peak), B = %.4g GB/s", r.compute.byte_rate / 1e9)
    << Fmt(" (memory efficiency %.4f; B = 0: not fitted, the base's)", hw.gpu.efficiency.memory)
    << Fmt(", S = %.4g G/s (transcendental_rate; 0: not fitted)\n", r.compute.transcendental_rate / 1e9);
  o << Fmt("#     R^2 %.4f; largest sample error %.1f %%\n", r.compute.r2, 100 * r.compute.max_rel_error);
  if (r.have_collectives) {
    o << "# [C] ring all-reduce t = 2 (n - 1) latency + 2 (n - 1) / n S / B over " << r.collective_samples.size()
      << " sizes on " << r.collectives.ranks << " ranks:\n";
    o << Fmt("#     latency %.3g s, B = %.4g GB/s", r.collectives.latency_s, r.collectives.bandwidth / 1e9)
      << Fmt(" (fabric efficiency %.4f); largest sample error %.1f %%\n", hw.node.fabric.efficiency,
             100 * r.collectives.max_rel_error);
    o << "#     size_bytes time_s algbw_GB/s busbw_GB/s (nccl-tests columns)\n";
    const double n = r.collectives.ranks;
    for (const CalibrationSample& s : r.collective_samples) {
      const double algbw = s.bytes / s.time_s;
      o << Fmt("#     %.0f %.4g", s.bytes, s.time_s) << Fmt(" %.4g %.4g\n", algbw / 1e9, algbw * 2 * (n - 1) / n / 1e9);
    }
  } else {
    o << "# The fabric and collective figures are the base's: calibrate ran on one rank.\n";
  }
  o << HardwareYaml(hw);
  return o.str();
}

}  // namespace shardsim::runtime
