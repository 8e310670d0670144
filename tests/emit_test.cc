// Tests of the framework emitters (planner/emit.h): the Megatron-LM arguments and the
// DeepSpeed config for known layouts, and that every option or key emitted is one the
// framework defines (lists below, checked against the frameworks' own files).
#include "planner/emit.h"
#include "src/io/megatron_args.h"
#include "src/io/nemo_overrides.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "src/hardware/hardware_spec.h"
#include "src/layout/layout.h"
#include "src/model/model_spec.h"
#include "tests/contains.h"
#include "tests/json_syntax.h"

namespace shardsim::planner {
namespace {

using testing::Contains;
using testing::IsStrictJson;

// Megatron-LM options the emitter may use, with the values each accepts. Checked against
// NVIDIA/Megatron-LM megatron/training/arguments.py (commit 000c4ac24f61): every name is an
// add_argument there, and the choices are its `choices=` lists (only those emitted).
// kFreq: --moe-layer-freq's integer or quoted Python list expression (moe_freq_type).
enum class Kind { kSwitch, kInt, kFloat, kChoice, kFreq };
struct MegatronOption {
  Kind kind;
  std::set<std::string> choices;  // for kChoice
};
const std::map<std::string, MegatronOption>& KnownMegatronOptions() {
  static const auto* kOptions = new std::map<std::string, MegatronOption>{
      // _add_network_size_args
      {"--num-layers", {Kind::kInt, {}}},
      {"--hidden-size", {Kind::kInt, {}}},
      {"--num-attention-heads", {Kind::kInt, {}}},
      {"--kv-channels", {Kind::kInt, {}}},
      {"--group-query-attention", {Kind::kSwitch, {}}},
      {"--num-query-groups", {Kind::kInt, {}}},
      {"--ffn-hidden-size", {Kind::kInt, {}}},
      {"--max-position-embeddings", {Kind::kInt, {}}},
      {"--position-embedding-type", {Kind::kChoice, {"learned_absolute", "rope"}}},
      {"--normalization", {Kind::kChoice, {"LayerNorm", "RMSNorm"}}},
      {"--swiglu", {Kind::kSwitch, {}}},
      {"--untie-embeddings-and-output-weights", {Kind::kSwitch, {}}},
      {"--attention-backend", {Kind::kChoice, {"flash", "fused", "unfused", "local", "auto"}}},
      // _add_data_args
      {"--seq-length", {Kind::kInt, {}}},
      // _add_regularization_args
      {"--attention-dropout", {Kind::kFloat, {}}},
      {"--hidden-dropout", {Kind::kFloat, {}}},
      // _add_training_args
      {"--micro-batch-size", {Kind::kInt, {}}},
      {"--global-batch-size", {Kind::kInt, {}}},
      {"--recompute-activations", {Kind::kSwitch, {}}},
      {"--recompute-granularity", {Kind::kChoice, {"full", "selective"}}},
      {"--recompute-method", {Kind::kChoice, {"uniform", "block"}}},
      {"--recompute-num-layers", {Kind::kInt, {}}},
      {"--tp-comm-overlap", {Kind::kSwitch, {}}},
      {"--cuda-graph-impl", {Kind::kChoice, {"none", "local", "transformer_engine", "full_iteration"}}},
      {"--no-check-for-nan-in-loss-and-grad", {Kind::kSwitch, {}}},
      {"--use-flash-attn", {Kind::kSwitch, {}}},
      {"--disable-bias-linear", {Kind::kSwitch, {}}},
      {"--add-qkv-bias", {Kind::kSwitch, {}}},
      {"--rotary-base", {Kind::kInt, {}}},
      {"--qk-layernorm", {Kind::kSwitch, {}}},
      // _add_mla_args
      {"--multi-latent-attention", {Kind::kSwitch, {}}},
      {"--q-lora-rank", {Kind::kInt, {}}},
      {"--kv-lora-rank", {Kind::kInt, {}}},
      {"--qk-head-dim", {Kind::kInt, {}}},
      {"--qk-pos-emb-head-dim", {Kind::kInt, {}}},
      {"--v-head-dim", {Kind::kInt, {}}},
      // _add_mtp_args
      {"--mtp-num-layers", {Kind::kInt, {}}},
      {"--fp8-param-gather", {Kind::kSwitch, {}}},
      {"--optimizer-cpu-offload", {Kind::kSwitch, {}}},
      {"--sequence-parallel", {Kind::kSwitch, {}}},
      // _add_mixed_precision_args, _add_transformer_engine_args
      {"--fp16", {Kind::kSwitch, {}}},
      {"--bf16", {Kind::kSwitch, {}}},
      {"--fp8-format", {Kind::kChoice, {"e4m3", "hybrid"}}},
      // _add_distributed_args
      {"--tensor-model-parallel-size", {Kind::kInt, {}}},
      {"--pipeline-model-parallel-size", {Kind::kInt, {}}},
      {"--num-layers-per-virtual-pipeline-stage", {Kind::kInt, {}}},
      // Uneven splits: _add_distributed_args (decoder-first/last-pipeline-num-layers,
      // num-virtual-stages-per-pipeline-rank) and TransformerConfig's account_for_* fields,
      // megatron/training/arguments.py at NVIDIA/Megatron-LM d98e8a64dd.
      {"--decoder-first-pipeline-num-layers", {Kind::kInt, {}}},
      {"--decoder-last-pipeline-num-layers", {Kind::kInt, {}}},
      {"--num-virtual-stages-per-pipeline-rank", {Kind::kInt, {}}},
      {"--account-for-embedding-in-pipeline-split", {Kind::kSwitch, {}}},
      {"--account-for-loss-in-pipeline-split", {Kind::kSwitch, {}}},
      {"--no-overlap-p2p-communication", {Kind::kSwitch, {}}},
      {"--overlap-grad-reduce", {Kind::kSwitch, {}}},
      {"--overlap-param-gather", {Kind::kSwitch, {}}},
      {"--use-distributed-optimizer", {Kind::kSwitch, {}}},
      {"--context-parallel-size", {Kind::kInt, {}}},
      // _add_moe_args
      {"--expert-model-parallel-size", {Kind::kInt, {}}},
      {"--moe-token-dispatcher-type", {Kind::kChoice, {"allgather", "alltoall", "flex"}}},
      {"--moe-grouped-gemm", {Kind::kSwitch, {}}},
      {"--num-experts", {Kind::kInt, {}}},
      {"--moe-ffn-hidden-size", {Kind::kInt, {}}},
      {"--moe-layer-freq", {Kind::kFreq, {}}},
      {"--moe-shared-expert-intermediate-size", {Kind::kInt, {}}},
      {"--moe-expert-capacity-factor", {Kind::kFloat, {}}},
      {"--moe-router-topk", {Kind::kInt, {}}},
      // _add_experimental_args
      {"--use-precision-aware-optimizer", {Kind::kSwitch, {}}},
  };
  return *kOptions;
}

// DeepSpeed config keys the emitter may use, as dotted paths. Checked against
// deepspeedai/DeepSpeed docs/_pages/config-json.md and deepspeed/runtime/zero/config.py;
// "_shardsim_notes" is ours (emit.h).
const std::set<std::string>& KnownDeepSpeedKeys() {
  static const auto* kKeys = new std::set<std::string>{
      "train_batch_size",
      "train_micro_batch_size_per_gpu",
      "gradient_accumulation_steps",
      "gradient_clipping",
      "zero_optimization",
      "zero_optimization.stage",
      "zero_optimization.overlap_comm",
      "zero_optimization.contiguous_gradients",
      "zero_optimization.offload_optimizer",
      "zero_optimization.offload_optimizer.device",
      "zero_optimization.offload_param",
      "zero_optimization.offload_param.device",
      "zero_optimization.stage3_prefetch_bucket_size",
      "zero_optimization.stage3_max_live_parameters",  // DeepSpeedZeroConfig, default 1e9
      "zero_optimization.reduce_bucket_size",          // DeepSpeedZeroConfig, default 5e8
      "bf16",
      "bf16.enabled",
      "fp16",
      "fp16.enabled",
      "activation_checkpointing",
      "activation_checkpointing.partition_activations",
      "_shardsim_notes",
  };
  return *kKeys;
}

// The names as the frameworks' own sources define them, extracted at the commits named in
// the files by scripts/framework-names.sh: every option and key above is there.
std::set<std::string> NamesIn(const std::string& file) {
  std::set<std::string> names;
  std::ifstream in(std::string(SHARDSIM_SOURCE_DIR) + "/tests/data/frameworks/" + file);
  EXPECT_TRUE(in.good()) << file;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] != '#') names.insert(line);
  }
  return names;
}

