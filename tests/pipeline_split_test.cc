// Uneven pipeline splits (issue 15, item 1): where each split puts the layers
// (src/layout/pipeline.h), what CheckLayout accepts, that the estimate and the simulation price
// them as they price the even split (the estimate is the critical path, below the simulation),
// and that the planner searches them: Llama 3 405B with pp 16 on 16,384 H100 and a 70-layer
// model with pp 12 on 384 A100, neither expressible with an even split.
#include <gtest/gtest.h>

#include <random>

#include "planner/pipeline_splits.h"
#include "planner/planner.h"
#include "src/cost/estimate.h"
#include "src/layout/pipeline.h"
#include "src/layout/validate.h"
#include "src/model/model_spec.h"
#include "src/sim/simulator.h"
#include "src/sim/task_graph.h"
#include "tests/contains.h"
#include "tests/test_models.h"

namespace shardsim {
namespace {

Layout L(const std::string& spec) {
  StatusOr<Layout> l = ParseLayout(spec);
  EXPECT_TRUE(l.ok()) << spec << ": " << l.status().message();
  if (!l.ok()) return Layout{};
  return *l;
}

ModelSpec WithLayers(int64_t layers) {
  ModelSpec m = testing::GptModel(layers, 1024, 16, 4096, 1024);
  m.tied_embeddings = false;
  return m;
}

// A bundled cluster description with `nodes` nodes.
HardwareSpec Bundled(const std::string& name, int64_t nodes) {
  StatusOr<HardwareSpec> loaded = LoadHardware(name);
  EXPECT_TRUE(loaded.ok()) << name;
  HardwareSpec h = loaded.ok() ? *loaded : HardwareSpec{};
  h.nodes = nodes;
  return h;
}

// Layers per position, positions in pipeline order.
std::vector<int64_t> Positions(const ModelSpec& m, const Layout& l) {
  std::vector<int64_t> out(static_cast<size_t>(l.pp * l.vpp));
  for (int32_t s = 0; s < l.pp; ++s) {
    for (const ModelChunk& c : StageChunks(m, l, s)) out[static_cast<size_t>(c.position)] = c.layers;
  }
  return out;
}

// Megatron-Core's get_num_layers_to_build, worked by hand for three runs.
TEST(PipelineSplit, PlacesTheLayersAsMegatronCoreDoes) {
  // Llama 3.1 405B as NeMo's llama31_405b recipe runs it: 126 layers, pp 8, vpp 8, embedding
  // and loss counted: (126 + 2) / 64 = 2 per position, the first and last one layer fewer.
  const Layout a = L("pp=8,vpp=8,schedule=interleaved,embedding_in_split=on,loss_in_split=on");
  std::vector<int64_t> want(64, 2);
  want.front() = want.back() = 1;
  EXPECT_EQ(Positions(WithLayers(126), a), want);
  // Stage 0 holds positions 0, 8, ..., 56: 1 + 7 x 2 = 15 layers; stage 3 all 2s: 16.
  EXPECT_EQ(StageLayers(WithLayers(126), a, 0), 15);
  EXPECT_EQ(StageLayers(WithLayers(126), a, 3), 16);
  // Position 1 (stage 1, chunk 0) starts after position 0's one layer; position 8 (stage 0,
  // chunk 1) after 1 + 7 x 2 = 15.
  EXPECT_EQ(ChunkOf(WithLayers(126), a, 1, 0).first_layer, 1);
  EXPECT_EQ(ChunkOf(WithLayers(126), a, 0, 1).first_layer, 15);
  // Meta's 16-stage Llama 3 405B: first and last stage one layer short, 7 + 14 x 8 + 7 = 126.
  const Layout b = L("pp=16,first_stage_layers=7,last_stage_layers=7");
  std::vector<int64_t> meta(16, 8);
  meta.front() = meta.back() = 7;
  EXPECT_EQ(Positions(WithLayers(126), b), meta);
  // With vpp 2 each stage's layers halve? 7 is odd: CheckLayout refuses (below). With F = 6,
  // L = 8 and vpp 2: middle (126 - 14) / 14 = 8, chunks 3 | 4 ... 4 | 4: position 16 (stage 0,
  // chunk 1) starts after the first round, 126 / 2 = 63 layers.
  const Layout c = L("pp=16,vpp=2,schedule=interleaved,first_stage_layers=6,last_stage_layers=8");
  EXPECT_EQ(ChunkOf(WithLayers(126), c, 0, 0).layers, 3);
  EXPECT_EQ(ChunkOf(WithLayers(126), c, 0, 1).first_layer, 63);
  EXPECT_EQ(ChunkOf(WithLayers(126), c, 15, 1).first_layer, 122);
  // ZB-V with F = 4, L = 2 on 4 stages of 10 layers: middle (10 - 6) / 2 = 2, chunks of 1
  // except the first stage's (2 + 2). Positions 0..3 go down the stages (2, 1, 1, 1), 4..7
  // back up (1, 1, 1, 2): position 4 is stage 3's second chunk.
  const Layout d = L("pp=4,vpp=2,schedule=zb-v,first_stage_layers=4,last_stage_layers=2");
  EXPECT_EQ(Positions(WithLayers(10), d), (std::vector<int64_t>{2, 1, 1, 1, 1, 1, 1, 2}));
  EXPECT_EQ(ChunkOf(WithLayers(10), d, 0, 1).first_layer, 8);
}

TEST(PipelineSplit, EveryValidSplitIsContiguousAndComplete) {
  std::mt19937 rng(15);
  int checked = 0;
  const HardwareSpec hw = testing::TestCluster(64, 8, "300 GB/s", "3 us", "200 Gb/s", "5 us", 8, 8, "8 us");
  for (int i = 0; i < 20000 && checked < 2000; ++i) {
    const ModelSpec m = WithLayers(2 + static_cast<int64_t>(rng() % 70));
    Layout l;
    l.pp = 2 + static_cast<int64_t>(rng() % 15);
    const int schedule = static_cast<int>(rng() % 3);
    l.schedule = schedule == 0 ? Schedule::k1F1B : schedule == 1 ? Schedule::kInterleaved : Schedule::kZeroBubbleV;
    l.vpp = schedule == 0 ? 1 : schedule == 2 ? 2 : 2 + static_cast<int64_t>(rng() % 3);
    if (rng() % 2) {
      l.embedding_in_split = rng() % 2;
      l.loss_in_split = !l.embedding_in_split || rng() % 2;
    } else {
      if (rng() % 3) l.first_stage_layers = 1 + static_cast<int64_t>(rng() % 8);
      if (rng() % 3) l.last_stage_layers = 1 + static_cast<int64_t>(rng() % 8);
    }
    l.dp = 1;
    l.gbs = l.pp * 4;
    if (!CheckLayout(l, m, hw, l.pp).ok()) continue;
    ++checked;
    SCOPED_TRACE(std::to_string(m.layers) + " layers, " + FormatLayout(l));
    // Walk the positions in pipeline order: each starts where the previous ended.
    std::vector<ModelChunk> byposition(static_cast<size_t>(l.pp * l.vpp));
    for (int32_t s = 0; s < l.pp; ++s) {
      int64_t n = 0;
      for (const ModelChunk& c : StageChunks(m, l, s)) {
        byposition[static_cast<size_t>(c.position)] = c;
        n += c.layers;
      }
      ASSERT_EQ(n, StageLayers(m, l, s));
    }
    int64_t next = 0;
    for (const ModelChunk& c : byposition) {
      ASSERT_EQ(c.first_layer, next);
      ASSERT_GE(c.layers, 0);
      next += c.layers;
    }
    ASSERT_EQ(next, m.layers);
  }
  EXPECT_GE(checked, 1000);
}

TEST(PipelineSplit, CheckLayoutStatesTheConstraint) {
  const HardwareSpec hw = testing::TestCluster(64, 8, "300 GB/s", "3 us", "200 Gb/s", "5 us", 8, 8, "8 us");
  const ModelSpec m = WithLayers(126);
  auto errors = [&](const std::string& spec) {
    Layout l = L(spec);
    l.dp = 1;
    l.gbs = l.pp * 8;
    return CheckLayout(l, m, hw, l.pp).ToStatus().message();
  };
  // The even split fails and says which uneven split holds the layers: 126 + 2 = 64 x 2.
  EXPECT_TRUE(testing::Contains(errors("pp=8,vpp=8,schedule=interleaved"),
                  "layers=126 is not divisible by pp x vpp = 8x8 = 64; an uneven split holds them: "
                  "embedding_in_split=on,loss_in_split=on (126 + 2 = 64 x 2)"));
  EXPECT_EQ(errors("pp=8,vpp=8,schedule=interleaved,embedding_in_split=on,loss_in_split=on"), "OK");
  // 126 + 1 = 127 is prime: the loss alone cannot be counted over 8 stages.
  EXPECT_TRUE(testing::Contains(errors("pp=8,loss_in_split=on"),
                  "layers=126 plus the embedding and loss counted in the split = 127 is not divisible by pp x vpp"));
  EXPECT_TRUE(testing::Contains(errors("pp=16,first_stage_layers=7,embedding_in_split=on"), "two ways to split"));
  EXPECT_TRUE(testing::Contains(errors("pp=1,first_stage_layers=7"), "needs pp >= 2, found pp=1"));
  // 126 - 6 - 7 = 113 over 14 stages does not divide.
  EXPECT_TRUE(testing::Contains(errors("pp=16,first_stage_layers=6,last_stage_layers=7"),
                  "the 113 layers left must split evenly over the other 14 stages"));
  EXPECT_TRUE(testing::Contains(errors("pp=16,vpp=2,schedule=interleaved,first_stage_layers=7,last_stage_layers=7"),
                  "vpp=2 must divide every stage's layers"));
  EXPECT_TRUE(testing::Contains(errors("pp=2,first_stage_layers=60,last_stage_layers=60"), "must add up to layers=126 with pp=2"));
  EXPECT_EQ(errors("pp=16,first_stage_layers=7,last_stage_layers=7"), "OK");
}

// A split with an embedding-only and a loss-only chunk (6 layers + 2 over 8 positions: 1
// each, the ends 0) and a first/last split, priced like any layout: the estimate is the
// simulator program's critical path and never above the simulated time; memory agrees.
TEST(PipelineSplit, EstimateIsTheCriticalPathOfTheSimulatedProgram) {
  const HardwareSpec hw = testing::TestCluster(2, 4, "300 GB/s", "3 us", "200 Gb/s", "5 us", 4, 2, "8 us");
  const Cluster cluster(hw);
  const CollectiveModel comm(cluster);
  const ModelSpec m = WithLayers(6);
  for (const char* spec : {"tp=1,pp=2,dp=4,vpp=4,mbs=1,gbs=16,schedule=interleaved,embedding_in_split=on,loss_in_split=on",
                           "tp=2,pp=4,dp=1,mbs=1,gbs=8,zero=1,first_stage_layers=1,last_stage_layers=1,schedule=1f1b",
                           "tp=1,pp=2,dp=4,vpp=2,mbs=1,gbs=16,zero=3,schedule=zb-v,first_stage_layers=4"}) {
    SCOPED_TRACE(spec);
    Layout l = L(spec);
    ASSERT_TRUE(CheckLayout(l, m, hw, 8).ok()) << CheckLayout(l, m, hw, 8).ToStatus().message();
    const Estimate est = EstimateIteration(m, comm, l);
    const IterationProgram program = BuildIteration(m, hw, l);
    const double path = FindCriticalPath(program, cluster, l).length_s;
    EXPECT_NEAR(est.iteration_time_s, path, 1e-9 * path);
    SimOptions so;
    so.collectives = &comm;
    StatusOr<SimResult> sim = Simulate(m, cluster, l, so);
    ASSERT_TRUE(sim.ok()) << sim.status().message();
    EXPECT_LE(est.iteration_time_s, sim->iteration_time_s * (1 + 1e-9));
    EXPECT_NEAR(est.peak_memory().total(), sim->peak_memory_bytes, 1e-9 * sim->peak_memory_bytes);
  }
}

// The head of a Llama-3-style model in layers: 2 V h = 2 x 128,256 x 4,096 = 1.051e9 FLOPs per
// token against a layer's 2 x 218,112,000 (attention 41,943,040 + SwiGLU 176,160,768; norms
// excluded by the 2 h per layer they add: 2 x 8,192 parameters) + 2 x 8,192 x 4,096
// = 0.4699e9: 2.24 layers. The balanced split of 32 layers over 4 stages then takes
// max(F, M, L + 2.24): M = 8 gives 9.24 at best (F 9, L 7; the even 8/8/8/8 10.24); M = 9 leaves 14 for
// the ends, L = 5 or 6 around (14 - 2.24) / 2 = 5.88, both 9; the ends' larger work breaks the
// tie: max(9, 7.24) = 9 against max(8, 8.24) = 8.24, so F = 8, L = 6.
TEST(PipelineSplit, TheBalancedSplitWeighsTheHead) {
  ModelSpec m = testing::TinyModel(8192);
  m.layers = 32;
  m.hidden = 4096;
  m.heads = 32;
  m.kv_heads = 8;
  m.head_dim = 128;
  m.ffn_hidden = 14336;
  m.vocab = 128256;
  const double layer = 2.0 * (4096.0 * 4096 * 2 + 4096.0 * 1024 * 2 + 3.0 * 4096 * 14336 + 2 * 4096) + 2.0 * 8192 * 4096;
  EXPECT_NEAR(planner::HeadInLayers(m), 2.0 * 128256 * 4096 / layer, 1e-9);
  const planner::PipelineSplit s = planner::BalancedSplit(m, 4, 1);
  EXPECT_EQ(s.first_stage_layers, 8);
  EXPECT_EQ(s.last_stage_layers, 6);
  // GPT-3 175B's head is 2 x 50,257 x 12,288 / (2 x 12 x 12,288^2 + 2 x 2,048 x 12,288) =
  // 0.34 layers: over 16 stages the even 6 per stage is balanced already (M = 7 leaves -2).
  const planner::PipelineSplit even = planner::BalancedSplit(testing::GptModel(96, 12288, 96, 50257, 2048), 16, 1);
  EXPECT_EQ(even.first_stage_layers, 0);
  EXPECT_EQ(even.last_stage_layers, 0);
}

// Issue 15's two cases: neither has an even split for the pipeline depth the runs used.
TEST(PipelineSplit, PlansLlama405bWithSixteenStages) {
  StatusOr<ModelSpec> m = LoadModel("llama3-405b");
  ASSERT_TRUE(m.ok());
  const HardwareSpec h = Bundled("dgx-h100", 2048);
  const HardwareSpec* hw = &h;
  const Cluster cluster(*hw, 16384);
  // Meta's layout (Dubey et al. 2024, "The Llama 3 Herd of Models", Sec. 3.3.2 and Table 4:
  // TP 8, CP 1, PP 16, DP 128 at 8K sequences, 16M tokens; the first and last stage one layer
  // short) is expressible and simulated.
  Layout meta = L("tp=8,pp=16,dp=128,mbs=1,gbs=2048,zero=1,sp=on,schedule=1f1b,first_stage_layers=7,last_stage_layers=7");
  ASSERT_TRUE(CheckLayout(meta, *m, *hw, 16384).ok()) << CheckLayout(meta, *m, *hw, 16384).ToStatus().message();
  const CollectiveModel comm(cluster);
  SimOptions so;
  so.collectives = &comm;
  StatusOr<SimResult> sim = Simulate(*m, cluster, meta, so);
  ASSERT_TRUE(sim.ok()) << sim.status().message();
  EXPECT_GT(sim->iteration_time_s, 0);
  // And planned: with pp fixed at 16, the planner finds an uneven split (126 layers).
  planner::PlanOptions o;
  o.gpus = 16384;
  o.global_batch = 2048;
  o.fixed["pp"] = "16";
  o.fixed["tp"] = "8";
  StatusOr<planner::PlanResult> r = planner::Plan(*m, cluster, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_FALSE(r->ranked.empty());
  EXPECT_EQ(r->ranked[0].layout.pp, 16);
  EXPECT_TRUE(r->ranked[0].layout.uneven_split()) << FormatLayout(r->ranked[0].layout);
}

TEST(PipelineSplit, PlansASeventyLayerModelWithTwelveStages) {
  // A BLOOM-176B-sized dense model (70 layers, h 14336, 112 heads, vocabulary 250,880) on
  // 384 A100 with tp 4 and pp 12 (BigScience's layout): 70 = 12 x 5 + 10 has no even split.
  ModelSpec m = testing::GptModel(70, 14336, 112, 250880, 2048);
  m.name = "test-70-layers";
  const HardwareSpec h = Bundled("dgx-a100-80gb", 48);
  const HardwareSpec* hw = &h;
  const Cluster cluster(*hw, 384);
  planner::PlanOptions o;
  o.gpus = 384;
  o.global_batch = 2048;
  o.fixed["pp"] = "12";
  o.fixed["tp"] = "4";
  StatusOr<planner::PlanResult> r = planner::Plan(m, cluster, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_FALSE(r->ranked.empty()) << (r->advice.empty() ? "" : r->advice[0]);
  const Layout& w = r->ranked[0].layout;
  EXPECT_EQ(w.pp, 12);
  EXPECT_TRUE(w.uneven_split()) << FormatLayout(w);
  EXPECT_TRUE(CheckLayout(w, m, *hw, 384).ok());
}

}  // namespace
}  // namespace shardsim
