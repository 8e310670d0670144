// Pipeline placement and order: which layers each model chunk holds, which stage runs it, and
// the order in which a stage runs its passes under the layout's schedule (GPipe, 1F1B,
// interleaved, zero-bubble's B/W split). The one place the memory model, the iteration plan
// (estimate and simulator), the runtime's executor and the emitters take them from.
#pragma once

#include <cstdint>
#include <vector>

#include "src/layout/layout.h"
#include "src/model/model_spec.h"

namespace shardsim {

enum class Pass : uint8_t { kForward, kBackward, kWeightGrad, kRecompute, kStep };

// One pass of one micro-batch through one model chunk (chunk < ChunksPerStage; 0 without
// interleaving).
struct PipelineStep {
  Pass pass = Pass::kForward;
  int32_t mb = 0;
  int32_t chunk = 0;
};

// A model chunk: the pipeline position it occupies (0 is the embedding's end, PositionCount-1
// the head's), its layers [first_layer, first_layer + layers).
struct ModelChunk {
  int32_t position = 0;
  int64_t first_layer = 0, layers = 0;
  bool has_embedding = false, has_head = false;
};

// Model chunks per stage (vpp) and along the whole pipeline (pp x vpp).
int32_t ChunksPerStage(const Layout& l);
int32_t PositionCount(const Layout& l);
// Where chunk c of stage s sits. Megatron-LM's interleaving: position c * pp + s, so position q
// runs on stage q % pp. ZB-V's V (Qi et al. 2024, arXiv:2401.10241, Sec. 6): chunk 0 down the
// stages, chunk 1 back up: positions s and 2 pp - 1 - s, so the first stage holds both ends.
int32_t PositionOf(const Layout& l, int32_t stage, int32_t chunk);
int32_t StageOfPosition(const Layout& l, int32_t position);
// The stage of the last position, which holds the final norm, the LM head and the loss: the last
// stage, or under ZB-V the first (which then holds both ends of the model).
int32_t HeadStage(const Layout& l);

// Whether the schedule splits each backward into B (input gradients, sent on at once) and W
// (weight gradients, run later): zero-bubble and ZB-V.
bool SplitsWeightGradients(const Layout& l);
// The transformer layers each position holds (CheckLayout states the conditions):
//   even split: layers / (pp x vpp) everywhere;
//   first_stage_layers F / last_stage_layers L (Megatron-Core's get_num_layers_to_build): the
//     first (last) stage holds F (L) layers, every other stage (layers - F - L) / (the stages
//     left); a stage's layers are split evenly over its vpp chunks;
//   embedding_in_split / loss_in_split: the embedding and the loss count as one layer each,
//     (layers + e + l) / (pp x vpp) per position, the embedding's position holding one layer
//     fewer and the head's one fewer (Megatron-Core's account_for_embedding_in_pipeline_split /
//     account_for_loss_in_pipeline_split), so an end chunk may hold no layer at all.
// Megatron-Core: megatron/core/transformer/transformer_block.py get_num_layers_to_build and
// transformer_layer.py get_transformer_layer_offset, NVIDIA/Megatron-LM d98e8a64dd.
int64_t PositionLayers(const ModelSpec& m, const Layout& l, int32_t position);
// The layers of every chunk of `stage` together, the MTP depths' included (ChunkOf).
int64_t StageLayers(const ModelSpec& m, const Layout& l, int32_t stage);
// Chunk `chunk` of `stage`: the position's layers (PositionLayers), positions in order; the
// head's chunk also holds the multi-token prediction depths' layers (ModelSpec::mtp_layers),
// after the decoder's.
ModelChunk ChunkOf(const ModelSpec& m, const Layout& l, int32_t stage, int32_t chunk);
// Every chunk of `stage`, chunk 0 first.
std::vector<ModelChunk> StageChunks(const ModelSpec& m, const Layout& l, int32_t stage);

// The passes `stage` runs, in order, for one iteration of `l` (resolved and valid).
std::vector<PipelineStep> ScheduleOrder(const Layout& l, int32_t stage);

// ZB-V's order of `stage` (schedule_zbv.cc).
std::vector<PipelineStep> ZeroBubbleVOrder(const Layout& l, int32_t stage);

}  // namespace shardsim
