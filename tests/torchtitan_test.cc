// torchtitan v0.2.2 (pytorch/torchtitan 73a0e6979) as an export target: its llama3 model
// arguments (src/io/torchtitan_model.h), its pipeline split (src/io/torchtitan_pipeline.h), the
// TOML reader (src/io/torchtitan_config.h) and `plan --emit torchtitan` (planner/emit.h), with
// every emitted and read name checked against torchtitan's own sources
// (tests/data/frameworks/torchtitan-73a0e6979.txt, scripts/framework-names.sh).
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "planner/emit.h"
#include "src/hardware/hardware_spec.h"
#include "src/io/toml_reader.h"
#include "src/io/torchtitan_config.h"
#include "src/io/torchtitan_model.h"
#include "src/io/torchtitan_pipeline.h"
#include "src/layout/pipeline.h"

namespace shardsim {
namespace {

ModelSpec Model(const std::string& name) {
  StatusOr<ModelSpec> m = LoadModel(name);
  EXPECT_TRUE(m.ok()) << name;
  return m.ok() ? *m : ModelSpec{};
}

Layout Resolved(const std::string& spec, int64_t gpus) {
  static const HardwareSpec h100 = *LoadHardware("dgx-h100");
  StatusOr<Layout> parsed = ParseLayout(spec);
  EXPECT_TRUE(parsed.ok()) << spec << ": " << parsed.status().message();
  StatusOr<Layout> l = ResolveLayoutFor(parsed.ok() ? *parsed : Layout{}, gpus, h100);
  EXPECT_TRUE(l.ok()) << spec;
  return l.ok() ? *l : Layout{};
}

// The names file: JobConfig keys bare, the rest as "converter=", "flavor=", "TransformerModelArgs.".
std::set<std::string> Names() {
  std::set<std::string> names;
  std::ifstream in(std::string(SHARDSIM_SOURCE_DIR) + "/tests/data/frameworks/torchtitan-73a0e6979.txt");
  EXPECT_TRUE(in.good());
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] != '#') names.insert(line);
  }
  return names;
}

// FeedForward's size for each shipped flavor, against the model cards: int(8 dim / 3) times
// the multiplier, truncated, rounded up to multiple_of.
//   8B:   int(32768 / 3) = 10922; x 1.3 = 14198.6 -> 14198; up to 1024 -> 14336 (Llama 3 paper,
//         Table 3: FFN dimension 14,336);
//   70B:  21845 x 1.3 = 28398.5 -> 28398; up to 4096 -> 28672 (Table 3: 28,672);
//   405B: 43690 x 1.2 = 52428 (52427.99.. in binary) -> up to 4096 -> 53248 (Table 3: 53,248);
//   debugmodel: int(2048 / 3) = 682, no multiplier, up to 256 -> 768.
TEST(TorchtitanModel, ShippedFlavorsBuildTheirModelCards) {
  const auto& f = Llama3Flavors();
  EXPECT_EQ(Llama3FfnHidden(f.at("8B")), 14336);
  EXPECT_EQ(Llama3FfnHidden(f.at("70B")), 28672);
  EXPECT_EQ(Llama3FfnHidden(f.at("405B")), 53248);
  EXPECT_EQ(Llama3FfnHidden(f.at("debugmodel")), 768);
  // The bundled Llama 3 models are those flavors.
  EXPECT_EQ(Llama3FlavorOf(Model("llama3-8b")), "8B");
  EXPECT_EQ(Llama3FlavorOf(Model("llama3-70b")), "70B");
  EXPECT_EQ(Llama3FlavorOf(Model("llama3-405b")), "405B");
  EXPECT_FALSE(Llama3FlavorOf(Model("llama2-70b")));  // vocab 32000, rope_theta 10000
}

