// See shard.h.
#include "runtime/exec/shard.h"

#include <algorithm>
#include <string>
#include <thread>

#include "runtime/cpu/param_init.h"
#include "src/layout/pipeline.h"

namespace shardsim::runtime {
namespace {

// The global layer a tensor belongs to (its block's, or an expert's), or -1 (embeddings, final
// norm, head).
int64_t LayerOf(const std::string& name) {
  const size_t at = name.rfind("blocks.", 0) == 0 ? 7 : IsExpertParam(name) ? 8 : std::string::npos;
  if (at == std::string::npos) return -1;
  return std::stoll(name.substr(at, name.find('.', at) - at));
}


}  // namespace

StatusOr<RankShard> RankShard::Create(const ModelSpec& m, const Layout& l, int64_t tp_rank,
                                      int64_t pp_rank, int64_t ep_rank, int64_t etp_rank) {
  const int64_t tp = l.tp;
  auto divides = [&](int64_t what, const char* name) -> Status {
    if (what % tp == 0) return Status::Ok();
    return Status::Error("tensor parallelism tp=" + std::to_string(tp) + " must divide the model '" +
                         m.name + "''s " + name + " (" + std::to_string(what) + ")");
  };
  SHARDSIM_RETURN_IF_ERROR(divides(m.heads, "heads"));
  SHARDSIM_RETURN_IF_ERROR(divides(m.kv_heads, "kv_heads"));
  SHARDSIM_RETURN_IF_ERROR(divides(m.ffn_hidden, "ffn_hidden"));
  SHARDSIM_RETURN_IF_ERROR(divides(m.vocab, "vocab (the vocab-parallel embedding and LM head)"));
  // Each expert's MLP splits over the experts' TP: the dense TP, or none under etp=1 (whole).
  const int64_t etp = l.expert_tp();
  if (m.moe && m.moe->ffn_hidden % etp != 0) {
    return Status::Error("the experts' tensor parallelism etp=" + std::to_string(etp) + " must divide the model '" +
                         m.name + "''s moe.ffn_hidden (" + std::to_string(m.moe->ffn_hidden) + ")");
  }
  // An uneven split (first_stage_layers, ..., src/layout/pipeline.h) places any layer count.
  if (!l.uneven_split() && m.layers % (l.pp * l.vpp) != 0) {
    return Status::Error("pp x vpp = " + std::to_string(l.pp * l.vpp) + " must divide the model '" +
                         m.name + "''s " + std::to_string(m.layers) + " layers");
  }
  RankShard s;
  s.table_on_two_stages_ = m.tied_embeddings && HeadStage(l) != 0;  // ZB-V's head sits with the table
  s.full_spec_ = m;
  s.local_spec_ = m;
  s.local_spec_.heads /= tp;
  s.local_spec_.kv_heads /= tp;
  s.local_spec_.ffn_hidden /= tp;
  s.local_spec_.vocab /= tp;
  if (m.moe) s.local_spec_.moe->ffn_hidden /= etp;
  s.tp_rank_ = tp_rank;
  s.etp_rank_ = l.own_expert_tp() ? etp_rank : tp_rank;
  SHARDSIM_ASSIGN_OR_RETURN(s.full_, ParamLayout::ForModel(m));
  SHARDSIM_ASSIGN_OR_RETURN(ParamLayout local_all, ParamLayout::ForModel(s.local_spec_));

  for (const ModelChunk& c : StageChunks(m, l, static_cast<int32_t>(pp_rank))) {
    ChunkInfo info;
    info.model_chunk = c.position;
    info.first_layer = c.first_layer;
    info.layers = c.layers;
    info.has_embedding = c.has_embedding;
    info.has_head = c.has_head;
    s.chunks_.push_back(info);
  }
  const bool first = s.chunks_.front().has_embedding;
  const bool last = s.chunks_.back().has_head;
  s.local_ = local_all.Select([&](const ParamTensor& t) {
    const int64_t layer = LayerOf(t.name);
    if (const int64_t e = ExpertOf(t.name); e >= 0) {
      const int64_t local = m.moe->experts / l.ep;
      if (e < ep_rank * local || e >= (ep_rank + 1) * local) return false;  // another EP rank's
    }
    if (layer >= 0) {
      return std::any_of(s.chunks_.begin(), s.chunks_.end(), [&](const ChunkInfo& c) {
        return layer >= c.first_layer && layer < c.first_layer + c.layers;
      });
    }
    // The head's stage keeps a copy of a tied table (the word embeddings only).
    if (t.name.rfind("embed.", 0) == 0) return first || (last && m.tied_embeddings && t.name == "embed.tokens");
    return last;  // final_norm.*, lm_head.weight
  });
  for (const ParamTensor& t : s.local_.tensors()) {
    const ParamTensor& f = s.full_.Get(t.name);
    // An expert whole on its EP member while the dense layers split over TP (etp=1): its TP
    // peers hold other experts (or the same ones for other rows), so it is not TP's replica.
    const bool whole_expert = IsExpertParam(t.name) && tp > 1 && etp == 1;
    const TensorSplit split = t.rows < f.rows   ? TensorSplit::kRows
                              : t.cols < f.cols ? TensorSplit::kCols
                              : whole_expert    ? TensorSplit::kWhole
                                                : TensorSplit::kReplicated;
    s.splits_.push_back(split);
    // Under SP every replicated tensor but the learned positions sees only this rank's rows
    // (the positions' gradient comes from the all-gathered embedding gradient).
    s.partial_.push_back(l.sp && split == TensorSplit::kReplicated && t.name != "embed.positions");
  }
  return s;
}

void RankShard::ForEachRow(
    const std::function<void(const ParamTensor& f, int64_t index, int64_t local, int64_t cols)>& fn)
    const {
  const std::vector<ParamTensor>& tensors = local_.tensors();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const ParamTensor& t = tensors[i];
    const ParamTensor& f = full_.Get(t.name);
    // Rank r's block of rows [r rows, (r+1) rows) or of columns [r cols, (r+1) cols): r its
    // TP rank, or for an expert its rank in the experts' TP group.
    const int64_t r = IsExpertParam(t.name) ? etp_rank_ : tp_rank_;
    const int64_t row0 = splits_[i] == TensorSplit::kRows ? r * t.rows : 0;
    const int64_t col0 = splits_[i] == TensorSplit::kCols ? r * t.cols : 0;
    for (int64_t row = 0; row < t.rows; ++row) {
      fn(f, (row0 + row) * f.cols + col0, t.offset + row * t.cols, t.cols);
    }
  }
}

