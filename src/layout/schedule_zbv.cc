// ZB-V (Qi et al. 2024, "Zero Bubble Pipeline Parallelism", arXiv:2401.10241, Sec. 6): each
// stage holds two chunks in a V (PositionOf: chunk 0 at position s, chunk 1 at 2 pp - 1 - s),
// every backward is split into B (input gradients, sent on at once) and W (weight gradients),
// and W passes fill what 1F1B leaves idle. The order of stage r, as the paper builds it for
// T_F = T_B = T_W (PyTorch's torch.distributed.pipelining runs the same order), with
// n = max(m, 2 pp - 1) micro-batches so that the pattern is whole, passes of micro-batches
// beyond m then dropped:
//   warm-up   2 (pp - r) - 1 forwards of chunk 0; r pairs F(chunk 1) F(chunk 0); pp - r triples
//             F B W of chunk 1 (the V's bottom turns at once);
//   steady    while a chunk-0 forward or a chunk-1 forward is left: F(0) if any left, B W of
//             chunk 0, F B W of chunk 1;
//   cool-down r pairs B(0) B(1); pp - r pairs B(0) W(0); the W passes left, chunk 1's first.
// Its peak activation memory is 1F1B's (pp micro-batches of a whole stage, the paper's claim).
#include "src/layout/pipeline.h"
#include "src/util/check.h"

namespace shardsim {

std::vector<PipelineStep> ZeroBubbleVOrder(const Layout& l, int32_t r) {
  const int32_t p = static_cast<int32_t>(l.pp);
  const int32_t m = static_cast<int32_t>(l.microbatches());
  const int32_t n = std::max(m, 2 * p - 1);
  CHECK(r >= 0 && r < p) << "stage " << r << " of " << p;
  std::vector<PipelineStep> order;
  order.reserve(static_cast<size_t>(m) * 6);
  {
    int32_t f[2] = {0, 0}, b[2] = {0, 0}, w[2] = {0, 0};
    auto run = [&](Pass pass, int32_t chunk) {
      int32_t* counter = pass == Pass::kForward ? f : pass == Pass::kBackward ? b : w;
      const int32_t mb = counter[chunk]++;
      if (mb < m) order.push_back({pass, mb, chunk});
    };
    for (int32_t i = 0; i < 2 * (p - r) - 1; ++i) run(Pass::kForward, 0);
    for (int32_t i = 0; i < r; ++i) {
      run(Pass::kForward, 1);
      run(Pass::kForward, 0);
    }
    for (int32_t i = 0; i < p - r; ++i) {
      run(Pass::kForward, 1);
      run(Pass::kBackward, 1);
      run(Pass::kWeightGrad, 1);
    }
    while (f[1] < f[0] || f[0] < n) {
      if (f[0] < n) run(Pass::kForward, 0);
      run(Pass::kBackward, 0);
      run(Pass::kWeightGrad, 0);
      run(Pass::kForward, 1);
      run(Pass::kBackward, 1);
      run(Pass::kWeightGrad, 1);
    }
    for (int32_t i = 0; i < r; ++i) {
      run(Pass::kBackward, 0);
      run(Pass::kBackward, 1);
    }
    for (int32_t i = 0; i < p - r; ++i) {
      run(Pass::kBackward, 0);
      run(Pass::kWeightGrad, 0);
    }
    while (w[1] < b[1]) run(Pass::kWeightGrad, 1);
    while (w[0] < b[0]) run(Pass::kWeightGrad, 0);
    CHECK(f[0] == n && f[1] == n && b[0] == n && b[1] == n && w[0] == n && w[1] == n)
        << "ZB-V order of stage " << r << " incomplete";
  }
  return order;
}

}  // namespace shardsim
