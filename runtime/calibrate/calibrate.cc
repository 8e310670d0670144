// See calibrate.h.
#include "runtime/calibrate/calibrate.h"

#include <type_traits>

#include <Eigen/Dense>

#include <algorithm>
#include <array>
#include <limits>
#include <optional>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "src/cost/op_time.h"
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

namespace {

// Weighted non-negative least squares: the minimizer of sum (w_i (x_i . theta - y_i))^2 with
// theta >= 0, by enumeration: every subset of free parameters (the others 0) solved by QR, the
// best with no negative parameter. 2^cols solves, cols <= 4.
std::vector<double> Nnls(const std::vector<std::vector<double>>& x, const std::vector<double>& y,
                         const std::vector<double>& w) {
  const Eigen::Index rows = static_cast<Eigen::Index>(x.size());
  const Eigen::Index cols = rows == 0 ? 0 : static_cast<Eigen::Index>(x[0].size());
  Eigen::MatrixXd a(rows, cols);
  Eigen::VectorXd b(rows);
  for (Eigen::Index i = 0; i < rows; ++i) {
    for (Eigen::Index j = 0; j < cols; ++j) a(i, j) = w[i] * x[i][j];
    b(i) = w[i] * y[i];
  }
  Eigen::VectorXd best = Eigen::VectorXd::Zero(cols);
  double best_residual = b.squaredNorm();
  for (unsigned mask = 1; mask < (1u << cols); ++mask) {
    std::vector<Eigen::Index> free;
    for (Eigen::Index j = 0; j < cols; ++j) {
      if (mask & (1u << j)) free.push_back(j);
    }
    Eigen::MatrixXd sub(rows, static_cast<Eigen::Index>(free.size()));
    for (size_t f = 0; f < free.size(); ++f) sub.col(static_cast<Eigen::Index>(f)) = a.col(free[f]);
    const Eigen::VectorXd part = sub.colPivHouseholderQr().solve(b);
    if ((part.array() < 0).any()) continue;
    const double residual = (sub * part - b).squaredNorm();
    if (residual < best_residual) {
      best_residual = residual;
      best.setZero();
      for (size_t f = 0; f < free.size(); ++f) best(free[f]) = part(static_cast<Eigen::Index>(f));
    }
  }
  return std::vector<double>(best.data(), best.data() + best.size());
}

}  // namespace

std::vector<double> RelativeLeastSquares(const std::vector<std::vector<double>>& x,
                                         const std::vector<double>& t, double* r2) {
  std::vector<double> w;
  for (double v : t) w.push_back(1.0 / v);
  const std::vector<double> theta = Nnls(x, t, w);
  if (r2 != nullptr) {
    double mean = 0;
    for (double v : t) mean += v / static_cast<double>(t.size());
    double res = 0, tot = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      double fitted = 0;
      for (size_t j = 0; j < theta.size(); ++j) fitted += x[i][j] * theta[j];
      res += (t[i] - fitted) * (t[i] - fitted);
      tot += (t[i] - mean) * (t[i] - mean);
    }
    *r2 = tot > 0 ? 1.0 - res / tot : 1.0;
  }
  return theta;
}

