// RankShard: the parameters one rank holds under a layout, and how each maps onto the whole
// model's tensor. Megatron-LM's placement (Shoeybi et al. 2019; Narayanan et al. 2021):
//   pipeline  stage s holds model chunks c * pp + s for c < vpp, each layers/(pp vpp) layers;
//             model chunk 0 adds the embeddings, the last one the final norm and the LM head;
//   tensor    Q/K/V, the MLP's first projection(s) and the embedding / LM head are split by
//             rows (heads, ffn_hidden, vocabulary: column-parallel and vocab-parallel), the
//             attention output and MLP down projections by columns (row-parallel); norms,
//             row-parallel biases and learned positions are replicated;
//   expert    an MoE layer's experts are split over the EP group, E / ep consecutive ones a
//             rank (its routers stay whole); they come last in the flat buffer. Each expert's
//             MLP splits over TP as a dense one, or over the experts' own TP group
//             (Layout::etp: this rank's block is its etp_rank's), or under etp=1 stays whole
//             (kWhole);
//   tied      with tied embeddings and the head on another stage than the embedding, the
//             head's stage keeps a copy of the word embeddings (embed.tokens, not the learned
//             positions), initialised alike and kept alike by summing the two copies'
//             gradients (Megatron-LM's shared embedding, _allreduce_word_embedding_grads).
// A tensor's names are the single-process model's (param_layout.h), so a shard can be cut
// from, and gathered back into, the single-process layout.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "runtime/cpu/param_layout.h"
#include "src/layout/layout.h"
#include "src/model/model_spec.h"
#include "src/util/status.h"

namespace shardsim::runtime {

// How a rank's tensor covers the whole model's: all of it, replicated over TP; a block of its
// rows or columns (this TP rank's); or all of it held by this rank alone among its TP peers (an
// expert under etp=1, whose TP peers hold other experts or run other tokens through it).
enum class TensorSplit : uint8_t { kReplicated, kRows, kCols, kWhole };

// A model chunk held by this rank: global layers [first_layer, first_layer + layers).
struct ChunkInfo {
  int64_t model_chunk = 0;  // c * pp + stage
  int64_t first_layer = 0;
  int64_t layers = 0;
  bool has_embedding = false;  // model chunk 0
  bool has_head = false;       // the last model chunk
};

class RankShard {
 public:
  // Checks what the runtime needs of the layout (tp divides heads, kv_heads, ffn_hidden and
  // vocab; pp * vpp divides layers).
  // ep_rank: the rank in its EP group, whose experts (its E / ep consecutive ones) it holds.
  // etp_rank: this rank in the experts' own TP group (Layout::etp set apart from tp), whose
  // slice of each of its experts it holds; ignored otherwise (the experts split over TP).
  static StatusOr<RankShard> Create(const ModelSpec& m, const Layout& l, int64_t tp_rank,
                                    int64_t pp_rank, int64_t ep_rank = 0, int64_t etp_rank = 0);

  const ModelSpec& model() const { return full_spec_; }
  // The model as one TP rank sees it: heads, kv_heads, ffn_hidden and vocab divided by tp, the
  // experts' ffn_hidden by the experts' TP (Layout::expert_tp).
  const ModelSpec& local_model() const { return local_spec_; }
  const ParamLayout& layout() const { return local_; }        // this rank's tensors
  const ParamLayout& full_layout() const { return full_; }    // the single-process model's
  const std::vector<ChunkInfo>& chunks() const { return chunks_; }
  TensorSplit split(size_t i) const { return splits_[i]; }  // of layout().tensors()[i]
  int64_t tp_rank() const { return tp_rank_; }
  int64_t vocab_begin() const { return tp_rank_ * local_spec_.vocab; }
  // Tied embeddings with the head on another stage than the embedding (HeadStage != 0): the
  // table is held twice, on the first stage and on the head's.
  bool table_on_two_stages() const { return table_on_two_stages_; }
  // This rank holds the head's copy of such a table (the head's stage; not the embedding's).
  bool holds_table_copy() const {
    return table_on_two_stages_ && chunks_.back().has_head && !chunks_.front().has_embedding;
  }

  // Replicated over TP but computed from this rank's rows only under sequence parallelism,
  // so its gradient must be summed over the TP group (Megatron's allreduce of the layer-norm
  // gradients under SP): norms and row-parallel biases.
  bool PartialOverTp(size_t i) const { return partial_[i]; }

  // This rank's initial parameters (param_init.h): each element the value the single-process
  // model gives it, so every layout starts from the same model.
  std::vector<float> InitialParams(uint64_t seed) const;

  // Copies this rank's slice of every tensor it holds out of / into a single-process buffer.
  void Slice(const float* full, float* local) const;
  void Place(const float* local, float* full) const;

  // fn(whole tensor, first element's index in it, offset in this rank's buffer, elements) for
  // each row of each tensor this rank holds (in layout() order).
  void ForEachRow(const std::function<void(const ParamTensor& f, int64_t index, int64_t local,
                                           int64_t cols)>& fn) const;

 private:

  ModelSpec full_spec_, local_spec_;
  ParamLayout full_, local_;
  std::vector<ChunkInfo> chunks_;
  std::vector<TensorSplit> splits_;
  std::vector<bool> partial_;
  int64_t tp_rank_ = 0;
  int64_t etp_rank_ = 0;  // the block of an expert's split tensors this rank holds
  bool table_on_two_stages_ = false;
};

}  // namespace shardsim::runtime