TEST(EmitNames, EveryMegatronOptionIsInArgumentsPy) {
  const std::set<std::string> names = NamesIn("megatron-lm-000c4ac24f61.txt");
  EXPECT_GT(names.size(), 500u);  // 572 add_argument calls at that commit
  for (const auto& [name, option] : KnownMegatronOptions()) {
    EXPECT_TRUE(names.count(name)) << name << " is not an argument of megatron/training/arguments.py at 000c4ac24f61";
  }
  // And every argument the reader takes (src/io/megatron_args.h), at that commit or at
  // d98e8a64dd (its 2026 CUDA graph spelling, --cuda-graph-modules).
  const std::set<std::string> newer = NamesIn("megatron-lm-d98e8a64dd.txt");
  EXPECT_GT(newer.size(), 300u);  // 384 add_argument calls at that commit
  for (const std::string& name : MegatronArgumentNames()) {
    EXPECT_TRUE(names.count(name) || newer.count(name)) << name << " (read by ParseMegatronArgs) is not in arguments.py";
  }
}

TEST(EmitNames, EveryDeepSpeedKeyIsInItsSources) {
  const std::set<std::string> names = NamesIn("deepspeed-edaa72212.txt");
  for (const std::string& key : KnownDeepSpeedKeys()) {
    if (key == "_shardsim_notes") continue;  // ours (emit.h)
    EXPECT_TRUE(names.count(key)) << key << " is not a DeepSpeed config key at edaa72212";
  }
}

