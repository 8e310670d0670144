// Gradient compression as the layout's compress=R runs it: PowerSGD (Vogels, Karimireddy and
// Jaggi, NeurIPS 2019, Algorithm 1 with error feedback and warm start), as PyTorch's DDP
// communication hook implements it (torch/distributed/algorithms/ddp_comm_hooks/
// powerSGD_hook.py, PyTorch 1.13): each gradient matrix M (n x m) of a bucket, plus its error
// from the last step, is approximated by P Q^T of rank r: P = M Q is all-reduced and
// orthonormalized, Q = M^T P is all-reduced, M becomes P Q^T and the rest of M is the error
// carried to the next step. Vectors (norm gains, biases) and the matrices not worth compressing
// are all-reduced whole. Where PyTorch runs three all-reduces a bucket (the whole tensors, the
// Ps, the Qs), the tensors sent whole here ride with the Ps: two, [whole ++ P] then Q.
//
// The layout gives a ratio, not a rank: each matrix gets the rank that sends about 1/R of its
// elements, r = floor(n m / (R (n + m))), at least 1 and at most min(n, m); a matrix whose
// factors would not be smaller than itself, r (n + m) >= n m, is sent whole (PyTorch's
// _should_compress with min_compression_rate 1). So a layout's effective ratio is at most R:
// what is sent whole is not divided.
//
// Sent whole besides vectors, because compressing them would change the numbers, not only the
// bytes: a tied embedding table (on two pipeline stages its copies' gradients are summed after
// the DP reduction, and a sum of two low-rank approximations is not the approximation of the
// sum); a matrix every TP rank holds whole but whose gradient each computes in part under
// sequence parallelism (the MoE router: summed over TP after the DP reduction). An MoE layer's
// experts are reduced over their own replicas (Group kEdp), uncompressed.
//
// Compression runs only under ZeRO 0 (PyTorch's hook is a DistributedDataParallel hook: DDP
// all-reduces whole gradients; ZeRO 1-3 reduce-scatter them) and only with DP replicas
// (dp x cp > 1: without them nothing is sent).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "src/hardware/hardware_spec.h"
#include "src/layout/layout.h"
#include "src/model/model_spec.h"

namespace shardsim {

// The rank of a rows x cols gradient matrix under compress=ratio; 0 when it is sent whole.
int64_t PowerSgdRank(int64_t rows, int64_t cols, double ratio);

struct GradMatrix {
  int64_t rows = 0, cols = 0;
};

// What one bucket's reduction sends and keeps under compression, in gradient elements.
struct CompressedGradients {
  double whole = 0;     // elements all-reduced as they are
  double p = 0, q = 0;  // elements of the P (n x r) and Q (m x r) factors
  double matrices = 0;  // elements of the compressed matrices: their error feedback
  double flops = 0;     // the compressor's GEMMs: P = M Q, Q = M^T P, M = P Q^T, 2 n m r each
  std::vector<std::array<int64_t, 3>> shapes;  // (n, m, r) of each compressed matrix
  double first() const { return whole + p; }  // the first all-reduce, [whole ++ P]
  double second() const { return q; }         // the second, Q
  double Sent() const { return whole + p + q; }
  CompressedGradients& operator+=(const CompressedGradients& o);
};

// `matrices` compressed at `ratio`, plus `whole` elements sent whole.
CompressedGradients Compress(const std::vector<GradMatrix>& matrices, double whole, double ratio);

// A transformer layer's DP-reduced gradients on one rank (TP-split shapes, the runtime's
// tensors: runtime/cpu/param_layout.cc), `params` elements in all (the layer plan's count: what
// the enumerated tensors do not cover, MLA's projections, shared experts, Q/K norms, is sent
// whole). MoE layers: the router, not the experts.
CompressedGradients LayerGradients(const ModelSpec& m, const Layout& l, bool moe, double params);
// The embeddings' (word table, learned positions) and the head's (final norm, LM head, or the
// copy of a tied table), `params` elements each.
CompressedGradients EmbeddingGradients(const ModelSpec& m, const Layout& l, double params);
CompressedGradients HeadGradients(const ModelSpec& m, const Layout& l, double params);

// The compressor's kernels for `c` on `gpu`, in fp32 (the gradients' type): per matrix the
// three GEMMs (skinny: r columns; priced with their operands' bytes, so memory-bound where they
// are), the orthonormalization of P and Q (2 n r^2 FLOPs each, as GEMMs), two elementwise passes over M
// (M += error before; error = M - P Q^T after: two reads and a write each).
double CompressionTime(const GpuSpec& gpu, const CompressedGradients& c);

// The compressor's persistent state on a rank of `stage` (0 without compression), held as
// gradients: each compressed matrix's error feedback, each bucket's Q factors (warm start) and
// its first all-reduce's buffer, [whole ++ P] (PyTorch's hook keeps error_dict, p_memory_dict and
// q_memory_dict across steps): 4 bytes (fp32) x (matrices + whole + p + q).
double CompressionStateBytes(const ModelSpec& m, const Layout& l, int64_t stage);

// Whether the layout compresses its DP gradients (compress > 1, ZeRO 0, dp x cp > 1).
bool CompressesGradients(const Layout& l);

}  // namespace shardsim
