// See torchtitan_pipeline.h.
#include "src/io/torchtitan_pipeline.h"

#include "src/layout/pipeline.h"

namespace shardsim {
namespace {

// PositionLayers of every position of `l`, and whether they hold exactly the model's layers
// (a split whose divisions do not come out even drops or repeats some).
bool Places(const ModelSpec& m, const Layout& l, const std::vector<int64_t>& blocks) {
  if (static_cast<int64_t>(blocks.size()) != PositionCount(l)) return false;
  int64_t total = 0;
  for (int32_t q = 0; q < PositionCount(l); ++q) {
    const int64_t n = PositionLayers(m, l, q);
    if (n != blocks[static_cast<size_t>(q)] || n < 0) return false;
    total += n;
  }
  return total == m.layers;
}

}  // namespace

bool MultiStageSchedule(Schedule s) { return s == Schedule::kInterleaved || s == Schedule::kZeroBubbleV; }

StatusOr<std::vector<int64_t>> TorchtitanStageBlocks(int64_t stages, int64_t layers, int64_t first_less,
                                                     int64_t last_less) {
  if (stages < 1) return Status::Error("the number of pipeline stages must be at least 1");
  if (stages == 1) return std::vector<int64_t>{layers};
  const int64_t effective = layers + first_less + last_less;
  if (stages > effective) {
    return Status::Error(std::to_string(stages) + " stages for " + std::to_string(effective) +
                         " effective layers (layers + first/last stage less layers): torchtitan raises");
  }
  const int64_t per = effective / stages, extra = effective % stages;
  if (first_less > per || last_less > per) {
    return Status::Error("pipeline_parallel_first/last_stage_less_layers " + std::to_string(first_less) + "/" +
                         std::to_string(last_less) + " above the " + std::to_string(per) +
                         " layers per stage: torchtitan raises");
  }
  std::vector<int64_t> out;
  for (int64_t i = 0; i < stages; ++i) {
    int64_t n = per + (i < extra ? 1 : 0);
    if (i == 0) n -= first_less;
    if (i == stages - 1) n -= last_less;
    out.push_back(n);
  }
  return out;
}

StatusOr<int64_t> TorchtitanStageCount(int64_t pp, bool multi_stage_schedule, const TorchtitanSplit& split,
                                       int64_t layers) {
  if (!split.layers_per_stage) return pp * (multi_stage_schedule ? 2 : 1);
  if (*split.layers_per_stage < 1) return Status::Error("pipeline_parallel_layers_per_stage must be at least 1");
  const int64_t effective = layers + split.first_less + split.last_less;
  const int64_t stages = (effective + *split.layers_per_stage - 1) / *split.layers_per_stage;
  if (stages % pp != 0) {
    return Status::Error(std::to_string(stages) + " virtual stages (ceil of " + std::to_string(effective) +
                         " effective layers / pipeline_parallel_layers_per_stage " +
                         std::to_string(*split.layers_per_stage) + ") are not a multiple of pipeline_parallel_degree " +
                         std::to_string(pp) + ": torchtitan raises");
  }
  const int64_t per_rank = stages / pp;
  if (!multi_stage_schedule && per_rank != 1) {
    return Status::Error("a single-stage schedule with " + std::to_string(per_rank) + " stages per rank: torchtitan raises");
  }
  if (multi_stage_schedule && per_rank < 2) {
    return Status::Error("a multi-stage schedule with one stage per rank: torchtitan raises");
  }
  return stages;
}

StatusOr<TorchtitanSplit> TorchtitanSplitFor(const ModelSpec& m, const Layout& l) {
  const int64_t stages = PositionCount(l);
  std::vector<int64_t> want;
  for (int32_t q = 0; q < stages; ++q) want.push_back(PositionLayers(m, l, q));
  const bool multi = MultiStageSchedule(l.schedule);
  // torchtitan's defaults (1/1) first, then every pair up to a stage's share.
  const int64_t most = m.layers / stages + 2;
  std::vector<std::pair<int64_t, int64_t>> weights = {{1, 1}};
  for (int64_t a = 0; a <= most; ++a) {
    for (int64_t b = 0; b <= most; ++b) weights.emplace_back(a, b);
  }
  for (const auto& [a, b] : weights) {
    StatusOr<std::vector<int64_t>> got = TorchtitanStageBlocks(stages, m.layers, a, b);
    if (!got.ok() || *got != want) continue;
    TorchtitanSplit split;
    split.first_less = a;
    split.last_less = b;
    if (l.vpp == (multi ? 2 : 1)) return split;  // the schedule's default stage count
    // The stage count from layers_per_stage: ceil(E / k) = S.
    const int64_t effective = m.layers + a + b;
    for (int64_t k = 1; k <= effective; ++k) {
      if ((effective + k - 1) / k == stages) {
        split.layers_per_stage = k;
        return split;
      }
    }
  }
  std::string places;
  for (int64_t n : want) places += (places.empty() ? "" : ", ") + std::to_string(n);
  return Status::Error("torchtitan places no split as this layout does (layers per virtual stage: " + places +
                       "): its stages take E / S effective layers, the first E % S one more, and only the first "
                       "and last stage fewer (generate_llm_fqn_per_model_part)");
}

Status SetSplitFromBlocks(const ModelSpec& m, const std::vector<int64_t>& blocks, Layout* l) {
  Layout c = *l;
  c.first_stage_layers = c.last_stage_layers = 0;
  c.embedding_in_split = c.loss_in_split = false;
  std::vector<Layout> candidates = {c};
  for (auto [e, s] : {std::pair{true, true}, std::pair{false, true}, std::pair{true, false}}) {
    Layout k = c;
    k.embedding_in_split = e;
    k.loss_in_split = s;
    candidates.push_back(k);
  }
  if (l->pp >= 2) {  // first / last stage layers: the stages' sums
    Layout k = c;
    int64_t first = 0, last = 0;
    for (int32_t ch = 0; ch < ChunksPerStage(c); ++ch) {
      const size_t f = static_cast<size_t>(PositionOf(c, 0, ch)), t = static_cast<size_t>(PositionOf(c, static_cast<int32_t>(c.pp - 1), ch));
      if (f < blocks.size()) first += blocks[f];
      if (t < blocks.size()) last += blocks[t];
    }
    for (auto [f, t] : {std::pair{first, last}, std::pair{first, int64_t{0}}, std::pair{int64_t{0}, last}}) {
      k.first_stage_layers = f;
      k.last_stage_layers = t;
      if (f > 0 || t > 0) candidates.push_back(k);
    }
  }
  for (const Layout& k : candidates) {
    if (Places(m, k, blocks)) {
      *l = k;
      return Status::Ok();
    }
  }
  std::string places;
  for (int64_t n : blocks) places += (places.empty() ? "" : ", ") + std::to_string(n);
  return Status::Error("torchtitan's split (layers per virtual stage: " + places +
                       ") is none shardsim models: the even split, the embedding or loss counted as a layer, or "
                       "first/last stage layers (src/layout/pipeline.h)");
}

}  // namespace shardsim