// Every NeMo recipe path the emitter writes or the reader reads is a field or an argument of
// NeMo's and Megatron-Core's own classes at the commits of tests/data/frameworks/nemo-*.txt.
TEST(EmitNames, EveryNemoPathIsInItsSources) {
  const std::set<std::string> names = NamesIn("nemo-8cfedd7203.txt");
  EXPECT_GT(names.size(), 300u);
  for (const std::string& p : NemoPathsRead()) EXPECT_TRUE(names.count(p)) << p;
}

// Resolved for an A100 cluster (bf16 by default). On a bad spec the failure is recorded and
// a one-GPU layout returned, so the emitters (which CHECK for a resolved layout) still run.
Layout Resolve(const std::string& spec, int64_t gpus) {
  static const HardwareSpec a100 = *LoadHardware("dgx-a100-80gb");
  Layout one_gpu;
  one_gpu.dp = 1;
  one_gpu.gbs = 1;
  StatusOr<Layout> parsed = ParseLayout(spec);
  EXPECT_TRUE(parsed.ok()) << spec << ": " << parsed.status().message();
  if (!parsed.ok()) return one_gpu;
  StatusOr<Layout> l = ResolveLayoutFor(*parsed, gpus, a100);
  EXPECT_TRUE(l.ok()) << spec << ": " << l.status().message();
  return l.ok() ? *l : one_gpu;
}

ModelSpec Model(const std::string& name) {
  StatusOr<ModelSpec> m = LoadModel(name);
  EXPECT_TRUE(m.ok()) << name << ": " << m.status().message();
  return m.ok() ? *m : ModelSpec{};
}

// The argument lines of EmitMegatron, without the continuation " \": "--name" or
// "--name value". Every line but the last continues; the last does not, so the block pastes
// as the tail of a command.
std::vector<std::string> ArgumentLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] != '#') lines.push_back(line);
  }
  std::vector<std::string> args;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    const bool continued = line.size() > 2 && line.substr(line.size() - 2) == " \\";
    EXPECT_EQ(continued, i + 1 < lines.size()) << "line " << i << ": '" << line << "'";
    args.push_back(continued ? line.substr(0, line.size() - 2) : line);
  }
  return args;
}

