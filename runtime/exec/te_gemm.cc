// See te_gemm.h. Under fp8 each operand is quantized into a transient buffer (1 byte an
// element) right before its GEMM and freed after it.
#include "runtime/exec/te_gemm.h"

#include <algorithm>
#include <type_traits>

namespace shardsim::runtime {
namespace {

constexpr MemoryKind kWork = MemoryKind::kOther;

// A quantized operand: codes, its transpose's codes, or both, and the factor back.
struct Quantized {
  DeviceBuffer codes, transposed;
  float scale_inv = 1;
  Fp8Format format = Fp8Format::kE4M3;
  Fp8Tensor Rows() const { return {codes.as<uint8_t>(), scale_inv, format}; }
  Fp8Tensor Columns() const { return {transposed.as<uint8_t>(), scale_inv, format}; }
};

// x (rows, cols) quantized with `scale`: the codes when `rows_wanted`, the transpose's when
// `columns_wanted`.
StatusOr<Quantized> Quantize(ExecContext& ctx, const Bf16* x, int64_t rows, int64_t cols, Fp8Format format,
                             float scale, bool rows_wanted, bool columns_wanted, const char* what) {
  Quantized q;
  q.format = format;
  q.scale_inv = 1.0f / scale;
  const int64_t bytes = std::max<int64_t>(rows * cols, 1);  // an expert may have no rows
  if (rows_wanted) {
    SHARDSIM_ASSIGN_OR_RETURN(q.codes, ctx.Alloc<uint8_t>(kWork, bytes, what));
  }
  if (columns_wanted) {
    SHARDSIM_ASSIGN_OR_RETURN(q.transposed, ctx.Alloc<uint8_t>(kWork, bytes, what));
  }
  ctx.k().fp8()->Quantize(x, rows, cols, format, scale, q.codes.as<uint8_t>(), q.transposed.as<uint8_t>());
  return q;
}

// Current scaling's factor for tensors (pointer, elements) quantized as one.
float JointScale(ExecContext& ctx, const std::vector<std::pair<const Bf16*, int64_t>>& parts, Fp8Format format) {
  float amax = 0;
  for (const auto& [p, count] : parts) amax = std::max(amax, ctx.k().fp8()->Amax(p, count));
  return Fp8Scale(amax, format);
}

Status Fp8Forward(ExecContext& ctx, const Bf16* in, int64_t n, int64_t k, const std::vector<TeProj<Bf16>>& projs) {
  Fp8Kernels& f8 = *ctx.k().fp8();
  const float x_scale = Fp8Scale(f8.Amax(in, n * k), Fp8Format::kE4M3);
  SHARDSIM_ASSIGN_OR_RETURN(Quantized x, Quantize(ctx, in, n, k, Fp8Format::kE4M3, x_scale, true, false, "fp8 input"));
  std::vector<std::pair<const Bf16*, int64_t>> weights;
  for (const TeProj<Bf16>& p : projs) weights.push_back({p.w, p.m * k});
  const float w_scale = JointScale(ctx, weights, Fp8Format::kE4M3);
  for (const TeProj<Bf16>& p : projs) {
    SHARDSIM_ASSIGN_OR_RETURN(Quantized w, Quantize(ctx, p.w, p.m, k, Fp8Format::kE4M3, w_scale, true, false,
                                                    "fp8 weight"));
    f8.Gemm({{x.Rows(), w.Rows(), k}}, n, p.m, p.out, /*accumulate=*/false, nullptr, p.bias);
  }
  return Status::Ok();
}

Status Fp8Backward(ExecContext& ctx, const std::vector<TeGrad<Bf16>>& grads, const Bf16* in, Bf16* din, int64_t n,
                   int64_t k) {
  Fp8Kernels& f8 = *ctx.k().fp8();
  const bool wgrad = std::any_of(grads.begin(), grads.end(), [](const TeGrad<Bf16>& g) { return g.dw != nullptr; });
  std::vector<std::pair<const Bf16*, int64_t>> douts, weights;
  for (const TeGrad<Bf16>& g : grads) {
    douts.push_back({g.dout, n * g.m});
    weights.push_back({g.w, g.m * k});
  }
  const float g_scale = JointScale(ctx, douts, Fp8Format::kE5M2);
  std::vector<Quantized> dq;
  for (const TeGrad<Bf16>& g : grads) {
    SHARDSIM_ASSIGN_OR_RETURN(Quantized q, Quantize(ctx, g.dout, n, g.m, Fp8Format::kE5M2, g_scale, din != nullptr,
                                                    g.dw != nullptr, "fp8 output gradient"));
    dq.push_back(std::move(q));
  }
  if (din != nullptr) {  // din (n, k) += sum dout_i (n, m_i) . (w_i^T (k, m_i))^T
    const float w_scale = JointScale(ctx, weights, Fp8Format::kE4M3);
    std::vector<Quantized> wq;
    std::vector<Fp8Kernels::Product> terms;
    for (size_t i = 0; i < grads.size(); ++i) {
      SHARDSIM_ASSIGN_OR_RETURN(Quantized q, Quantize(ctx, grads[i].w, grads[i].m, k, Fp8Format::kE4M3, w_scale,
                                                      false, true, "fp8 weight transpose"));
      wq.push_back(std::move(q));
      terms.push_back({dq[i].Rows(), wq.back().Columns(), grads[i].m});
    }
    f8.Gemm(terms, n, k, din, /*accumulate=*/true, nullptr, nullptr);
  }
  if (wgrad) {  // dw_i (m_i, k) += (dout_i^T (m_i, n)) . (in^T (k, n))^T
    const float x_scale = Fp8Scale(f8.Amax(in, n * k), Fp8Format::kE4M3);
    SHARDSIM_ASSIGN_OR_RETURN(Quantized x, Quantize(ctx, in, n, k, Fp8Format::kE4M3, x_scale, false, true,
                                                    "fp8 input transpose"));
    for (size_t i = 0; i < grads.size(); ++i) {
      if (grads[i].dw == nullptr) continue;
      f8.Gemm({{dq[i].Columns(), x.Columns(), n}}, grads[i].m, k, nullptr, false, grads[i].dw, nullptr);
    }
  }
  for (const TeGrad<Bf16>& g : grads) {
    if (g.db != nullptr) ctx.kt<Bf16>().AddColumnSums(g.dout, g.db, n, g.m);
  }
  return Status::Ok();
}

}  // namespace

template <typename T>
Status TeForward(ExecContext& ctx, const T* in, int64_t n, int64_t k, const std::vector<TeProj<T>>& projs) {
  if constexpr (std::is_same_v<T, Bf16>) {
    if (ctx.fp8()) return Fp8Forward(ctx, in, n, k, projs);
  }
  for (const TeProj<T>& p : projs) ctx.kt<T>().LinearForward(in, p.w, p.bias, p.out, n, k, p.m);
  return Status::Ok();
}

template <typename T>
Status TeBackward(ExecContext& ctx, const std::vector<TeGrad<T>>& grads, const T* in, T* din, int64_t n,
                  int64_t k) {
  if constexpr (std::is_same_v<T, Bf16>) {
    if (ctx.fp8()) return Fp8Backward(ctx, grads, in, din, n, k);
  }
  for (const TeGrad<T>& g : grads) {
    ctx.kt<T>().LinearBackward(g.dout, in, g.w, din, g.dw, g.db, n, k, g.m);
  }
  return Status::Ok();
}

#define SHARDSIM_INSTANTIATE_TE(T)                                                                      \
  template Status TeForward(ExecContext&, const T*, int64_t, int64_t, const std::vector<TeProj<T>>&); \
  template Status TeBackward(ExecContext&, const std::vector<TeGrad<T>>&, const T*, T*, int64_t, int64_t);
SHARDSIM_INSTANTIATE_TE(float)
SHARDSIM_INSTANTIATE_TE(Bf16)
#undef SHARDSIM_INSTANTIATE_TE

}  // namespace shardsim::runtime
