// See te_gemm.h. Under fp8 each activation operand is quantized into a transient buffer (1 byte
// an element) right before its GEMM and freed after it; the weights' codes live in the cache.
#include "runtime/exec/te_gemm.h"

#include <algorithm>
#include <utility>

#include "src/util/check.h"

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

StatusOr<DeviceBuffer> Bytes(ExecContext& ctx, MemoryKind kind, int64_t n, const char* what) {
  return ctx.Alloc<uint8_t>(kind, std::max<int64_t>(n, 1), what);  // an expert may have no rows
}

// x (rows, cols) quantized with `scale`: the codes when `rows_wanted`, the transpose's when
// `columns_wanted`.
StatusOr<Quantized> Quantize(ExecContext& ctx, const Bf16* x, int64_t rows, int64_t cols, Fp8Format format,
                             float scale, bool rows_wanted, bool columns_wanted, const char* what) {
  Quantized q;
  q.format = format;
  q.scale_inv = 1.0f / scale;
  if (rows_wanted) {
    SHARDSIM_ASSIGN_OR_RETURN(q.codes, Bytes(ctx, kWork, rows * cols, what));
  }
  if (columns_wanted) {
    SHARDSIM_ASSIGN_OR_RETURN(q.transposed, Bytes(ctx, kWork, rows * cols, what));
  }
  ctx.k().fp8()->Quantize(x, rows, cols, format, scale, q.codes.as<uint8_t>(), q.transposed.as<uint8_t>());
  return q;
}

// The module's weights' codes and transposes for this step: quantized at the step's first use
// (one scale over all of them), then read from the cache.
StatusOr<const Fp8CachedModule*> CachedWeights(ExecContext& ctx, int32_t module, const std::vector<const Bf16*>& w,
                                               const std::vector<int64_t>& m, int64_t k) {
  Fp8WeightCache& cache = ctx.fp8_weights();
  Fp8CachedModule& c = cache.At(ctx.layer(), module);
  if (c.step == cache.step()) {
    CHECK(c.codes.size() == w.size()) << "fp8 weight cache: module " << module << " of layer " << ctx.layer()
                                      << " has " << c.codes.size() << " projections, not " << w.size();
    return &c;
  }
  Fp8Kernels& f8 = *ctx.k().fp8();
  float amax = 0;
  for (size_t i = 0; i < w.size(); ++i) amax = std::max(amax, f8.Amax(w[i], m[i] * k));
  const float scale = Fp8Scale(amax, Fp8Format::kE4M3);
  if (c.codes.size() != w.size()) {  // first step: the workspace, held from now on
    c.codes.clear();
    c.transposed.clear();
    for (size_t i = 0; i < w.size(); ++i) {
      SHARDSIM_ASSIGN_OR_RETURN(DeviceBuffer codes, Bytes(ctx, kWork, m[i] * k, "fp8 weight cache"));
      SHARDSIM_ASSIGN_OR_RETURN(DeviceBuffer transposed, Bytes(ctx, kWork, m[i] * k, "fp8 weight cache"));
      c.codes.push_back(std::move(codes));
      c.transposed.push_back(std::move(transposed));
    }
  }
  for (size_t i = 0; i < w.size(); ++i) {
    f8.Quantize(w[i], m[i], k, Fp8Format::kE4M3, scale, c.codes[i].as<uint8_t>(), c.transposed[i].as<uint8_t>());
  }
  c.scale_inv = 1.0f / scale;
  c.step = cache.step();
  return &c;
}

Status Fp8Forward(ExecContext& ctx, int32_t module, const Bf16* in, int64_t n, int64_t k,
                  const std::vector<TeProj<Bf16>>& projs, TeSave save) {
  Fp8Kernels& f8 = *ctx.k().fp8();
  const float x_scale = Fp8Scale(f8.Amax(in, n * k), Fp8Format::kE4M3);
  SHARDSIM_ASSIGN_OR_RETURN(Quantized x, Quantize(ctx, in, n, k, Fp8Format::kE4M3, x_scale, true, false, "fp8 input"));
  std::vector<const Bf16*> w;
  std::vector<int64_t> m;
  for (const TeProj<Bf16>& p : projs) {
    w.push_back(p.w);
    m.push_back(p.m);
  }
  SHARDSIM_ASSIGN_OR_RETURN(const Fp8CachedModule* cw, CachedWeights(ctx, module, w, m, k));
  for (size_t i = 0; i < projs.size(); ++i) {
    const Fp8Tensor wt{cw->codes[i].as<uint8_t>(), cw->scale_inv, Fp8Format::kE4M3};
    f8.Gemm({{x.Rows(), wt, k}}, n, projs[i].m, projs[i].out, /*accumulate=*/false, nullptr, projs[i].bias);
  }
  if (save.to != nullptr) {  // the rows the backward reads, in activation memory
    SHARDSIM_ASSIGN_OR_RETURN(save.to->codes, Bytes(ctx, MemoryKind::kActivations, save.rows * k, "fp8 saved input"));
    ctx.mem().Copy(save.to->codes.data(), x.codes.as<uint8_t>() + save.from * k, save.rows * k);
    save.to->scale_inv = x.scale_inv;
  }
  return Status::Ok();
}