std::vector<std::string> CommentLines(const std::string& text) {
  std::vector<std::string> comments;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] == '#') comments.push_back(line);
  }
  return comments;
}

// Every argument line names a known option with a value of the kind it takes, and comment
// lines all come before the first argument (a comment after "\<newline>" would end the
// command).
void ExpectKnownMegatronArguments(const std::string& text) {
  bool seen_argument = false;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    if (line[0] == '#') {
      EXPECT_FALSE(seen_argument) << "comment after an argument line: " << line;
      continue;
    }
    seen_argument = true;
  }
  for (const std::string& arg : ArgumentLines(text)) {
    std::istringstream words(arg);
    std::string name, value, extra;
    words >> name >> value >> extra;
    EXPECT_TRUE(extra.empty()) << "more than one value: " << arg;
    const auto it = KnownMegatronOptions().find(name);
    if (it == KnownMegatronOptions().end()) {
      ADD_FAILURE() << "not a known Megatron-LM option: " << arg;
      continue;
    }
    const MegatronOption& option = it->second;
    switch (option.kind) {
      case Kind::kSwitch:
        EXPECT_TRUE(value.empty()) << "a switch takes no value: " << arg;
        break;
      case Kind::kInt:
        EXPECT_TRUE(!value.empty() && value.find_first_not_of("0123456789") == std::string::npos)
            << "expected an integer: " << arg;
        break;
      case Kind::kFloat:
        EXPECT_TRUE(!value.empty() && value.find_first_not_of("0123456789.") == std::string::npos)
            << "expected a number: " << arg;
        break;
      case Kind::kChoice:
        EXPECT_TRUE(option.choices.count(value)) << "not one of the option's choices: " << arg;
        break;
      case Kind::kFreq:
        EXPECT_TRUE(!value.empty() && (value.find_first_not_of("0123456789") == std::string::npos ||
                                       (value.front() == '\'' && value.back() == '\'' &&
                                        value.find_first_not_of("'()[]*+,0123456789") == std::string::npos)))
            << "expected an integer or a quoted list expression: " << arg;
        break;
    }
  }
}

void CollectKeys(const YAML::Node& node, const std::string& prefix, std::vector<std::string>& out) {
  if (!node.IsMap()) return;
  for (const auto& kv : node) {
    const std::string path = prefix + kv.first.as<std::string>();
    out.push_back(path);
    CollectKeys(kv.second, path + ".", out);
  }
}

YAML::Node ParseDeepSpeed(const std::string& text) {
  EXPECT_TRUE(IsStrictJson(text));
  YAML::Node config = YAML::Load(text);  // JSON is YAML 1.2
  std::vector<std::string> keys;
  CollectKeys(config, "", keys);
  for (const std::string& k : keys) {
    EXPECT_TRUE(KnownDeepSpeedKeys().count(k)) << "not a known DeepSpeed config key: " << k;
  }
  return config;
}

// GPT-3 175B on 1024 A100s as in Narayanan et al. 2021 (Table 1's 175B row: tp 8, pp 8,
// batch 1536), with the interleaved schedule, SP and selective recomputation of
// Korthikanti et al. 2022.
const char kGpt3Spec[] =
    "tp=8,pp=8,dp=16,vpp=2,mbs=1,gbs=1536,sp=on,recompute=selective,zero=1,"
    "schedule=interleaved";

