// See grad_compression.h.
#include "src/cost/grad_compression.h"

#include <algorithm>
#include <cmath>

#include "src/cost/memory.h"
#include "src/cost/op_time.h"
#include "src/layout/pipeline.h"

namespace shardsim {

int64_t PowerSgdRank(int64_t rows, int64_t cols, double ratio) {
  if (ratio <= 1 || rows <= 1 || cols <= 1) return 0;
  const double n = static_cast<double>(rows), m = static_cast<double>(cols);
  const double wanted = std::floor(n * m / (ratio * (n + m)));
  const int64_t r = std::clamp<int64_t>(static_cast<int64_t>(std::min(wanted, 1e18)), 1, std::min(rows, cols));
  // Sent whole where the factors would not be smaller (r (n + m) >= n m).
  return static_cast<double>(r) * (n + m) < n * m ? r : 0;
}

CompressedGradients& CompressedGradients::operator+=(const CompressedGradients& o) {
  whole += o.whole;
  p += o.p;
  q += o.q;
  matrices += o.matrices;
  flops += o.flops;
  shapes.insert(shapes.end(), o.shapes.begin(), o.shapes.end());
  return *this;
}

CompressedGradients Compress(const std::vector<GradMatrix>& matrices, double whole, double ratio) {
  CompressedGradients c;
  c.whole = whole;
  for (const GradMatrix& g : matrices) {
    const double n = static_cast<double>(g.rows), m = static_cast<double>(g.cols);
    const int64_t r = PowerSgdRank(g.rows, g.cols, ratio);
    if (r == 0) {
      c.whole += n * m;
      continue;
    }
    const double rank = static_cast<double>(r);
    c.p += n * rank;
    c.q += m * rank;
    c.matrices += n * m;
    c.flops += 3 * 2 * n * m * rank;
    c.shapes.push_back({g.rows, g.cols, r});
  }
  return c;
}

namespace {

// `matrices` and the rest of `params` (vectors and what is not enumerated) sent whole.
CompressedGradients WithRest(const std::vector<GradMatrix>& matrices, double params, double ratio) {
  double covered = 0;
  for (const GradMatrix& g : matrices) covered += static_cast<double>(g.rows) * static_cast<double>(g.cols);
  return Compress(matrices, std::max(0.0, params - covered), ratio);
}

int64_t Split(int64_t n, int64_t tp) { return std::max<int64_t>(1, n / tp); }

}  // namespace

CompressedGradients LayerGradients(const ModelSpec& m, const Layout& l, bool moe, double params) {
  const int64_t h = m.hidden, t = l.tp;
  std::vector<GradMatrix> g;
  if (!m.mla) {  // MLA's projections: sent whole (the runtime does not train MLA)
    g.push_back({Split(m.q_dim(), t), h});   // attn.q (column-parallel: rows split)
    g.push_back({Split(m.kv_dim(), t), h});  // attn.k
    g.push_back({Split(m.v_dim(), t), h});   // attn.v
    g.push_back({h, Split(m.o_dim(), t)});   // attn.out (row-parallel: columns split)
  }
  if (moe && m.moe) {
    // The router, whole on every TP rank; under SP each rank's gradient covers its own tokens
    // and is summed over TP after the DP reduction, so it is sent whole.
    if (!(l.sp && l.tp > 1)) g.push_back({m.moe->experts, h});
  } else {
    const int64_t f = Split(m.ffn_hidden, t);
    if (m.activation == Activation::kSwiglu) {
      g.push_back({f, h});  // mlp.gate
      g.push_back({f, h});  // mlp.up
      g.push_back({h, f});  // mlp.down
    } else {
      g.push_back({f, h});  // mlp.fc
      g.push_back({h, f});  // mlp.proj
    }
  }
  return WithRest(g, params, l.grad_compression);
}

CompressedGradients EmbeddingGradients(const ModelSpec& m, const Layout& l, double params) {
  std::vector<GradMatrix> g;
  if (!m.tied_embeddings) g.push_back({Split(m.vocab, l.tp), m.hidden});  // vocab-parallel table
  if (m.position == Position::kLearned) g.push_back({m.seq_len, m.hidden});
  return WithRest(g, params, l.grad_compression);
}

CompressedGradients HeadGradients(const ModelSpec& m, const Layout& l, double params) {
  std::vector<GradMatrix> g;
  if (!m.tied_embeddings) g.push_back({Split(m.vocab, l.tp), m.hidden});  // lm_head (a tied copy: whole)
  return WithRest(g, params, l.grad_compression);
}

double CompressionTime(const GpuSpec& gpu, const CompressedGradients& c) {
  constexpr double kF = 4;  // fp32 bytes
  auto gemm = [&](int64_t rows, int64_t cols, int64_t inner) {
    Op op;
    op.kind = OpKind::kMatmul;
    op.m = rows;
    op.n = cols;
    op.k = inner;
    op.flops = op.executed_flops = 2.0 * static_cast<double>(rows) * static_cast<double>(cols) * static_cast<double>(inner);
    op.bytes = kF * static_cast<double>(rows * inner + inner * cols + rows * cols);
    return OpForwardTime(gpu, DType::kFp32, op);
  };
  auto memory = [&](double bytes) {
    Op op;  // OpKind::kMemory
    op.bytes = bytes;
    return OpForwardTime(gpu, DType::kFp32, op);
  };
  double t = 0;
  for (const auto& [n, m, r] : c.shapes) {
    t += gemm(n, r, m) + gemm(m, r, n) + gemm(n, m, r);  // P = M Q, Q = M^T P, M = P Q^T
    const double nm = static_cast<double>(n) * static_cast<double>(m);
    t += 2 * memory(3 * kF * nm);                                         // M += e; e = M - P Q^T
    // P and Q orthonormalized: PyTorch runs torch.linalg.qr for r > 2 in fp32, Householder QR,
    // 2 n r^2 - 2 r^3 / 3 FLOPs (Golub and Van Loan, 4th ed., sec. 5.2.2), about 2 n r^2; priced
    // as a GEMM of that work (modified Gram-Schmidt, the runtime's, has the same 2 n r^2).
    t += gemm(n, r, r) + gemm(m, r, r);
  }
  return t;
}

double CompressionStateBytes(const ModelSpec& m, const Layout& l, int64_t stage) {
  if (!CompressesGradients(l)) return 0;
  // The units' parameters as ParamsOnStage counts them (memory.cc).
  const auto [n, n_moe] = LayersOnStage(m, l, stage);
  double elements = 0;  // matrices + whole + p + q of each unit, times its count
  auto add = [&](const CompressedGradients& c, double count) { elements += count * (c.matrices + c.Sent()); };
  add(LayerGradients(m, l, false, DenseLayerParamsOnRank(m, l)), n - n_moe);
  if (n_moe > 0) add(LayerGradients(m, l, true, MoeLayerParamsOnRank(m, l)), n_moe);
  const double table = static_cast<double>(m.vocab * m.hidden) / static_cast<double>(l.tp);
  if (stage == 0) {
    add(EmbeddingGradients(m, l, table + (m.position == Position::kLearned ? static_cast<double>(m.seq_len * m.hidden) : 0)), 1);
  }
  if (stage == HeadStage(l)) {
    // As MakeContext's head unit (layer_plan.cc); the MTP depths' eh_proj and table copy whole.
    add(HeadGradients(m, l,
                      static_cast<double>(m.NormParams()) +
                          (!m.tied_embeddings || HeadStage(l) != 0 ? table : 0) +
                          MtpHeadParamsOnRank(m, l)),
        1);
  }
  return 4.0 * elements;
}

bool CompressesGradients(const Layout& l) { return l.grad_compression > 1 && l.zero == 0 && l.dp_cp() > 1; }

}  // namespace shardsim