// Llama 2's FFN sizes from the arguments Meta's own params.json states: 7B multiple_of 256 alone
// (round_up(10922, 256) = 11008); 70B ffn_dim_multiplier 1.3 with multiple_of 4096 (28672, as
// the 70B flavor above).
TEST(TorchtitanModel, ArgumentsForAModelTorchtitanDoesNotShip) {
  StatusOr<Llama3Args> a7 = Llama3ArgsFor(Model("llama2-7b"));
  ASSERT_TRUE(a7.ok()) << a7.status().message();
  EXPECT_EQ(a7->multiple_of, 256);
  EXPECT_FALSE(a7->ffn_dim_multiplier);
  EXPECT_EQ(Llama3Registration("llama2-7b", *a7),
            "\"llama2-7b\": TransformerModelArgs(dim=4096, n_layers=32, n_heads=32, n_kv_heads=32, "
            "vocab_size=32000, multiple_of=256, rope_theta=10000),");
  StatusOr<Llama3Args> a70 = Llama3ArgsFor(Model("llama2-70b"));
  ASSERT_TRUE(a70.ok());
  EXPECT_EQ(a70->multiple_of, 4096);
  ASSERT_TRUE(a70->ffn_dim_multiplier);
  EXPECT_EQ(*a70->ffn_dim_multiplier, 1.3);
  // The line reads back as the same arguments.
  StatusOr<std::pair<std::string, Llama3Args>> back = ParseLlama3Registration(Llama3Registration("x", *a70));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->first, "x");
  EXPECT_TRUE(Llama3Mismatches(Llama3Model("x", *a70, 4096), Llama3Model("x", back->second, 4096)).empty());
  EXPECT_EQ(Llama3FfnHidden(back->second), 28672);
}

TEST(TorchtitanModel, SaysWhyAModelIsNotLlama3) {
  const std::string gpt = Llama3ArgsFor(Model("gpt3-175b")).status().message();
  for (const char* why : {"LayerNorm", "GELU", "learned positions", "biases", "tied embeddings"}) {
    EXPECT_NE(gpt.find(why), std::string::npos) << gpt;
  }
  EXPECT_NE(Llama3ArgsFor(Model("mixtral-8x7b")).status().message().find("experts"), std::string::npos);
  EXPECT_NE(Llama3ArgsFor(Model("llama3.2-1b")).status().message().find("tied embeddings"), std::string::npos);
  StatusOr<std::pair<std::string, Llama3Args>> bad = ParseLlama3Registration("\"m\": TransformerModelArgs(dim=64, n_layer=2)");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("did you mean 'n_layers'"), std::string::npos) << bad.status().message();
  EXPECT_FALSE(ParseLlama3Registration("\"m\": TransformerModelArgs(dim=64.5)").ok());
}

// generate_llm_fqn_per_model_part: E = layers + first + last effective layers, E / S each, the
// first E % S stages one more, the first stage `first` fewer real blocks, the last `last`.
// (Each case also what torchtitan's function returns when run.)
TEST(TorchtitanPipeline, StageBlocksAsTorchtitanSplits) {
  using V = std::vector<int64_t>;
  // 32 layers, 4 stages, 1/1: E = 34, 8 each, 2 extra: 9-1, 9, 8, 8-1.
  EXPECT_EQ(*TorchtitanStageBlocks(4, 32, 1, 1), (V{8, 9, 8, 7}));
  // 32 layers, 8 stages, 1/1: E = 34, 4 each, 2 extra: 5-1, 5, 4, 4, 4, 4, 4, 4-1.
  EXPECT_EQ(*TorchtitanStageBlocks(8, 32, 1, 1), (V{4, 5, 4, 4, 4, 4, 4, 3}));
  EXPECT_EQ(*TorchtitanStageBlocks(8, 32, 0, 0), (V(8, 4)));
  // Llama 3 405B on 16 stages: E = 128, 8 each: 7, 8 x 14, 7 (Meta's split, Llama 3 paper 3.3.2).
  V l405(16, 8);
  l405.front() = l405.back() = 7;
  EXPECT_EQ(*TorchtitanStageBlocks(16, 126, 1, 1), l405);
  EXPECT_FALSE(TorchtitanStageBlocks(40, 32, 1, 1).ok());  // 40 stages > E = 34
  EXPECT_FALSE(TorchtitanStageBlocks(6, 6, 2, 2).ok());    // E = 10: 1 per stage, weight 2 above it
}