TEST(EmitMegatron, Gpt3EmitsExactlyTheExpectedArguments) {
  const ModelSpec m = Model("gpt3-175b");
  const Layout l = Resolve(kGpt3Spec, 1024);
  const std::string text = EmitMegatron(m, l);
  ExpectKnownMegatronArguments(text);
  // GPT-3 is multi-head, GeLU, LayerNorm, learned positions, tied embeddings, biases and
  // dropout: all Megatron defaults, so none of their flags appear. Virtual stage size =
  // layers / (pp x vpp) = 96 / (8 x 2) = 6. overlap_pp is off in the layout, and Megatron
  // overlaps p2p by default in the interleaved schedule, so it is turned off. overlap_dp is
  // on (default) and zero=1, so both grad-reduce and param-gather overlap. dtype bf16 is the
  // A100 default; attention flash is the layout default.
  const std::vector<std::string> expected = {
      "--num-layers 96",
      "--hidden-size 12288",
      "--num-attention-heads 96",
      "--ffn-hidden-size 49152",
      "--seq-length 2048",
      "--max-position-embeddings 2048",
      "--position-embedding-type learned_absolute",
      "--tensor-model-parallel-size 8",
      "--pipeline-model-parallel-size 8",
      "--context-parallel-size 1",
      "--sequence-parallel",
      "--num-layers-per-virtual-pipeline-stage 6",
      "--no-overlap-p2p-communication",
      "--micro-batch-size 1",
      "--global-batch-size 1536",
      "--recompute-activations",
      "--use-distributed-optimizer",
      "--overlap-grad-reduce",
      "--overlap-param-gather",
      "--bf16",
      "--attention-backend flash",
  };
  EXPECT_EQ(ArgumentLines(text), expected) << text;
  // dp is implied by the world size: 1024 / (8 x 8 x 1) = 16.
  EXPECT_TRUE(Contains(text, "dp = world / (tp x pp x cp) = 1024 / (8 x 8 x 1) = 16"));
  for (const std::string& c : CommentLines(text)) {
    EXPECT_EQ(c.find("not expressible"), std::string::npos) << c;
  }
}

TEST(EmitMegatron, Llama3AddsGqaSwigluRmsNormAndRope) {
  const std::string text = EmitMegatron(Model("llama3-70b"), Resolve("tp=8,pp=4,dp=8", 256));
  ExpectKnownMegatronArguments(text);
  const std::vector<std::string> args = ArgumentLines(text);
  const std::set<std::string> got(args.begin(), args.end());
  // Llama 3 70B: 64 query heads in 8 KV groups, SwiGLU, RMSNorm, RoPE, untied embeddings,
  // no biases, no dropout (models/llama3-70b.yaml).
  for (const char* want :
       {"--group-query-attention", "--num-query-groups 8", "--swiglu", "--normalization RMSNorm",
        "--position-embedding-type rope", "--untie-embeddings-and-output-weights",
        "--disable-bias-linear", "--attention-dropout 0.0", "--hidden-dropout 0.0",
        "--ffn-hidden-size 28672", "--seq-length 8192"}) {
    EXPECT_TRUE(got.count(want)) << want << " missing from\n" << text;
  }
  // vpp = 1: no virtual stages and no p2p switch (Megatron only overlaps when interleaved).
  EXPECT_FALSE(Contains(text, "virtual-pipeline"));
  EXPECT_FALSE(Contains(text, "p2p-communication"));
}

// NeMo 2 overrides for Llama 3 70B with fp8, a split and Qwen-style biases off: every path
// assigned is one of NeMo's (tests/data/frameworks/nemo-8cfedd7203.txt), with the values the
// layout and the model give.
TEST(EmitNemo, PathsAreNemosAndCarryTheLayout) {
  const std::string text = EmitNemo(Model("llama3-70b"), Resolve("tp=8,pp=4,vpp=5,dp=2,sp=on,zero=1,dtype=fp8,overlap_tp=on,overlap_pp=on", 64));
  const std::set<std::string> names = NamesIn("nemo-8cfedd7203.txt");
  std::istringstream in(text);
  int assignments = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("recipe.", 0) != 0 || line.find(" = ") == std::string::npos) continue;
    const std::string path = line.substr(7, line.find(" = ") - 7);
    if (path == "trainer.callbacks") continue;  // the list the callback is appended to
    ++assignments;
    EXPECT_TRUE(names.count(path)) << path << " is not a NeMo recipe path at 8cfedd7203";
  }
  EXPECT_GT(assignments, 25);
  for (const char* want : {"recipe.trainer.strategy.tensor_model_parallel_size = 8\n",
                           "recipe.trainer.strategy.virtual_pipeline_model_parallel_size = 5\n",
                           "recipe.model.config.num_query_groups = 8\n", "recipe.model.config.rotary_base = 500000\n",
                           "recipe.trainer.plugins = bf16_with_fp8_mixed()\n",
                           "recipe.trainer.plugins.fp8_param_gather = False\n",  // fp8_params off
                           "tp_comm_overlap=True, overlap_p2p_comm=True))"}) {
    EXPECT_TRUE(Contains(text, want)) << want << " missing from\n" << text;
  }
}