void RankShard::Slice(const float* full, float* local) const {
  ForEachRow([&](const ParamTensor& f, int64_t index, int64_t at, int64_t cols) {
    std::copy_n(full + f.offset + index, cols, local + at);
  });
}

void RankShard::Place(const float* local, float* full) const {
  ForEachRow([&](const ParamTensor& f, int64_t index, int64_t at, int64_t cols) {
    std::copy_n(local + at, cols, full + f.offset + index);
  });
}

std::vector<float> RankShard::InitialParams(uint64_t seed) const {
  std::vector<float> local(local_.total_size());
  struct Row {
    const ParamTensor* f;
    int64_t index, at, cols;
  };
  std::vector<Row> rows;
  ForEachRow([&](const ParamTensor& f, int64_t index, int64_t at, int64_t cols) {
    rows.push_back({&f, index, at, cols});
  });
  // Each value is a pure function of (seed, tensor, index), so threads may fill disjoint rows
  // in any order: a 70B model's rank holds ~1e9 parameters, tens of seconds on one core.
  const int64_t threads = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, 16);
  const int64_t per = (static_cast<int64_t>(rows.size()) + threads - 1) / threads;
  std::vector<std::thread> pool;
  for (int64_t w = 0; w < threads && w * per < static_cast<int64_t>(rows.size()); ++w) {
    pool.emplace_back([&, w] {
      const int64_t end = std::min<int64_t>(static_cast<int64_t>(rows.size()), (w + 1) * per);
      for (int64_t r = w * per; r < end; ++r) {
        InitialValues(seed, *rows[r].f, rows[r].index, rows[r].cols, local.data() + rows[r].at);
      }
    });
  }
  for (std::thread& t : pool) t.join();
  return local;
}

}  // namespace shardsim::runtime