TEST(TorchtitanPipeline, StageCountFromTheScheduleAndLayersPerStage) {
  TorchtitanSplit s;  // 1/1
  EXPECT_EQ(*TorchtitanStageCount(4, true, s, 32), 8);   // multi-stage default: 2 per rank
  EXPECT_EQ(*TorchtitanStageCount(4, false, s, 32), 4);  // single-stage: 1 per rank
  s.layers_per_stage = 9;                                  // ceil(34 / 9) = 4
  EXPECT_EQ(*TorchtitanStageCount(4, false, s, 32), 4);
  EXPECT_FALSE(TorchtitanStageCount(4, true, s, 32).ok());  // 1 per rank for a multi-stage schedule
  s.layers_per_stage = 5;                                   // ceil(34 / 5) = 7, not a multiple of 4
  EXPECT_FALSE(TorchtitanStageCount(4, false, s, 32).ok());
}

TEST(TorchtitanPipeline, SettingsThatPlaceALayoutsSplit) {
  // Megatron-Core's accounting of the embedding and the loss is torchtitan's default 1/1.
  StatusOr<TorchtitanSplit> s = TorchtitanSplitFor(Model("llama3-405b"),
                                                   Resolved("tp=8,pp=16,embedding_in_split=on,loss_in_split=on", 2048));
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->first_less, 1);
  EXPECT_EQ(s->last_less, 1);
  EXPECT_FALSE(s->layers_per_stage);
  // An even interleaved split, 4 chunks per rank: 0/0, and 80 / 16 = 5 layers per stage.
  s = TorchtitanSplitFor(Model("llama2-70b"), Resolved("tp=4,pp=4,vpp=4,schedule=interleaved", 128));
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->first_less, 0);
  EXPECT_EQ(s->last_less, 0);
  EXPECT_EQ(s->layers_per_stage, 5);
  // First/last stage layers 19/19 of 80 on 4 stages: 19, 21, 21, 19. The first pair found
  // (1/1 gives 20, 21, 20, 19): 2/1, E = 83, 20 each, the first three one more: 21 - 2, 21, 21,
  // 20 - 1. (2/2 places them so too.)
  s = TorchtitanSplitFor(Model("llama3-70b"), Resolved("tp=8,pp=4,first_stage_layers=19,last_stage_layers=19", 64));
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->first_less, 2);
  EXPECT_EQ(s->last_less, 1);
  // The same with two chunks per rank puts 9 layers on every chunk of the end ranks, which
  // torchtitan's split (only the first and last virtual stage lighter) cannot.
  EXPECT_FALSE(TorchtitanSplitFor(Model("llama3-70b"),
                                  Resolved("tp=8,pp=4,vpp=2,schedule=interleaved,first_stage_layers=18,last_stage_layers=18", 64))
                   .ok());
}

// A config written by hand, as torchtitan's own train_configs are: what it leaves out takes
// torchtitan's defaults.
TEST(TorchtitanConfig, ReadsAHandWrittenConfigWithTorchtitansDefaults) {
  const std::string text =
      "[model]\nname = \"llama3\"\nflavor = \"70B\"\n"
      "[optimizer]\nlr = 1.5e-4\n"
      "[training]\nlocal_batch_size = 8\nseq_len = 8192\n"
      "[parallelism]\ndata_parallel_shard_degree = -1\ntensor_parallel_degree = 8\n"
      "[activation_checkpoint]\nmode = \"full\"\n";
  StatusOr<TorchtitanRead> r = ParseTorchtitanToml(text, "70b.toml");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->model.layers, 80);
  EXPECT_EQ(r->model.ffn_hidden, 28672);
  EXPECT_EQ(r->model.seq_len, 8192);
  const Layout& l = r->layout;
  // FSDP over the ranks left (-1: dp derived), resharding after the forward without pp: ZeRO-3;
  // TP always with SP; local_batch_size is the micro-batch; no global batch: 0 until dp is known.
  EXPECT_EQ(l.tp, 8);
  EXPECT_TRUE(l.sp);
  EXPECT_EQ(l.dp, 0);
  EXPECT_EQ(l.zero, 3);
  EXPECT_EQ(l.mbs, 8);
  EXPECT_EQ(l.gbs, 0);
  EXPECT_EQ(l.recompute, Recompute::kFull);
  EXPECT_EQ(l.dtype, DType::kBf16);  // FSDP's mixed_precision_param default
  EXPECT_EQ(l.overlap_tp, TpOverlap::kOff);
  EXPECT_EQ(r->ignored, std::vector<std::string>{"optimizer.lr"});
}

