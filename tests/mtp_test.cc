// Multi-token prediction (ModelSpec::mtp_layers, issue 16 item 1; DeepSeek-V3, arXiv:2412.19437
// Sec. 2.2; Megatron-Core's multi_token_prediction.py): each depth is one more transformer layer
// on the head's stage, a 2h -> h projection, three norms, and one more pass through the shared
// head and a cross-entropy. Priced in FLOPs, parameters, memory and the layer plan; read from
// Hugging Face configs and the model YAML; written to the exports; refused by the runtime. Every
// expected value is worked by hand in the comment before it.
#include <gtest/gtest.h>

#include <string>

#include "planner/emit.h"
#include "planner/pipeline_splits.h"
#include "runtime/cpu/param_layout.h"
#include "src/cost/layer_plan.h"
#include "src/cost/memory.h"
#include "src/cost/ops.h"
#include "src/hardware/hardware_spec.h"
#include "src/layout/layout.h"
#include "src/layout/pipeline.h"
#include "src/model/model_spec.h"
#include "tests/test_models.h"

namespace shardsim {
namespace {

ModelSpec WithMtp(ModelSpec m, int64_t depths) {
  m.mtp_layers = depths;
  return m;
}

// Model FLOPs per sequence without recompute (Narayanan et al. 2021, eq. 3's variant):
// 3 [l (24 s h^2 + 4 s^2 h) + 2 s h V]. One MTP depth adds a layer (24 s h^2 + 4 s^2 h), the
// projection over 2h inputs to h outputs (2 s (2h) h = 4 s h^2) and the head again (2 s h V),
// each forward and backward: 3 (28 s h^2 + 4 s^2 h + 2 s h V) a sequence. GPT-3's shape, B = 1536.
TEST(Mtp, AddsALayerAProjectionAndAHeadToTheModelFlops) {
  const double h = 12288, s = 2048, V = 51200, B = 1536;
  const ModelSpec m = testing::GptModel(96, 12288, 96, 51200, 2048);
  Layout lay;
  lay.dp = 1;
  lay.gbs = 1536;
  const double added = 3 * B * (28 * s * h * h + 4 * s * s * h + 2 * s * h * V);
  EXPECT_NEAR((IterationFlops(WithMtp(m, 1), lay, false) - IterationFlops(m, lay, false)) / added,
              1.0, 1e-9);
  // Two depths add twice as much.
  EXPECT_NEAR(
      (IterationFlops(WithMtp(m, 2), lay, false) - IterationFlops(m, lay, false)) / (2 * added),
      1.0, 1e-9);
}

// The depths sit on the head's chunk, after its decoder layers: pp = 2 over 4 layers gives
// stage 0 layers 0-1 and stage 1 layers 2-3 plus the depth's layer, index 4.
TEST(Mtp, LayersJoinTheHeadsChunk) {
  const ModelSpec m = WithMtp(testing::GptModel(4, 1024, 16, 51200, 2048), 1);
  const Layout l = testing::ResolvedOnH100("tp=1,pp=2,mbs=1,gbs=8", 2);
  const ModelChunk first = ChunkOf(m, l, 0, 0), last = ChunkOf(m, l, 1, 0);
  EXPECT_EQ(first.layers, 2);
  EXPECT_EQ(last.first_layer, 2);
  EXPECT_EQ(last.layers, 3);
  EXPECT_EQ(StageLayers(m, l, 0), 2);
  EXPECT_EQ(StageLayers(m, l, 1), 3);
  EXPECT_EQ(PositionLayers(m, l, 1), 2);  // the decoder's split is unchanged
}

// Parameters on the head's stage, GPT shape h = 1024, V = 51200, untied, tp = 2, pp = 2. One
// dense layer on a rank (Megatron's GPT: column-parallel QKV and fc1 with their biases split,
// row-parallel proj and fc2 split with their biases whole, two LayerNorms whole): weights
// (3h^2 + h^2 + 4h^2 + 4h^2) / 2 = 6h^2 = 6,291,456; biases 3h/2 + h + 4h/2 + h = 5.5h = 5,632;
// norms 2 x 2h = 4,096: 6,301,184. The depth's own: eh_proj 2h^2 / 2 = 1,048,576 and three
// LayerNorms 3 x 2h = 6,144. The embedding table copy the depth looks tokens up in (the head's
// stage is not the embedding's, and the table is untied): V h / 2 = 26,214,400. In all
// 6,301,184 + 1,048,576 + 6,144 + 26,214,400 = 33,570,304 more; stage 0 unchanged.
TEST(Mtp, ParametersOnTheHeadsStage) {
  ModelSpec m = testing::GptModel(4, 1024, 16, 51200, 2048);
  m.tied_embeddings = false;
  const Layout l = testing::ResolvedOnH100("tp=2,pp=2,mbs=1,gbs=8", 4);
  EXPECT_EQ(ParamsOnStage(WithMtp(m, 1), l, 1).dense - ParamsOnStage(m, l, 1).dense, 33570304.0);
  EXPECT_EQ(ParamsOnStage(WithMtp(m, 1), l, 0).dense, ParamsOnStage(m, l, 0).dense);
  // Tied: the head's stage holds the table's copy already, so only the layer and the depth's own.
  m.tied_embeddings = true;
  EXPECT_EQ(ParamsOnStage(WithMtp(m, 1), l, 1).dense - ParamsOnStage(m, l, 1).dense,
            6301184.0 + 1048576 + 6144);
  // One stage: the embedding is there, no copy.
  m.tied_embeddings = false;
  const Layout one = testing::ResolvedOnH100("tp=2,pp=1,mbs=1,gbs=8", 2);
  EXPECT_EQ(ParamsOnStage(WithMtp(m, 1), one, 0).dense - ParamsOnStage(m, one, 0).dense,
            6301184.0 + 1048576 + 6144);
}

// The plan: on the head's stage a micro-batch's forward runs the decoder's 2 layers and the
// depth's (3 "attention forward" tasks), and the embedding copy's gradient is summed with the
// first stage's over the embedding group, untied as the table is; without MTP neither.
TEST(Mtp, ThePlanRunsTheDepthOnTheHeadsStage) {
  ModelSpec m = testing::GptModel(4, 1024, 16, 51200, 2048);
  m.tied_embeddings = false;
  const HardwareSpec hw = *LoadHardware("dgx-h100");
  const Layout l = testing::ResolvedOnH100("tp=1,pp=2,mbs=1,gbs=8", 2);
  for (const int64_t depths : {0, 1}) {
    const IterationPlan plan = BuildIterationPlan(WithMtp(m, depths), hw, l);
    for (int32_t stage = 0; stage < 2; ++stage) {
      const StagePlan& s = plan.stages[static_cast<size_t>(stage)];
      const PassPlan& forward = plan.PassFor(s, PipelineStep{Pass::kForward, 0, 0}, false);
      int attention = 0;
      for (const TaskSpec& t : forward.tasks)
        attention += forward.names[static_cast<size_t>(t.name)] == "attention forward";
      EXPECT_EQ(attention, stage == 1 ? 2 + depths : 2)
          << "stage " << stage << ", depths " << depths;
      bool embedding_sum = false;
      for (const TaskSpec& t : s.tail.tasks) {
        embedding_sum = embedding_sum || s.tail.names[static_cast<size_t>(t.name)] ==
                                             "embedding gradient all-reduce";
      }
      EXPECT_EQ(embedding_sum, depths == 1) << "stage " << stage;
    }
  }
}

// The depth's own TP exchanges (layer_plan.cc MtpTpExchanges; Megatron-Core's
// multi_token_prediction.py), outside its transformer layer: the plan's TP collectives with no
// layer (layer -1) on the head's stage, one micro-batch, with one depth minus without. A
// micro-batch is s = 2048 tokens of h = 1024 in bf16: H = 2048 x 1024 x 2 = 4,194,304 bytes
// (collective.h's convention: an all-gather's and reduce-scatter's bytes are the group's
// whole tensor); the cross-entropy's statistics are tp x 3 floats a token = 2 x 3 x 4 x 2048 =
// 49,152 bytes.
//   SP, forward: embedding reduce-scatter H, eh_proj input all-gather 2H, output all-gather H,
//     head input all-gather H, statistics: 5H + 49,152 = 21,020,672; backward: all-gather H,
//     reduce-scatter H, all-gather H, eh_proj input gradient reduce-scatter 2H, all-gather H:
//     6H = 25,165,824.
//   No SP, forward: embedding all-reduce H, output all-gather H, statistics: 2H + 49,152 =
//     8,437,760; backward: the head's input all-reduce H, eh_proj's input 2H: 3H = 12,582,912.
TEST(Mtp, TheDepthsTpExchangesArePriced) {
  const ModelSpec m = testing::GptModel(4, 1024, 16, 51200, 2048);
  const HardwareSpec hw = *LoadHardware("dgx-h100");
  struct Case {
    const char* layout;
    double forward, backward;
  };
  for (const Case& c : {Case{"tp=2,pp=1,sp=on,mbs=1,gbs=8,dtype=bf16", 21020672.0, 25165824.0},
                        Case{"tp=2,pp=1,sp=off,mbs=1,gbs=8,dtype=bf16", 8437760.0, 12582912.0}}) {
    const Layout l = testing::ResolvedOnH100(c.layout, 2);
    double added[2] = {0, 0};
    for (const int64_t depths : {0, 1}) {
      const IterationPlan plan = BuildIterationPlan(WithMtp(m, depths), hw, l);
      const StagePlan& s = plan.stages[0];
      for (const Pass pass : {Pass::kForward, Pass::kBackward}) {
        const PassPlan& p = plan.PassFor(s, PipelineStep{pass, 0, 0}, false);
        for (const TaskSpec& t : p.tasks) {
          if (t.kind == TaskKind::kCollective && t.group == GroupKind::kTp && t.layer == -1) {
            added[pass == Pass::kForward ? 0 : 1] += (depths == 1 ? 1 : -1) * t.bytes;
          }
        }
      }
    }
    EXPECT_DOUBLE_EQ(added[0], c.forward) << c.layout;
    EXPECT_DOUBLE_EQ(added[1], c.backward) << c.layout;
  }
}

// The cost-balanced pipeline split weighs the head's stage with the depth's work too. GPT shape
// h = 1024, s = 2048, V = 51200: a layer is 2 (12 h^2 + 13 h) + 2 s h = 25,192,448 + 4,194,304 =
// 29,386,752 FLOPs a token; the depth adds the head's 2 V h = 104,857,600, twice its active
// weights (the layer's 12 h^2 + 13 h, eh_proj's 2 h^2, three LayerNorms' 6 h: 14,699,520) =
// 29,399,040, and the attention's 2 s h = 4,194,304: 138,450,944 / 29,386,752 layers more.
TEST(Mtp, TheBalancedSplitWeighsTheDepth) {
  const ModelSpec m = testing::GptModel(8, 1024, 16, 51200, 2048);
  EXPECT_NEAR(planner::HeadInLayers(WithMtp(m, 1)) - planner::HeadInLayers(m),
              138450944.0 / 29386752.0, 1e-12);
}

// The model YAML: a depth count above the layers is refused at its line.
TEST(Mtp, TheModelYamlBoundsTheDepths) {
  const std::string base =
      "name: x\nsource: test\nlayers: 2\nhidden: 64\nheads: 4\nvocab: 128\nseq_len: "
      "16\nactivation: gelu\nnorm: layernorm\n";
  StatusOr<ModelSpec> ok = ParseModelYaml(base + "mtp_layers: 1\n", "x.yaml");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->mtp_layers, 1);
  StatusOr<ModelSpec> bad = ParseModelYaml(base + "mtp_layers: 3\n", "x.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("x.yaml:10"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("mtp_layers=3 is more than layers=2"), std::string::npos)
      << bad.status().message();
}

// The exports carry it (Megatron-LM's --mtp-num-layers, NeMo's TransformerConfig.mtp_num_layers),
// and the CPU runtime says up front that it does not train it.
TEST(Mtp, ExportsCarryItAndTheRuntimeRefusesIt) {
  ModelSpec m = WithMtp(testing::TinyModel(64), 1);
  const Layout l = testing::ResolvedOnH100("tp=1,pp=1,mbs=1,gbs=8", 1);
  EXPECT_NE(planner::EmitMegatron(m, l).find("--mtp-num-layers 1"), std::string::npos);
  EXPECT_NE(planner::EmitNemo(m, l).find("model.config.mtp_num_layers = 1"), std::string::npos)
      << planner::EmitNemo(m, l);
  StatusOr<runtime::ParamLayout> p = runtime::ParamLayout::ForModel(m);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("does not train multi-token prediction"), std::string::npos);
  m.mtp_layers = 0;
  EXPECT_TRUE(runtime::ParamLayout::ForModel(m).ok());
}

}  // namespace
}  // namespace shardsim