Status Fp8Backward(ExecContext& ctx, int32_t module, const std::vector<TeGrad<Bf16>>& grads, TeIn<Bf16> in,
                   Bf16* din, int64_t n, int64_t k) {
  Fp8Kernels& f8 = *ctx.k().fp8();
  const bool wgrad = std::any_of(grads.begin(), grads.end(), [](const TeGrad<Bf16>& g) { return g.dw != nullptr; });
  float amax = 0;
  for (const TeGrad<Bf16>& g : grads) amax = std::max(amax, f8.Amax(g.dout, n * g.m));
  const float g_scale = Fp8Scale(amax, Fp8Format::kE5M2);
  std::vector<Quantized> dq;
  for (const TeGrad<Bf16>& g : grads) {
    SHARDSIM_ASSIGN_OR_RETURN(Quantized q, Quantize(ctx, g.dout, n, g.m, Fp8Format::kE5M2, g_scale, din != nullptr,
                                                    g.dw != nullptr, "fp8 output gradient"));
    dq.push_back(std::move(q));
  }
  if (din != nullptr) {  // din (n, k) += sum dout_i (n, m_i) . (w_i^T (k, m_i))^T
    // The weights in the forward's order, as the cache holds them.
    std::vector<const Bf16*> w(grads.size());
    std::vector<int64_t> m(grads.size());
    std::vector<size_t> slot(grads.size());
    for (size_t i = 0; i < grads.size(); ++i) {
      slot[i] = grads[i].slot >= 0 ? static_cast<size_t>(grads[i].slot) : i;
      CHECK(slot[i] < grads.size()) << "TeGrad slot " << slot[i] << " of " << grads.size();
      w[slot[i]] = grads[i].w;
      m[slot[i]] = grads[i].m;
    }
    SHARDSIM_ASSIGN_OR_RETURN(const Fp8CachedModule* cw, CachedWeights(ctx, module, w, m, k));
    std::vector<Fp8Kernels::Product> terms;
    for (size_t i = 0; i < grads.size(); ++i) {
      const Fp8Tensor wt{cw->transposed[slot[i]].as<uint8_t>(), cw->scale_inv, Fp8Format::kE4M3};
      terms.push_back({dq[i].Rows(), wt, grads[i].m});
    }
    f8.Gemm(terms, n, k, din, /*accumulate=*/true, nullptr, nullptr);
  }
  if (wgrad) {  // dw_i (m_i, k) += (dout_i^T (m_i, n)) . (in^T (k, n))^T
    Quantized x;
    if (in.codes != nullptr) {  // the saved codes, transposed
      SHARDSIM_ASSIGN_OR_RETURN(x.transposed, Bytes(ctx, kWork, n * k, "fp8 input transpose"));
      f8.Transpose(in.codes, n, k, x.transposed.as<uint8_t>());
      x.scale_inv = in.scale_inv;
    } else {
      const float x_scale = Fp8Scale(f8.Amax(in.x, n * k), Fp8Format::kE4M3);
      SHARDSIM_ASSIGN_OR_RETURN(x, Quantize(ctx, in.x, n, k, Fp8Format::kE4M3, x_scale, false, true,
                                            "fp8 input transpose"));
    }
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
Status TeForward(ExecContext& ctx, int32_t module, const T* in, int64_t n, int64_t k,
                 const std::vector<TeProj<T>>& projs, TeSave save) {
  if constexpr (std::is_same_v<T, Bf16>) {
    if (ctx.fp8()) return Fp8Forward(ctx, module, in, n, k, projs, save);
  }
  for (const TeProj<T>& p : projs) ctx.kt<T>().LinearForward(in, p.w, p.bias, p.out, n, k, p.m);
  return Status::Ok();
}

template <typename T>
Status TeBackward(ExecContext& ctx, int32_t module, const std::vector<TeGrad<T>>& grads,
                  std::type_identity_t<TeIn<T>> in, T* din, int64_t n, int64_t k) {
  if constexpr (std::is_same_v<T, Bf16>) {
    if (ctx.fp8()) return Fp8Backward(ctx, module, grads, in, din, n, k);
  }
  CHECK(in.codes == nullptr) << "fp8 codes outside dtype=fp8";
  for (const TeGrad<T>& g : grads) ctx.kt<T>().LinearBackward(g.dout, in.x, g.w, din, g.dw, g.db, n, k, g.m);
  return Status::Ok();
}

#define SHARDSIM_INSTANTIATE_TE(T)                                                                          \
  template Status TeForward(ExecContext&, int32_t, const T*, int64_t, int64_t, const std::vector<TeProj<T>>&, \
                            TeSave);                                                                        \
  template Status TeBackward(ExecContext&, int32_t, const std::vector<TeGrad<T>>&, std::type_identity_t<TeIn<T>>, \
                             T*, int64_t, int64_t);
SHARDSIM_INSTANTIATE_TE(float)
SHARDSIM_INSTANTIATE_TE(Bf16)
#undef SHARDSIM_INSTANTIATE_TE

}  // namespace shardsim::runtime