// Uneven splits take Megatron-Core's own flags, and the virtual stages per rank (validate_args
// refuses --num-layers-per-virtual-pipeline-stage with first/last-stage counts).
TEST(EmitMegatron, UnevenSplitsTakeMegatronCoreFlags) {
  const std::string a = EmitMegatron(
      Model("llama3-405b"),
      Resolve("tp=8,pp=8,dp=4,cp=2,vpp=8,gbs=256,schedule=interleaved,embedding_in_split=on,loss_in_split=on", 512));
  ExpectKnownMegatronArguments(a);
  std::vector<std::string> args = ArgumentLines(a);
  std::set<std::string> got(args.begin(), args.end());
  for (const char* want : {"--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split",
                           "--num-virtual-stages-per-pipeline-rank 8", "--num-layers 126"}) {
    EXPECT_TRUE(got.count(want)) << want << " missing from\n" << a;
  }
  EXPECT_FALSE(Contains(a, "--num-layers-per-virtual-pipeline-stage"));
  const std::string b =
      EmitMegatron(Model("llama3-405b"), Resolve("tp=8,pp=16,dp=8,first_stage_layers=7,last_stage_layers=7", 1024));
  ExpectKnownMegatronArguments(b);
  args = ArgumentLines(b);
  got = std::set<std::string>(args.begin(), args.end());
  EXPECT_TRUE(got.count("--decoder-first-pipeline-num-layers 7")) << b;
  EXPECT_TRUE(got.count("--decoder-last-pipeline-num-layers 7")) << b;
  EXPECT_FALSE(Contains(b, "account-for"));
}

TEST(EmitMegatron, MoeAddsExpertsAndExpertParallelism) {
  const std::string text =
      EmitMegatron(Model("mixtral-8x7b"), Resolve("tp=2,pp=1,dp=32,ep=8,mbs=1,gbs=256", 64));
  ExpectKnownMegatronArguments(text);
  // Mixtral 8x7B: 8 experts, top-2, expert size 14336, every layer MoE (no --moe-layer-freq).
  for (const char* want : {"--num-experts 8 \\", "--moe-router-topk 2 \\",
                           "--moe-ffn-hidden-size 14336 \\", "--expert-model-parallel-size 8 \\"}) {
    EXPECT_TRUE(Contains(text, want));
  }
  EXPECT_FALSE(Contains(text, "--moe-layer-freq"));
}

TEST(EmitMegatron, FullRecomputeRecomputesEveryLayer) {
  const std::string text = EmitMegatron(
      Model("gpt3-175b"),
      Resolve(
          "tp=8,pp=8,dp=16,vpp=2,mbs=1,gbs=1536,sp=on,recompute=full,zero=1,schedule=interleaved",
          1024));
  ExpectKnownMegatronArguments(text);
  EXPECT_TRUE(Contains(text,
                       "--recompute-granularity full \\\n--recompute-method uniform \\\n"
                       "--recompute-num-layers 1 \\\n"));
  EXPECT_FALSE(Contains(text, "--recompute-activations"));
}

TEST(EmitMegatron, OffloadOfWeightsIsStatedAsNotExpressible) {
  // ZeRO-3 with weights offloaded: Megatron-LM has no ZeRO-3 and no weight offload; the
  // optimizer part is emitted as --optimizer-cpu-offload.
  const std::string text = EmitMegatron(
      Model("llama3-70b"), Resolve("tp=8,pp=4,dp=8,zero=3,offload=optimizer+params", 256));
  ExpectKnownMegatronArguments(text);
  EXPECT_TRUE(Contains(text, "# not expressible in Megatron-LM: offload=optimizer+params"));
  EXPECT_TRUE(Contains(text,
                       "# ZeRO-3 has no direct Megatron-LM equivalent: emitted "
                       "--use-distributed-optimizer"));
  EXPECT_TRUE(Contains(text, "--optimizer-cpu-offload \\\n"));
  EXPECT_TRUE(Contains(text, "--use-precision-aware-optimizer \\\n"));
}