TEST(TorchtitanConfig, PipelineSplitBatchAndResharding) {
  // 405B on 16 stages of 8-way TP and 8-way FSDP: the data-parallel rank's 256 sequences are one
  // schedule of 256 micro-batches; E = 128 over 16 stages is Megatron-Core's accounting.
  const std::string text =
      "[model]\nflavor = \"405B\"\n[training]\nlocal_batch_size = 256\nglobal_batch_size = 2048\nseq_len = 8192\n"
      "[parallelism]\ndata_parallel_shard_degree = 8\ntensor_parallel_degree = 8\npipeline_parallel_degree = 16\n"
      "[activation_checkpoint]\nmode = \"none\"\n";
  StatusOr<TorchtitanRead> r = ParseTorchtitanToml(text, "405b.toml");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const Layout& l = r->layout;
  EXPECT_EQ(l.pp, 16);
  EXPECT_EQ(l.vpp, 1);
  EXPECT_EQ(l.schedule, Schedule::k1F1B);
  EXPECT_TRUE(l.embedding_in_split && l.loss_in_split);
  // "default" keeps the parameters gathered with pp, and the pipeline reduces once a step.
  EXPECT_EQ(l.zero, 1);
  EXPECT_EQ(l.dp, 8);
  EXPECT_EQ(l.mbs, 1);
  EXPECT_EQ(l.gbs, 2048);
  EXPECT_TRUE(l.overlap_pp);
}

TEST(TorchtitanConfig, ErrorsAreLocatedAndSayWhy) {
  const std::string head = "[model]\nflavor = \"8B\"\n[activation_checkpoint]\nmode = \"none\"\n[parallelism]\n";
  struct Case {
    std::string body, want;
  };
  const Case cases[] = {
      {"tensor_paralel_degree = 2\n", "c.toml:6:1: parallelism.tensor_paralel_degree is not a key of torchtitan v0.2.2's job config"},
      {"tensor_paralel_degree = 2\n", "did you mean 'parallelism.tensor_parallel_degree'"},
      {"tensor_parallel_degree = \"2\"\n", "c.toml:6:26: parallelism.tensor_parallel_degree: expected an integer, found a string"},
      {"data_parallel_replicate_degree = 2\ndata_parallel_shard_degree = 4\n", "HSDP"},
      {"data_parallel_replicate_degree = 8\ndata_parallel_shard_degree = 1\ntensor_parallel_degree = 2\n", "DDP has not supported"},
      {"tensor_parallel_degree = 2\nenable_async_tensor_parallel = true\n", "needs compile.enable"},
      {"pipeline_parallel_degree = 2\npipeline_parallel_schedule = \"InterleavedZeroBubble\"\n", "not one shardsim models"},
      {"pipeline_parallel_degree = 2\npipeline_parallel_schedule = \"1F1C\"\n", "did you mean '1F1B'"},
      {"data_parallel_shard_degree = 8\npipeline_parallel_degree = 2\n[training]\nlocal_batch_size = 8\nglobal_batch_size = 1024\n",
       "16 pipeline schedules per step"},
      {"tensor_parallel_degree = 3\n[training]\nseq_len = 8192\n", "8192 is not a multiple of 2 x tp x cp = 6"},
      {"[model]\nconverters = [\"float8\"]\n", "table [model] defined twice"},
  };
  for (const Case& c : cases) {
    StatusOr<TorchtitanRead> r = ParseTorchtitanToml(head + c.body, "c.toml");
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_NE(r.status().message().find(c.want), std::string::npos) << c.body << " -> " << r.status().message();
  }
  StatusOr<TorchtitanRead> f8 = ParseTorchtitanToml("[model]\nflavor = \"8B\"\nconverters = [\"float8\"]\n", "f.toml");
  EXPECT_NE(f8.status().message().find("'float8' is not modelled (nor registered"), std::string::npos) << f8.status().message();
  // torchtitan's own default checkpointing, "selective" every 2nd block, is none shardsim models.
  StatusOr<TorchtitanRead> sel = ParseTorchtitanToml("[model]\nflavor = \"8B\"\n", "s.toml");
  EXPECT_NE(sel.status().message().find("s.toml: activation_checkpoint: selective_ac_option \"2\" checkpoints one block in 2"),
            std::string::npos) << sel.status().message();
  StatusOr<TorchtitanRead> mb = ParseTorchtitanToml("[model]\nflavor = \"8B\"\n[activation_checkpoint]\nmode = \"memory_budget\"\n", "m.toml");
  EXPECT_NE(mb.status().message().find("m.toml:4:8: activation_checkpoint.mode \"memory_budget\""), std::string::npos) << mb.status().message();
  StatusOr<TorchtitanRead> flav = ParseTorchtitanToml("[model]\nflavor = \"8b\"\n", "v.toml");
  EXPECT_NE(flav.status().message().find("did you mean '8B'"), std::string::npos) << flav.status().message();
}

