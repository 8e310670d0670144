// See pipeline_splits.h.
#include "planner/pipeline_splits.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <utility>

#include "src/layout/pipeline.h"

namespace shardsim::planner {

void PipelineSplit::ApplyTo(Layout& l) const {
  l.first_stage_layers = first_stage_layers;
  l.last_stage_layers = last_stage_layers;
  l.embedding_in_split = embedding_in_split;
  l.loss_in_split = loss_in_split;
}

double HeadInLayers(const ModelSpec& m) {
  const double body = static_cast<double>(m.ActiveParams() - m.MtpActiveParams() -
                                          m.EmbeddingParams() - m.HeadParams());
  const double attention =
      2.0 * static_cast<double>(m.seq_len) * static_cast<double>(m.heads * m.head_dim);
  const double layer = 2.0 * body / static_cast<double>(m.layers) + attention;
  // Multi-token prediction: each depth's layer, projection and norms (its active weights) and
  // attention, and the head once more.
  const double depths = static_cast<double>(m.mtp_layers);
  const double logits = 2.0 * static_cast<double>(m.vocab) * static_cast<double>(m.hidden);
  return ((1 + depths) * logits + 2.0 * static_cast<double>(m.MtpActiveParams()) +
          depths * attention) /
         layer;
}

PipelineSplit BalancedSplit(const ModelSpec& m, int64_t pp, int64_t vpp) {
  const int64_t n = m.layers;
  PipelineSplit best;
  if (pp < 2 || vpp < 1) return best;
  const double head = HeadInLayers(m);
  double best_work = std::numeric_limits<double>::infinity(), best_ends = best_work;
  int64_t best_skew = 0;
  bool found = false;
  // Middle stages' layers (a multiple of vpp; any with pp = 2, which has none).
  const int64_t middles = pp - 2;
  for (int64_t mid = vpp; mid <= (middles > 0 ? n / middles : vpp); mid += vpp) {
    const int64_t rest = n - middles * mid;  // the first and last stages'
    if (rest < 2 * vpp || rest % vpp != 0) continue;
    // The last stage carries the head: give it about (rest - head) / 2 layers, in vpp steps.
    const double ideal = (static_cast<double>(rest) - head) / 2.0;
    for (int64_t k : {static_cast<int64_t>(std::floor(ideal / static_cast<double>(vpp))),
                      static_cast<int64_t>(std::ceil(ideal / static_cast<double>(vpp)))}) {
      const int64_t last = std::max(vpp, std::min(rest - vpp, k * vpp));
      const int64_t first = rest - last;
      const double work = std::max({static_cast<double>(first), middles > 0 ? static_cast<double>(mid) : 0.0,
                                    static_cast<double>(last) + head});
      // Ties: the end stages' larger work, then the distance from the even split.
      const double ends = std::max(static_cast<double>(first), static_cast<double>(last) + head);
      const int64_t even = middles > 0 ? mid : rest / 2;
      const int64_t skew = std::llabs(first - even) + std::llabs(last - even);
      const bool same = std::abs(work - best_work) <= 1e-9;
      if (work < best_work - 1e-9 || (same && ends < best_ends - 1e-9) ||
          (same && std::abs(ends - best_ends) <= 1e-9 && skew < best_skew)) {
        best_work = work;
        best_ends = ends;
        best_skew = skew;
        found = true;
        const bool pp2 = middles == 0;
        best.first_stage_layers = pp2 || first != mid ? first : 0;
        best.last_stage_layers = pp2 || last != mid ? last : 0;
      }
    }
  }
  // Only a split near the ideal (layers + head) / pp, within one chunk of layers per stage:
  // where the stages are too many for the layers (96 layers over 64 stages would put 17 on
  // each end and 1 on the others) no split is balanced and none is searched.
  if (!found || best_work > (static_cast<double>(n) + head) / static_cast<double>(pp) + static_cast<double>(vpp)) {
    return PipelineSplit{};
  }
  // The even split written as first/last (pp = 2 with equal halves, or nothing changed).
  const int64_t f = best.first_stage_layers, l = best.last_stage_layers;
  if ((f == 0 && l == 0) || (pp == 2 && f == l)) return PipelineSplit{};
  return best;
}

std::vector<PipelineSplit> SearchedSplits(const ModelSpec& m, int64_t pp, int64_t vpp, Schedule s) {
  std::vector<PipelineSplit> out;
  const int64_t n = m.layers, positions = pp * vpp;
  if (pp < 2) {
    if (vpp == 1) out.push_back(PipelineSplit{});
    return out;
  }
  if (n % positions == 0) out.push_back(PipelineSplit{});
  // Megatron-Core's accounting; a position must keep at least one layer where it has no end.
  for (const auto& [embed, loss] : {std::pair{true, true}, std::pair{false, true}}) {
    const int64_t counted = n + (embed ? 1 : 0) + (loss ? 1 : 0);
    // (Both counted over two positions is the even split again: (n + 2) / 2 - 1 = n / 2 each.)
    if (counted % positions == 0 && counted / positions >= 2 && !(embed && loss && positions == 2)) {
      PipelineSplit p;
      p.embedding_in_split = embed;
      p.loss_in_split = loss;
      out.push_back(p);
    }
  }
  const PipelineSplit balanced = BalancedSplit(m, pp, vpp);
  if (balanced.first_stage_layers > 0 || balanced.last_stage_layers > 0) out.push_back(balanced);
  // Two splits that place the same layers on the same positions (26 counted over 13 stages is
  // 1 + 11 x 2 + 1, as first = last = 1 is) are one layout: the first of them is kept.
  Layout l;
  l.pp = pp;
  l.vpp = vpp;
  l.schedule = s;
  std::vector<std::vector<int64_t>> seen;
  std::vector<PipelineSplit> distinct;
  for (const PipelineSplit& p : out) {
    p.ApplyTo(l);
    std::vector<int64_t> layers;
    for (int32_t q = 0; q < PositionCount(l); ++q) layers.push_back(PositionLayers(m, l, q));
    if (std::find(seen.begin(), seen.end(), layers) != seen.end()) continue;
    seen.push_back(std::move(layers));
    distinct.push_back(p);
  }
  return distinct;
}

}  // namespace shardsim::planner