TEST(EmitMegatron, UnsupportedSchedulesAndSwitchesAreStatedNotDropped) {
  const ModelSpec m = Model("gpt3-175b");
  struct Case {
    const char* spec;
    const char* statement;
  };
  const Case cases[] = {
      {"tp=8,pp=8,dp=16,schedule=gpipe", "not expressible in Megatron-LM: schedule=gpipe"},
      {"tp=8,pp=8,dp=16,schedule=zero-bubble",
       "not expressible in Megatron-LM: schedule=zero-bubble"},
      {"tp=8,pp=8,dp=16,overlap_pp=on",
       "not expressible in Megatron-LM: overlap_pp=on with schedule=1f1b"},
      {"tp=8,pp=8,dp=16,overlap_tp=on", "not expressible in Megatron-LM: overlap_tp=on without sp"},
      {"tp=8,pp=8,dp=16,compress=4", "not expressible in Megatron-LM: compress=4 "},
      {"tp=8,pp=8,dp=16,zero=2", "ZeRO-2 has no direct Megatron-LM equivalent"},
  };
  for (const Case& c : cases) {
    const std::string text = EmitMegatron(m, Resolve(c.spec, 1024));
    ExpectKnownMegatronArguments(text);
    EXPECT_TRUE(Contains(text, std::string("# ") + c.statement)) << c.spec;
  }
  // Expressible counterparts: TP overlap with SP, p2p overlap (Megatron's default) when
  // interleaved, fp16/fp8 and unfused attention.
  const std::string tp_overlap =
      EmitMegatron(m, Resolve("tp=8,pp=8,dp=16,sp=on,overlap_tp=on", 1024));
  EXPECT_TRUE(Contains(tp_overlap, "--tp-comm-overlap \\\n"));
  // overlap_tp=backward is Megatron-LM's default async input-gradient reduction: no flag, and
  // expressible without SP too.
  for (const char* spec :
       {"tp=8,pp=8,dp=16,overlap_tp=backward", "tp=8,pp=8,dp=16,sp=on,overlap_tp=backward"}) {
    const std::string text = EmitMegatron(m, Resolve(spec, 1024));
    EXPECT_FALSE(Contains(text, "tp-comm-overlap")) << spec;
    EXPECT_FALSE(Contains(text, "not expressible")) << spec;
  }
  const std::string p2p =
      EmitMegatron(m, Resolve("tp=8,pp=8,dp=16,vpp=2,schedule=interleaved,overlap_pp=on", 1024));
  EXPECT_FALSE(Contains(p2p, "p2p-communication"));
  EXPECT_FALSE(Contains(p2p, "not expressible"));
  const std::string fp8 =
      EmitMegatron(m, Resolve("tp=8,pp=8,dp=16,dtype=fp8,attention=unfused", 1024));
  ExpectKnownMegatronArguments(fp8);
  EXPECT_TRUE(Contains(fp8, "--bf16 \\\n--fp8-format hybrid \\\n--attention-backend unfused\n"));
}

TEST(EmitMegatron, EveryShippedModelUsesOnlyKnownOptions) {
  const std::vector<std::string> specs = {
      "tp=1,pp=1,dp=8",
      "tp=2,pp=2,dp=2,vpp=2,schedule=interleaved,sp=on,overlap_tp=on,recompute=full,zero=3,"
      "offload=optimizer+params,dtype=fp16,attention=unfused,overlap_dp=off",
      "tp=2,pp=2,dp=2,cp=1,schedule=zero-bubble,overlap_pp=on,dtype=fp8,zero=2,offload=optimizer",
  };
  const std::filesystem::path models = std::filesystem::path(SHARDSIM_SOURCE_DIR) / "models";
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(models)) {
    if (entry.path().extension() != ".yaml") continue;
    const ModelSpec m = Model(entry.path().string());
    for (const std::string& spec : specs) {
      SCOPED_TRACE(entry.path().filename().string() + " " + spec);
      ExpectKnownMegatronArguments(EmitMegatron(m, Resolve(spec, 8)));
      ParseDeepSpeed(EmitDeepSpeed(m, Resolve(spec, 8)));
      ++checked;
    }
  }
  EXPECT_GE(checked, 3 * 10);  // models/ ships more than ten models
}