// torchao's float8 as shardsim prices it: tensorwise (recipe unset or "tensorwise"), the output
// layer alone left in bf16 (or nothing); rowwise scaling, other linears in bf16 and emulation are
// refused where they stand, not priced as tensorwise.
TEST(TorchtitanConfig, Float8IsTensorwiseWithTheOutputInBf16) {
  const std::string head = "[model]\nflavor = \"8B\"\nconverters = [\"quantize.linear.float8\"]\n"
                           "[activation_checkpoint]\nmode = \"none\"\n[compile]\nenable = true\n"
                           "[quantize.linear.float8]\n";
  for (const std::string& body : {std::string(""), std::string("recipe_name = \"tensorwise\"\nfilter_fqns = [\"output\"]\n"),
                                  std::string("filter_fqns = []\n")}) {
    StatusOr<TorchtitanRead> r = ParseTorchtitanToml(head + body, "f.toml");
    ASSERT_TRUE(r.ok()) << body << ": " << r.status().message();
    EXPECT_EQ(r->layout.dtype, DType::kFp8) << body;
  }
  for (const auto& [body, want] : std::vector<std::pair<std::string, std::string>>{
           {"recipe_name = \"rowwise\"\n", "f.toml:9:15: quantize.linear.float8.recipe_name \"rowwise\": rowwise float8 scaling is not modelled"},
           {"filter_fqns = [\"output\", \"attention.wq\"]\n", "'attention.wq' left in bf16 is not modelled"},
           {"emulate = true\n", "emulated float8 GEMMs are not modelled"}}) {
    StatusOr<TorchtitanRead> r = ParseTorchtitanToml(head + body, "f.toml");
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_NE(r.status().message().find(want), std::string::npos) << body << " -> " << r.status().message();
  }
  // Context parallelism: torch's all-gather (or all-to-all) rotation of the key/value shards,
  // read with a warning that it is priced as the ring's exchange.
  StatusOr<TorchtitanRead> cp = ParseTorchtitanToml(
      "[model]\nflavor = \"8B\"\n[activation_checkpoint]\nmode = \"none\"\n"
      "[parallelism]\ncontext_parallel_degree = 2\n",
      "c.toml");
  ASSERT_TRUE(cp.ok()) << cp.status().message();
  EXPECT_EQ(cp->layout.cp, 2);
  std::string warnings;
  for (const std::string& w : cp->warnings) warnings += w + "\n";
  EXPECT_NE(warnings.find("context_parallel_rotate_method \"allgather\": priced as a ring's exchange"), std::string::npos)
      << warnings;
  // Without the float8 converter the section applies to nothing: read, bf16.
  StatusOr<TorchtitanRead> off = ParseTorchtitanToml(
      "[model]\nflavor = \"8B\"\n[activation_checkpoint]\nmode = \"none\"\n"
      "[quantize.linear.float8]\nrecipe_name = \"rowwise\"\n",
      "o.toml");
  ASSERT_TRUE(off.ok()) << off.status().message();
  EXPECT_EQ(off->layout.dtype, DType::kBf16);
}

