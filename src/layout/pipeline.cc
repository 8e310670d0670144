// Pipeline placement and the schedules' pass order; see pipeline.h. The orders follow
// Narayanan et al. 2021 (GPipe, 1F1B, interleaved with Megatron-LM's warm-up count) and Qi et
// al. 2023 (the B/W split of zero-bubble pipelines).
#include "src/layout/pipeline.h"

#include <algorithm>

namespace shardsim {

int32_t ChunksPerStage(const Layout& l) { return static_cast<int32_t>(l.vpp); }
int32_t PositionCount(const Layout& l) { return static_cast<int32_t>(l.pp * l.vpp); }
int32_t PositionOf(const Layout& l, int32_t stage, int32_t chunk) {
  const int32_t p = static_cast<int32_t>(l.pp);
  if (l.schedule == Schedule::kZeroBubbleV) return chunk == 0 ? stage : 2 * p - 1 - stage;
  return chunk * p + stage;
}
int32_t StageOfPosition(const Layout& l, int32_t position) {
  const int32_t p = static_cast<int32_t>(l.pp);
  if (l.schedule == Schedule::kZeroBubbleV) return position < p ? position : 2 * p - 1 - position;
  return position % p;
}

int32_t HeadStage(const Layout& l) { return StageOfPosition(l, PositionCount(l) - 1); }

bool SplitsWeightGradients(const Layout& l) {
  return l.schedule == Schedule::kZeroBubble || l.schedule == Schedule::kZeroBubbleV;
}

namespace {

// first_stage_layers / last_stage_layers: the layers of stage s, and of the stages before r.
struct FirstLastSplit {
  int64_t first, middle, last;
  int32_t pp;
  FirstLastSplit(const ModelSpec& m, const Layout& l) : pp(static_cast<int32_t>(l.pp)) {
    const int64_t set = (l.first_stage_layers > 0 ? 1 : 0) + (l.last_stage_layers > 0 ? 1 : 0);
    const int64_t left = m.layers - l.first_stage_layers - l.last_stage_layers;
    middle = l.pp > set ? left / (l.pp - set) : 0;
    first = l.first_stage_layers > 0 ? l.first_stage_layers : middle;
    last = l.last_stage_layers > 0 ? l.last_stage_layers : middle;
  }
  int64_t Stage(int32_t s) const { return s == 0 ? first : s == pp - 1 ? last : middle; }
  int64_t Prefix(int32_t r) const {  // stages 0 .. r-1 (pp >= 2)
    if (r <= 0) return 0;
    return first + static_cast<int64_t>(std::min(r, pp - 1) - 1) * middle + (r >= pp ? last : 0);
  }
};

// embedding_in_split / loss_in_split: (layers + counted ends) / positions, before the ends'
// one layer fewer.
int64_t CountedPerPosition(const ModelSpec& m, const Layout& l) {
  return (m.layers + (l.embedding_in_split ? 1 : 0) + (l.loss_in_split ? 1 : 0)) / PositionCount(l);
}

// The first layer of `position`: the layers of the positions before it.
int64_t FirstLayerOf(const ModelSpec& m, const Layout& l, int32_t position) {
  if (l.embedding_in_split || l.loss_in_split) {
    return position * CountedPerPosition(m, l) - (position > 0 && l.embedding_in_split ? 1 : 0);
  }
  if (l.first_stage_layers == 0 && l.last_stage_layers == 0) return position * (m.layers / PositionCount(l));
  const FirstLastSplit split(m, l);
  const int64_t v = l.vpp;
  const int32_t p = static_cast<int32_t>(l.pp);
  if (l.schedule == Schedule::kZeroBubbleV) {  // positions 0..p-1 down the stages, p..2p-1 back up
    if (position <= p) return split.Prefix(position) / v;
    return m.layers / v + (m.layers - split.Prefix(2 * p - position)) / v;
  }
  return (position / p) * (m.layers / v) + split.Prefix(position % p) / v;
}

}  // namespace

int64_t PositionLayers(const ModelSpec& m, const Layout& l, int32_t position) {
  const int32_t positions = PositionCount(l);
  if (l.embedding_in_split || l.loss_in_split) {
    return CountedPerPosition(m, l) - (position == 0 && l.embedding_in_split ? 1 : 0) -
           (position == positions - 1 && l.loss_in_split ? 1 : 0);
  }
  if (l.first_stage_layers == 0 && l.last_stage_layers == 0) return m.layers / positions;
  return FirstLastSplit(m, l).Stage(StageOfPosition(l, position)) / l.vpp;
}

int64_t StageLayers(const ModelSpec& m, const Layout& l, int32_t stage) {
  int64_t n = 0;
  for (int32_t c = 0; c < ChunksPerStage(l); ++c) n += ChunkOf(m, l, stage, c).layers;
  return n;
}

ModelChunk ChunkOf(const ModelSpec& m, const Layout& l, int32_t stage, int32_t chunk) {
  ModelChunk c;
  c.position = PositionOf(l, stage, chunk);
  c.layers = PositionLayers(m, l, c.position);
  c.first_layer = FirstLayerOf(m, l, c.position);
  c.has_embedding = c.position == 0;
  c.has_head = c.position == PositionCount(l) - 1;
  // The multi-token prediction depths' layers follow the last decoder layer on the head's
  // chunk (Megatron-Core builds them on the last stage): layer indices layers.. (ModelSpec).
  if (c.has_head) c.layers += m.mtp_layers;
  return c;
}

std::vector<ModelChunk> StageChunks(const ModelSpec& m, const Layout& l, int32_t stage) {
  std::vector<ModelChunk> out;
  for (int32_t c = 0; c < ChunksPerStage(l); ++c) out.push_back(ChunkOf(m, l, stage, c));
  return out;
}

std::vector<PipelineStep> ScheduleOrder(const Layout& l, int32_t stage) {
  const int32_t p = static_cast<int32_t>(l.pp), v = static_cast<int32_t>(l.vpp);
  const int32_t m = static_cast<int32_t>(l.microbatches());
  std::vector<PipelineStep> out;
  out.reserve(static_cast<size_t>(m) * v * (l.schedule == Schedule::kZeroBubble ? 3 : 2));
  switch (l.schedule) {
    case Schedule::kGpipe:
      for (int32_t i = 0; i < m; ++i) out.push_back({Pass::kForward, i, 0});
      for (int32_t i = 0; i < m; ++i) out.push_back({Pass::kBackward, i, 0});
      break;
    case Schedule::k1F1B: {
      const int32_t warm = std::min(p - stage - 1, m);
      for (int32_t i = 0; i < warm; ++i) out.push_back({Pass::kForward, i, 0});
      for (int32_t i = 0; i < m - warm; ++i) {
        out.push_back({Pass::kForward, warm + i, 0});
        out.push_back({Pass::kBackward, i, 0});
      }
      for (int32_t i = m - warm; i < m; ++i) out.push_back({Pass::kBackward, i, 0});
      break;
    }
    case Schedule::kInterleaved: {
      // Megatron-LM: unit k of m*v runs chunk (k / p) % v of micro-batch (k / (p v)) p + k % p
      // forward; backward chunks in reverse. Warm-up (p - stage - 1) * 2 + (v - 1) * p units.
      const int32_t total = m * v;
      const int32_t warm = std::min((p - stage - 1) * 2 + (v - 1) * p, total);
      auto unit = [&](int32_t k, bool forward) {
        const int32_t chunk = (k / p) % v;
        return PipelineStep{forward ? Pass::kForward : Pass::kBackward, (k / (p * v)) * p + k % p,
                    forward ? chunk : v - 1 - chunk};
      };
      for (int32_t k = 0; k < warm; ++k) out.push_back(unit(k, true));
      for (int32_t k = 0; k < total - warm; ++k) {
        out.push_back(unit(warm + k, true));
        out.push_back(unit(k, false));
      }
      for (int32_t k = total - warm; k < total; ++k) out.push_back(unit(k, false));
      break;
    }
    case Schedule::kZeroBubbleV:
      return ZeroBubbleVOrder(l, stage);
    case Schedule::kZeroBubble: {
      // 1F1B with the backward split into B (input gradient, sent upstream at once) and W
      // (weight gradient, run right after B), the split of Qi et al. 2023. Their ZB-H1
      // additionally moves W passes into the cool-down; that placement is not modelled, so
      // the bubble is (p-1)(T_F + T_B), not their (p-1)(T_F + T_B - T_W).
      const int32_t warm = std::min(p - stage - 1, m);
      for (int32_t i = 0; i < warm; ++i) out.push_back({Pass::kForward, i, 0});
      for (int32_t i = 0; i < m - warm; ++i) {
        out.push_back({Pass::kForward, warm + i, 0});
        out.push_back({Pass::kBackward, i, 0});
        out.push_back({Pass::kWeightGrad, i, 0});
      }
      for (int32_t i = m - warm; i < m; ++i) {
        out.push_back({Pass::kBackward, i, 0});
        out.push_back({Pass::kWeightGrad, i, 0});
      }
      break;
    }
  }
  return out;
}

}  // namespace shardsim