TEST(EmitDeepSpeed, Gpt3BatchZeroAndPrecision) {
  const YAML::Node c = ParseDeepSpeed(EmitDeepSpeed(Model("gpt3-175b"), Resolve(kGpt3Spec, 1024)));
  // gradient accumulation = gbs / (dp x mbs) = 1536 / (16 x 1) = 96; DeepSpeed checks
  // train_batch_size = 1 x 96 x 16 = 1536.
  EXPECT_EQ(c["train_batch_size"].as<int64_t>(), 1536);
  EXPECT_EQ(c["train_micro_batch_size_per_gpu"].as<int64_t>(), 1);
  EXPECT_EQ(c["gradient_accumulation_steps"].as<int64_t>(), 96);
  EXPECT_EQ(c["gradient_clipping"].as<double>(), 1.0);
  EXPECT_EQ(c["zero_optimization"]["stage"].as<int>(), 1);
  EXPECT_TRUE(c["zero_optimization"]["overlap_comm"].as<bool>());
  EXPECT_FALSE(c["zero_optimization"]["offload_optimizer"]);
  EXPECT_FALSE(c["zero_optimization"]["stage3_prefetch_bucket_size"]);
  EXPECT_TRUE(c["bf16"]["enabled"].as<bool>());
  EXPECT_FALSE(c["fp16"]);
  // Selective recomputation with tp=8: checkpoints partitioned over the TP group.
  EXPECT_TRUE(c["activation_checkpointing"]["partition_activations"].as<bool>());
  // tp and pp are not config keys: the note names Megatron-DeepSpeed's flags and values.
  const YAML::Node notes = c["_shardsim_notes"];
  ASSERT_TRUE(notes.IsSequence());
  EXPECT_TRUE(Contains(notes[0].as<std::string>(),
                       "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 8"));
}

TEST(EmitDeepSpeed, Zero3OffloadsOptimizerAndParamsToCpu) {
  const YAML::Node c = ParseDeepSpeed(EmitDeepSpeed(
      Model("llama3-70b"), Resolve("tp=8,pp=4,dp=8,gbs=256,zero=3,offload=optimizer+params", 256)));
  const YAML::Node z = c["zero_optimization"];
  EXPECT_EQ(z["stage"].as<int>(), 3);
  EXPECT_EQ(z["offload_optimizer"]["device"].as<std::string>(), "cpu");
  EXPECT_EQ(z["offload_param"]["device"].as<std::string>(), "cpu");
  // prefetch=on (default): DeepSpeedZeroConfig's default bucket of 5e7 elements.
  EXPECT_EQ(z["stage3_prefetch_bucket_size"].as<int64_t>(), 50'000'000);
  // 256 / (8 x 1) = 32 accumulation steps.
  EXPECT_EQ(c["gradient_accumulation_steps"].as<int64_t>(), 32);
  EXPECT_FALSE(c["activation_checkpointing"]);  // recompute=none
}

TEST(EmitDeepSpeed, PrefetchOffAndFp16AndOptimizerOnlyOffload) {
  const YAML::Node off = ParseDeepSpeed(
      EmitDeepSpeed(Model("llama3-8b"), Resolve("tp=1,pp=1,dp=8,zero=3,prefetch=off", 8)));
  // A bucket of 0 elements disables ZeRO-3 prefetching.
  EXPECT_EQ(off["zero_optimization"]["stage3_prefetch_bucket_size"].as<int64_t>(), 0);
  EXPECT_FALSE(off["_shardsim_notes"]);  // tp = pp = 1 and nothing else to note
  const YAML::Node fp16 = ParseDeepSpeed(EmitDeepSpeed(
      Model("llama3-8b"), Resolve("tp=1,pp=1,dp=8,zero=2,offload=optimizer,dtype=fp16", 8)));
  EXPECT_TRUE(fp16["fp16"]["enabled"].as<bool>());
  EXPECT_FALSE(fp16["bf16"]);
  EXPECT_EQ(fp16["zero_optimization"]["offload_optimizer"]["device"].as<std::string>(), "cpu");
  EXPECT_FALSE(fp16["zero_optimization"]["offload_param"]);
}

}  // namespace
}  // namespace shardsim::planner