// Every layout torchtitan runs comes back from its emitted config as planned (model included);
// the other layouts are refused with the reason.
TEST(TorchtitanEmit, EveryRunnableLayoutReadsBackAsPlanned) {
  // torchtitan's defaults beside each spec: no live-parameter limit, and compiled (the emitter
  // turns compile.enable on for any kernels but eager; kernels=fused it never runs).
  const char* kLive = ",live_params=1000000000000,kernels=compiled";
  struct Case {
    std::string model, spec;
    int64_t gpus;
  };
  const Case cases[] = {
      {"llama3-405b", "tp=8,pp=16,mbs=1,gbs=2048,zero=1,sp=on,overlap_tp=on,overlap_pp=on,embedding_in_split=on,loss_in_split=on", 2048},
      {"llama2-70b", "tp=4,pp=4,vpp=4,schedule=interleaved,mbs=2,gbs=1024,zero=1,sp=on,dtype=fp8,overlap_pp=on", 128},
      {"llama3-8b", "pp=4,vpp=2,schedule=zb-v,mbs=1,gbs=64,zero=1,overlap_pp=on", 8},
      {"llama3-8b", "cp=2,mbs=1,gbs=64,zero=3,offload=optimizer+params,recompute=full", 8},
      {"llama3-8b", "mbs=2,gbs=64,zero=0", 8},                       // DDP
      {"llama3-8b", "tp=8,mbs=1,gbs=8,sp=on,dtype=fp32", 8},          // TP alone: no mixed precision
      {"llama3-70b", "tp=8,pp=4,mbs=1,gbs=64,zero=1,sp=on,overlap_pp=on,first_stage_layers=19,last_stage_layers=19", 64},
      {"llama3-8b", "mbs=1,gbs=64,zero=2", 8},                       // FSDP kept gathered
      {"llama2-7b", "tp=2,mbs=4,gbs=256,zero=3,sp=on,overlap_tp=on,recompute=op", 16},
  };
  for (const Case& c : cases) {
    const ModelSpec m = Model(c.model);
    const Layout planned = Resolved(c.spec + kLive, c.gpus);
    StatusOr<std::string> toml = planner::EmitTorchtitan(m, planned);
    ASSERT_TRUE(toml.ok()) << c.spec << ": " << toml.status().message();
    StatusOr<TorchtitanRead> r = ParseTorchtitanToml(*toml, "emitted.toml");
    ASSERT_TRUE(r.ok()) << c.spec << ": " << r.status().message() << "\n" << *toml;
    EXPECT_TRUE(Llama3Mismatches(m, r->model).empty()) << c.spec;
    const Layout back = Resolved(FormatLayout(r->layout), c.gpus);
    EXPECT_EQ(FormatLayout(back), FormatLayout(planned)) << *toml;
  }
  const ModelSpec m8 = Model("llama3-8b");
  for (const auto& [spec, why] : std::vector<std::pair<std::string, std::string>>{
           {"tp=2,mbs=1,gbs=8,zero=0,sp=on", "DDP with tp or pp"},
           {"mbs=1,gbs=8,zero=2,attention=unfused", "attention=unfused"},
           {"pp=2,mbs=1,gbs=8,zero=2,schedule=zero-bubble,overlap_pp=on", "schedule=zero-bubble"},
           {"tp=2,mbs=1,gbs=8,zero=2,sp=off", "sp=off"},
           {"mbs=1,gbs=8,zero=3", "live-parameter limit"},
           {"mbs=1,gbs=8,zero=1", "zero=1 without pp"},
           {"pp=2,mbs=1,gbs=16,zero=2,overlap_pp=on", "zero=2 with pp"},
           {"mbs=1,gbs=8,zero=2,recompute=selective", "recompute=selective (torchtitan recomputes no attention core"}}) {
    StatusOr<std::string> t = planner::EmitTorchtitan(m8, Resolved(spec, 8));
    ASSERT_FALSE(t.ok()) << spec;
    EXPECT_NE(t.status().message().find(why), std::string::npos) << t.status().message();
  }
  EXPECT_FALSE(planner::EmitTorchtitan(Model("gpt3-175b"), Resolved("tp=8,mbs=1,gbs=8,sp=on", 8)).ok());
}