Status FitOpTimes(CalibrationResult* r) {
  GpuSpec& gpu = r->hardware.gpu;
  const DType dtype = r->dtype;
  const std::optional<double> base_peak = gpu.Peak(dtype);
  if (!base_peak || *base_peak <= 0) {
    return Status::Error("calibration: the base description has no " + DTypeName(dtype) + " peak to fit against");
  }
  if (r->samples.empty()) return Status::Error("calibration: no samples");
  // Per sample, the terms of op_time.h's forward time with its parameters factored out:
  //   t = latency + max(f x1, b x2 + s x3),  x1 = 1 / (peak x matmul efficiency),
  //   x2 = 1 / (bandwidth x memory efficiency), x3 = 1 / transcendental_rate,
  // f = executed FLOPs / wave efficiency (a GEMM; 0 otherwise), b = bytes, s = exp/tanh.
  const size_t n = r->samples.size();
  std::vector<double> f(n), b(n), sp(n), t(n), w(n);
  bool any_bytes = false, any_specials = false;
  for (size_t i = 0; i < n; ++i) {
    const Op& op = r->samples[i].op;
    if (op.kind != OpKind::kMatmul && op.kind != OpKind::kMemory) {
      return Status::Error("calibration: sample '" + r->samples[i].what + "' is neither a GEMM nor memory-bound");
    }
    f[i] = op.kind == OpKind::kMatmul ? op.executed_flops / WaveEfficiency(gpu, op.m, op.n) : 0;
    b[i] = op.bytes;
    sp[i] = op.transcendentals;
    t[i] = r->samples[i].time_s;
    if (!(t[i] > 0)) return Status::Error("calibration: sample '" + r->samples[i].what + "' took no time");
    w[i] = 1.0 / t[i];
    any_bytes |= b[i] > 0;
    any_specials |= sp[i] > 0;
  }
  // A rate the samples cannot pin (its term fitted to 0: bytes or exp/tanh counts explain none
  // of the times, as for cache-resident element-wise ops on a CPU) cannot be written as
  // infinite: it is fixed at the fastest rate a sample showed (its bytes, or its exp/tanh
  // evaluations, over its whole time), so no sample's term alone exceeds its time, and the rest
  // refitted; the description written prices every sample exactly as fitted.
  double fixed[4] = {-1, -1, -1, -1};  // -1: free
  if (!any_specials) fixed[3] = 0;     // no term to fit: none priced either way
  auto predict = [&](const std::array<double, 4>& x, size_t i) {
    return x[0] + std::max(f[i] * x[1], b[i] * x[2] + sp[i] * x[3]);
  };
  auto objective = [&](const std::array<double, 4>& x) {
    double sum = 0;
    for (size_t i = 0; i < n; ++i) sum += std::pow((predict(x, i) - t[i]) / t[i], 2);
    return sum;
  };
  // The max makes the model piecewise linear: alternate between assigning each sample to the
  // branch the current parameters make the larger and the least squares of that assignment,
  // from two starts (GEMMs compute-bound, the rest memory-bound; and the assignment of the
  // additive fit t = a + f x1 + b x2 + s x3), keeping the best fit met.
  auto solve = [&]() {
    std::array<double, 4> best_x{};
    double best = std::numeric_limits<double>::infinity();
    std::vector<std::vector<char>> starts(2, std::vector<char>(n));
    std::vector<std::vector<double>> rows(n);
    std::vector<double> y(n);
    auto fit = [&](const std::vector<char>& compute) {
      std::vector<int> free;
      for (int j = 0; j < 4; ++j) {
        if (fixed[j] < 0) free.push_back(j);
      }
      for (size_t i = 0; i < n; ++i) {
        const double full[4] = {1.0, compute[i] ? f[i] : 0.0, compute[i] ? 0.0 : b[i], compute[i] ? 0.0 : sp[i]};
        rows[i].clear();
        y[i] = t[i];
        for (int j = 0; j < 4; ++j) {
          if (fixed[j] < 0) {
            rows[i].push_back(full[j]);
          } else {
            y[i] -= full[j] * fixed[j];
          }
        }
      }
      const std::vector<double> part = Nnls(rows, y, w);
      std::array<double, 4> x{};
      for (int j = 0; j < 4; ++j) x[j] = fixed[j] >= 0 ? fixed[j] : 0;
      for (size_t k = 0; k < free.size(); ++k) x[free[k]] = part[k];
      return x;
    };
    for (size_t i = 0; i < n; ++i) starts[0][i] = f[i] > 0;
    {
      // The additive fit's assignment.
      std::vector<std::vector<double>> add_rows(n);
      std::vector<double> add_y(n);
      for (size_t i = 0; i < n; ++i) {
        add_rows[i] = {1.0, f[i], b[i], sp[i]};
        add_y[i] = t[i];
      }
      const std::vector<double> a = Nnls(add_rows, add_y, w);
      for (size_t i = 0; i < n; ++i) starts[1][i] = f[i] * a[1] >= b[i] * a[2] + sp[i] * a[3] && f[i] > 0;
    }
    for (std::vector<char> compute : starts) {
      for (int iter = 0; iter < 50; ++iter) {
        const std::array<double, 4> x = fit(compute);
        const double obj = objective(x);
        if (obj < best) {
          best = obj;
          best_x = x;
        }
        bool changed = false;
        for (size_t i = 0; i < n; ++i) {
          const char c = f[i] > 0 && f[i] * x[1] >= b[i] * x[2] + sp[i] * x[3];
          changed |= c != compute[i];
          compute[i] = c;
        }
        if (!changed) break;
      }
    }
    return best_x;
  };
  std::array<double, 4> x = solve();
  if (x[1] <= 0) {
    return Status::Error("calibration: the GEMM samples fit no positive FLOP rate; the machine was "
                         "too noisy, run again");
  }
  auto fastest = [&](const std::vector<double>& amount) {
    double rate = 0;
    for (size_t i = 0; i < n; ++i) rate = std::max(rate, amount[i] / t[i]);
    return rate;
  };
  bool refit = false;
  if (any_bytes && x[2] <= 0) {
    fixed[2] = 1.0 / fastest(b);
    refit = true;
  }
  if (any_specials && x[3] <= 0) {
    fixed[3] = 1.0 / fastest(sp);
    refit = true;
  }
  if (refit) x = solve();
  if (x[1] <= 0) return Status::Error("calibration: the GEMM samples fit no positive FLOP rate; run again");

  // Into the description, as the rate of the dtype the kernels ran in.
  CalibrationFit& fit = r->compute;
  fit = CalibrationFit{};
  fit.latency_s = x[0];
  fit.flop_rate = 1.0 / x[1];
  fit.byte_rate_source = !any_bytes ? "the base's" : fixed[2] < 0 ? "fitted" : "the fastest sample's";
  fit.transcendental_rate_source = !any_specials ? "the base's" : fixed[3] < 0 ? "fitted" : "the fastest sample's";
  double& peak = gpu.peak_flops[dtype];
  if (peak < fit.flop_rate) peak = fit.flop_rate;  // a nominal peak below a measured rate
  gpu.efficiency.matmul = fit.flop_rate / peak;
  // The fitted rate is what the kernels sustained: a base's (or the published fit's) factor
  // would apply twice.
  gpu.efficiency.sustained_compute = 1.0;
  gpu.efficiency.sustained_compute_origin.clear();
  if (x[2] > 0) {
    const double rate = 1.0 / x[2];
    if (gpu.memory_bandwidth < rate) gpu.memory_bandwidth = rate;
    gpu.efficiency.memory = rate / gpu.memory_bandwidth;
  }
  fit.byte_rate = gpu.memory_bandwidth * gpu.efficiency.memory;
  gpu.efficiency.kernel_latency_s = x[0];
  if (any_specials) gpu.transcendental_rate = x[3] > 0 ? 1.0 / x[3] : 0;
  fit.transcendental_rate = gpu.transcendental_rate;
  // The predictions are the written description's own op times: what the simulator will say.
  double mean = 0;
  for (double v : t) mean += v / static_cast<double>(n);
  double res = 0, tot = 0;
  for (size_t i = 0; i < n; ++i) {
    CalibrationSample& s = r->samples[i];
    s.predicted_s = OpForwardTime(gpu, dtype, s.op);
    res += (s.time_s - s.predicted_s) * (s.time_s - s.predicted_s);
    tot += (s.time_s - mean) * (s.time_s - mean);
    fit.max_rel_error = std::max(fit.max_rel_error, std::fabs(s.predicted_s - s.time_s) / s.time_s);
  }
  fit.r2 = tot > 0 ? 1.0 - res / tot : 1.0;
  return Status::Ok();
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
      case OpRole::kMoePermute:  // MoE does not run on the CPU runtime (issue 17)
        break;
      case OpRole::kRope:  // priced at the element-wise rate the cases above fit (the runtime
        break;             // rotates Q and K inside its attention; no kernel timed alone)
    }
  }
  o->attention.push_back({l.mbs, m.seq_len, m.heads / l.tp, std::max<int64_t>(1, m.kv_heads / l.tp), m.head_dim});
}