// compile.components as the kernels say: none (eager), the model and the loss (compiled), the
// model alone (compiled-model) or the loss alone (compiled-loss); each reads back as written.
TEST(TorchtitanEmit, CompileComponentsFollowTheKernels) {
  const ModelSpec m = Model("llama3-8b");
  for (const auto& [kernels, components] : std::vector<std::pair<std::string, std::string>>{
           {"eager", ""},
           {"compiled", "components = [\"model\", \"loss\"]"},
           {"compiled-model", "components = [\"model\"]"},
           {"compiled-loss", "components = [\"loss\"]"}}) {
    const Layout planned = Resolved("mbs=1,gbs=64,zero=2,live_params=1000000000000,kernels=" + kernels, 8);
    StatusOr<std::string> toml = planner::EmitTorchtitan(m, planned);
    ASSERT_TRUE(toml.ok()) << kernels << ": " << toml.status().message();
    if (components.empty()) {
      EXPECT_NE(toml->find("enable = false"), std::string::npos) << *toml;
      EXPECT_EQ(toml->find("components"), std::string::npos) << *toml;
    } else {
      EXPECT_NE(toml->find(components), std::string::npos) << *toml;
    }
    StatusOr<TorchtitanRead> r = ParseTorchtitanToml(*toml, "emitted.toml");
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(KernelsName(r->layout.kernels), kernels);
  }
}

// Every key the emitter writes and the reader reads is a JobConfig field at 73a0e6979; the
// reader's list of JobConfig is exactly the source's; the flavors, converters and model
// arguments used are torchtitan's.
TEST(TorchtitanNames, EveryNameIsInTorchtitansSources) {
  const std::set<std::string> names = Names();
  std::set<std::string> keys;
  for (const std::string& n : names) {
    if (n.find('=') == std::string::npos && n.rfind("TransformerModelArgs.", 0) != 0) keys.insert(n);
  }
  EXPECT_GT(keys.size(), 140u);  // 149 fields at that commit
  EXPECT_EQ(std::set<std::string>(TorchtitanJobConfigKeys().begin(), TorchtitanJobConfigKeys().end()), keys);
  for (const std::string& k : TorchtitanKeysRead()) EXPECT_TRUE(keys.count(k)) << k;
  for (const auto& [flavor, args] : Llama3Flavors()) EXPECT_TRUE(names.count("flavor=llama3/" + flavor)) << flavor;
  EXPECT_TRUE(names.count("converter=quantize.linear.float8"));
  for (const char* f : {"dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "multiple_of", "ffn_dim_multiplier", "rope_theta"}) {
    EXPECT_TRUE(names.count(std::string("TransformerModelArgs.") + f)) << f;
  }
  // The keys of configs with every optional setting: fp8, async TP, pp with a layers-per-stage
  // setting; offload, selective checkpointing.
  for (const char* spec : {"tp=2,pp=2,vpp=4,schedule=interleaved,mbs=1,gbs=64,zero=1,sp=on,dtype=fp8,overlap_tp=on,overlap_pp=on",
                           "mbs=1,gbs=64,zero=3,offload=optimizer+params,recompute=op"}) {
    const Layout l = Resolved(std::string(spec) + ",live_params=1000000000000", 16);
    StatusOr<std::string> toml = planner::EmitTorchtitan(Model("llama3-8b"), l);
    ASSERT_TRUE(toml.ok()) << toml.status().message();
    StatusOr<std::vector<TomlEntry>> entries = ParseToml(*toml, "emitted.toml");
    ASSERT_TRUE(entries.ok());
    EXPECT_GT(entries->size(), 14u);
    for (const TomlEntry& e : *entries) EXPECT_TRUE(keys.count(e.path)) << e.path;
  }
}

}  // namespace
}  // namespace shardsim