namespace {

// One case: its label, the cost model's op for it (what src/cost/op_time.h prices), the kernel.
using Measure = std::function<void(const std::string& what, const Op& op, const std::function<void()>& run)>;

// The cost model's ops for the cases: a GEMM as ops.cc builds one (A and B read, C written, at
// the storage width), a memory-bound op with the bytes and exp/tanh evaluations given.
Op GemmOp(const std::string& what, int64_t rows, int64_t inner, int64_t cols, double elem_bytes) {
  Op op;
  op.name = what;
  op.kind = OpKind::kMatmul;
  op.role = OpRole::kProjection;
  op.m = rows;
  op.n = cols;
  op.k = inner;
  op.flops = op.executed_flops = 2.0 * static_cast<double>(rows) * static_cast<double>(inner) * static_cast<double>(cols);
  op.bytes = elem_bytes * (static_cast<double>(rows) * static_cast<double>(inner) +
                           static_cast<double>(inner) * static_cast<double>(cols) +
                           static_cast<double>(rows) * static_cast<double>(cols));
  return op;
}
Op MemoryOp(const std::string& what, OpRole role, double bytes, double transcendentals) {
  Op op;
  op.name = what;
  op.kind = OpKind::kMemory;
  op.role = role;
  op.bytes = bytes;
  op.transcendentals = transcendentals;
  return op;
}

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
    const std::string what = "gemm " + std::to_string(g.rows) + "x" + std::to_string(g.inner) + "x" + std::to_string(g.cols);
    measure(what, GemmOp(what, g.rows, g.inner, g.cols, sizeof(T)),
            [&, g] { k.LinearForward(pa, pw, nullptr, po, g.rows, g.inner, g.cols); });
  }
  for (const CalibrationOptions::Attention& at : o.attention) {
    const AttentionDims dims{at.batch, at.seq, at.heads, at.kv_heads, at.head_dim};
    const int64_t probs = at.batch * at.heads * at.seq * at.seq;
    if (probs > max_elems || at.batch * at.seq * at.heads * at.head_dim > max_elems) continue;
    // Q K^T and P V per head: 4 b h T^2 d FLOPs, as the simulator's unfused attention GEMMs
    // (one GEMM op of T x T outputs per head), with the softmax's b h T^2 exp evaluations.
    const std::string what = "attention " + std::to_string(at.batch) + "x" + std::to_string(at.seq) + "x" +
                             std::to_string(at.heads) + "x" + std::to_string(at.head_dim);
    Op op = GemmOp(what, at.batch * at.heads * at.seq, 2 * at.head_dim, at.seq, sizeof(T));
    op.bytes = 0;  // timed in one call with the softmax, whose exp evaluations bound it instead
    op.transcendentals = static_cast<double>(at.batch) * at.heads * at.seq * at.seq;
    measure(what, op, [&, dims] { k.AttentionForward(pa, pw, pw, po, pa, dims); });
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
    const std::string what = e.name + " " + std::to_string(n) + "x" + std::to_string(c);
    measure(what, MemoryOp(what, e.role, e.bytes, e.transcendentals), op);
  }
  // Streams dst += src: two reads and one write of an element each.
  for (int64_t n : streams) {
    n = std::min(n, max_elems);
    const std::string what = "stream " + std::to_string(n);
    measure(what, MemoryOp(what, OpRole::kResidual, 3.0 * sizeof(T) * n, 0.0), [&, n] { k.Add(po, pa, n); });
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
  const Measure measure = [&](const std::string& what, const Op& op, const std::function<void()>& run) {
    const int calls = *CallsFor(backend, run, o.min_sample_s);  // no collective: cannot fail
    const double t = TimePerCall(backend, run, calls, o.repetitions);
    CalibrationSample sample;
    sample.what = what;
    sample.op = op;
    sample.flops = op.executed_flops;
    sample.bytes = op.bytes;
    sample.transcendentals = op.transcendentals;
    sample.time_s = t;
    r.samples.push_back(sample);
    say(what + Fmt(": %.3g s", t));
  };
  const int64_t max_elems = ScratchElements(o);
  SHARDSIM_RETURN_IF_ERROR(o.dtype == DType::kBf16 ? MeasureKernels<Bf16>(backend, o, max_elems, measure)
                                                   : MeasureKernels<float>(backend, o, max_elems, measure));
  SHARDSIM_RETURN_IF_ERROR(FitOpTimes(&r));

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
      CalibrationSample sample;
      sample.what = "all-reduce " + std::to_string(static_cast<int64_t>(bytes)) + " B";
      sample.bytes = bytes;
      sample.time_s = t;
      r.collective_samples.push_back(sample);
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
    r.hardware.collective_protocols.clear();  // the fit is of one ring protocol: the file is that model
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
  o << "# [C] op time t = a + max(flops / (R x wave), bytes / B + transcendentals / S) (src/cost/op_time.h) over "
    << r.samples.size() << " GEMM, attention and element-wise samples (weighted by 1/t):\n";
  o << Fmt("#     a = %.3g s (kernel_latency), R = %.4g GFLOP/s", r.compute.latency_s, r.compute.flop_rate / 1e9)
    << Fmt(" (matmul efficiency %.4f of the ", hw.gpu.efficiency.matmul) << DTypeName(r.dtype)
    << Fmt(" peak), B = %.4g GB/s", r.compute.byte_rate / 1e9)
    << Fmt(" (memory efficiency %.4f; ", hw.gpu.efficiency.memory) << r.compute.byte_rate_source << ")"
    << Fmt(", S = %.4g G/s (transcendental_rate; ", r.compute.transcendental_rate / 1e9)
    << r.compute.transcendental_rate_source << ")\n"
    << "#     (a rate \"the fastest sample's\" is one no fit pinned, fixed at the fastest rate a sample showed)\n";
  o << Fmt("#     R^2 %.4f; largest sample error %.1f %% (both of this description's op times)\n", r.compute.r2,
           100 * r.compute.max_rel_error);
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
