// Software-stack descriptions (stacks/*.yaml, src/layout/stack.h): rules that refuse the
// layouts a framework cannot run, with their reasons; the planner searches only what the stack
// runs, and estimate/simulate refuse the rest.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "planner/planner.h"
#include "src/hardware/cluster.h"
#include "src/layout/stack.h"
#include "src/model/model_spec.h"
#include "tests/contains.h"
#include "tests/run_shardsim.h"

namespace shardsim {
namespace {

using testing::Contains;

Layout Resolved(const std::string& spec, int64_t gpus) {
  const StatusOr<HardwareSpec> hw = LoadHardware("dgx-h100");
  EXPECT_TRUE(hw.ok());
  const StatusOr<Layout> parsed = ParseLayout(spec);
  EXPECT_TRUE(parsed.ok()) << parsed.status().message();
  const StatusOr<Layout> l = ResolveLayoutFor(*parsed, gpus, *hw);
  EXPECT_TRUE(l.ok()) << l.status().message();
  return *l;
}

TEST(StackTest, EveryBundledStackLoads) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(SHARDSIM_SOURCE_DIR) + "/stacks")) {
    SCOPED_TRACE(e.path().string());
    const StatusOr<StackSpec> s = LoadStack(e.path().stem().string());
    ASSERT_TRUE(s.ok()) << s.status().message();
    EXPECT_EQ(s->name, e.path().stem().string());
    EXPECT_FALSE(s->rules.empty());
    for (const StackRule& r : s->rules) EXPECT_FALSE(r.why.empty());
    ++n;
  }
  EXPECT_GE(n, 5);  // issue 14 item 3's list
}

// DeepSpeed's pipeline engine refuses ZeRO-2/3 (deepspeed/runtime/pipe/engine.py); without a
// pipeline ZeRO-2 runs, and ZeRO-1 runs with one.
TEST(StackTest, DeepSpeedRefusesZero2WithPipelines) {
  const StatusOr<StackSpec> s = LoadStack("megatron-deepspeed-2022");
  ASSERT_TRUE(s.ok()) << s.status().message();
  const std::optional<std::string> why = StackRefusal(*s, Resolved("tp=2,pp=2,mbs=1,gbs=16,zero=2,attention=unfused", 16));
  ASSERT_TRUE(why.has_value());
  EXPECT_TRUE(Contains(*why, "stack 'megatron-deepspeed-2022' cannot run zero=2 with pp>1")) << *why;
  EXPECT_TRUE(Contains(*why, "incompatible with pipeline parallelism")) << *why;
  EXPECT_FALSE(StackRefusal(*s, Resolved("tp=2,pp=1,mbs=1,gbs=16,zero=2,attention=unfused", 16)).has_value());
  EXPECT_FALSE(StackRefusal(*s, Resolved("tp=2,pp=2,mbs=1,gbs=16,zero=1,attention=unfused", 16)).has_value());
}

// Terms: `key>N` on numeric keys, `key=value` compared as FormatLayout writes the value (so
// "sp=on" matches a layout given "sp=on", and a resolved schedule is matched by name).
TEST(StackTest, TermsMatchNumericBoundsAndCanonicalValues) {
  const StatusOr<StackSpec> s = ParseStackYaml(
      "name: t\nsource: s\ndescription: d\nrules:\n"
      "  - {refuse: \"cp>1\", why: \"no cp\"}\n"
      "  - {refuse: \"schedule=interleaved\", when: \"vpp>1\", why: \"no interleaving\"}\n",
      "t.yaml");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_TRUE(StackRefusal(*s, Resolved("tp=1,cp=2,mbs=1,gbs=8", 8)).has_value());
  EXPECT_FALSE(StackRefusal(*s, Resolved("tp=1,cp=1,mbs=1,gbs=8", 8)).has_value());
  const std::optional<std::string> why = StackRefusal(*s, Resolved("tp=1,pp=2,vpp=2,mbs=1,gbs=8", 8));
  ASSERT_TRUE(why.has_value());
  EXPECT_TRUE(Contains(*why, "cannot run schedule=interleaved with vpp>1: no interleaving")) << *why;
}

TEST(StackTest, BadFilesAreLocatedErrors) {
  struct Case {
    const char* rule;
    const char* expected;
  };
  const Case cases[] = {
      {"  - {refuze: \"cp>1\", why: w}\n", "did you mean 'refuse'"},
      {"  - {refuse: \"zeroo=2\", why: w}\n", "zeroo"},
      {"  - {refuse: \"tp>x\", why: w}\n", "non-negative integer"},
      {"  - {refuse: \"sp>0\", why: w}\n", "sp"},
      {"  - {refuse: \"cp>1\"}\n", "why"},
      {"  - {refuse: \"cp\", why: w}\n", "expected key=value or key>N"},
  };
  for (const Case& c : cases) {
    const StatusOr<StackSpec> s =
        ParseStackYaml(std::string("name: t\nsource: s\ndescription: d\nrules:\n") + c.rule, "bad.yaml");
    ASSERT_FALSE(s.ok()) << c.rule;
    EXPECT_TRUE(Contains(s.status().message(), c.expected)) << c.rule << " -> " << s.status().message();
    EXPECT_TRUE(Contains(s.status().message(), "bad.yaml:5")) << s.status().message();
  }
}

// The planner with Megatron-Core's stack: nothing it ranks uses ZeRO-2/3 or a schedule other
// than 1F1B and interleaved, some valid layouts were left out for it, and without the stack
// the same problem ranks at least as fast a winner (a superset of layouts, with the stack's
// attention on this GPU, cuDNN's, fixed: without a stack the default is FlashAttention-2).
TEST(StackTest, PlannerSearchesOnlyWhatTheStackRuns) {
  const StatusOr<ModelSpec> m = LoadModel("llama3-8b");
  const StatusOr<HardwareSpec> hw = LoadHardware("dgx-h100");
  ASSERT_TRUE(m.ok() && hw.ok());
  const Cluster cluster(*hw, 16);
  planner::PlanOptions o;
  o.gpus = 16;
  o.global_batch = 64;
  o.top_k = 3;
  o.threads = 2;
  o.fixed["attention"] = "cudnn";
  const StatusOr<planner::PlanResult> free = planner::Plan(*m, cluster, o);
  ASSERT_TRUE(free.ok()) << free.status().message();
  o.fixed.clear();
  StatusOr<StackSpec> s = LoadStack("megatron-core-2024");
  ASSERT_TRUE(s.ok());
  o.stack = *s;
  const StatusOr<planner::PlanResult> r = planner::Plan(*m, cluster, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->stack, "megatron-core-2024");
  EXPECT_GT(r->stack_refused, 0);
  ASSERT_FALSE(r->ranked.empty());
  for (const planner::Candidate& c : r->ranked) {
    EXPECT_FALSE(StackRefusal(*s, c.layout).has_value()) << FormatLayout(c.layout);
    EXPECT_LE(c.layout.zero, 1);
  }
  ASSERT_FALSE(free->ranked.empty());
  EXPECT_LE(free->ranked.front().time_s(), r->ranked.front().time_s() * (1 + 1e-12));
}

TEST(StackTest, EstimateRefusesWhatTheStackCannotRun) {
  const testing::CommandResult r = testing::RunShardsim(
      "estimate --model llama3-8b --hardware dgx-h100 --gpus 16 --layout tp=2,pp=2,mbs=1,gbs=16,zero=2,attention=unfused "
      "--stack megatron-deepspeed-2022");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, "cannot run zero=2 with pp>1")) << r.err;
  const testing::CommandResult ok = testing::RunShardsim(
      "estimate --model llama3-8b --hardware dgx-h100 --gpus 16 --layout tp=2,pp=2,mbs=1,gbs=16,zero=1,attention=unfused "
      "--stack megatron-deepspeed-2022");
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  const testing::CommandResult missing = testing::RunShardsim("estimate --stack megatron-core-2042");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_TRUE(Contains(missing.err, "did you mean 'megatron-core-2024'")) << missing.err;
  // A name no typo away but the start of exactly one bundled name gets that one; the start of
  // several (megatron-*) gets none.
  const testing::CommandResult prefix = testing::RunShardsim("estimate --stack torchtitan");
  EXPECT_EQ(prefix.exit_code, 1);
  EXPECT_TRUE(Contains(prefix.err, "did you mean 'torchtitan-fsdp2'")) << prefix.err;
  const testing::CommandResult several = testing::RunShardsim("estimate --stack megatron");
  EXPECT_EQ(several.exit_code, 1);
  EXPECT_FALSE(Contains(several.err, "did you mean")) << several.err;
}

// A --layout spec takes the stack's defaults for the keys it does not set, with a warning
// naming them: torchtitan's kernels=eager (no torch.compile) and its live_params; a key the spec
// sets stays.
TEST(StackTest, EstimateTakesTheStackDefaultsTheSpecDoesNotSet) {
  const std::string base = "estimate --model llama3-8b --hardware dgx-h100 --gpus 8 --stack torchtitan-fsdp2 --layout "
                           "tp=1,pp=1,mbs=1,gbs=8,zero=3";
  const testing::CommandResult r = testing::RunShardsim(base);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, ",kernels=eager")) << r.out;
  EXPECT_TRUE(Contains(r.out, "--layout takes kernels=eager,live_params=1000000000000 from stack torchtitan-fsdp2")) << r.out;
  const testing::CommandResult compiled = testing::RunShardsim(base + ",kernels=compiled");
  ASSERT_EQ(compiled.exit_code, 0) << compiled.err;
  EXPECT_FALSE(Contains(compiled.out, "kernels=eager")) << compiled.out;
  EXPECT_TRUE(Contains(compiled.out, "--layout takes live_params=1000000000000 from stack torchtitan-fsdp2")) << compiled.out;
}

// framework_defaults: what the framework runs where the spec is silent on a searched key, by
// the layout as resolved. A hand-written stack: zero=3 when dp>1 and pp=1, zero=1 and
// overlap_pp=on when pp>1; a key the spec sets stays, and the first rule that sets a key wins.
TEST(StackTest, FrameworkDefaultsFollowTheResolvedLayout) {
  const StatusOr<StackSpec> s = ParseStackYaml(
      "name: t\nsource: s\ndescription: d\nframework_defaults:\n"
      "  - {when: \"dp>1,pp=1\", set: \"zero=3\", why: fsdp}\n"
      "  - {when: \"pp>1\", set: \"zero=1,overlap_pp=on\", why: pipelined}\n"
      "  - {set: \"zero=2\", why: never}\n"
      "rules:\n  - {refuse: \"cp>1\", why: w}\n",
      "t.yaml");
  ASSERT_TRUE(s.ok()) << s.status().message();
  std::vector<std::string> why;
  // 8 GPUs at tp=2: dp = 4, pp = 1: the first rule; the third's zero is taken by then.
  EXPECT_EQ(StackFrameworkDefaults(*s, Resolved("tp=2,mbs=1,gbs=8", 8), {"tp", "mbs", "gbs"}, &why),
            std::vector<std::string>{"zero=3"});
  EXPECT_EQ(why, std::vector<std::string>{"fsdp"});
  why.clear();
  // pp = 2: the second rule, both keys; with zero set by the spec, overlap_pp alone.
  EXPECT_EQ(StackFrameworkDefaults(*s, Resolved("tp=2,pp=2,mbs=1,gbs=8", 8), {"tp", "pp", "mbs", "gbs"}, &why),
            (std::vector<std::string>{"zero=1", "overlap_pp=on"}));
  EXPECT_EQ(StackFrameworkDefaults(*s, Resolved("tp=2,pp=2,mbs=1,gbs=8,zero=0", 8), {"tp", "pp", "mbs", "gbs", "zero"}, &why),
            std::vector<std::string>{"overlap_pp=on"});
  // tp = 8 on 8 GPUs: dp = 1, pp = 1: only the unconditional third rule.
  EXPECT_EQ(StackFrameworkDefaults(*s, Resolved("tp=8,mbs=1,gbs=8", 8), {"tp", "mbs", "gbs"}, &why),
            std::vector<std::string>{"zero=2"});
  // Bad entries are located errors: the user's sizes, an unknown key, a missing reason.
  for (const auto& [entry, expected] : std::vector<std::pair<std::string, std::string>>{
           {"  - {set: \"tp=2\", why: w}\n", "the parallel sizes, mbs and gbs are the user's"},
           {"  - {set: \"zeroo=3\", why: w}\n", "zeroo"},
           {"  - {set: \"zero\", why: w}\n", "expected key=value"},
           {"  - {set: \"zero=3\"}\n", "why"},
           {"  - {when: \"pp>x\", set: \"zero=3\", why: w}\n", "non-negative integer"}}) {
    const StatusOr<StackSpec> bad = ParseStackYaml(
        "name: t\nsource: s\ndescription: d\nframework_defaults:\n" + entry + "rules:\n  - {refuse: \"cp>1\", why: w}\n",
        "bad.yaml");
    ASSERT_FALSE(bad.ok()) << entry;
    EXPECT_TRUE(Contains(bad.status().message(), expected)) << entry << " -> " << bad.status().message();
    EXPECT_TRUE(Contains(bad.status().message(), "bad.yaml:5")) << bad.status().message();
  }
}

// estimate with the bundled stacks and a bare spec: torchtitan at tp=2, pp=2 on 8 GPUs (dp 2)
// runs FSDP with PP's one gather a step (zero=1), SP and the delayed send waits (overlap_pp=on),
// where before the spec's zero=0, sp=off and overlap_pp=off were refused one after the other;
// Megatron-Core at tp=2 overlaps the backward's TP communication (overlap_tp=backward). Each
// with the warning that names what it took.
TEST(StackTest, EstimateTakesWhatTheFrameworkRunsWhereTheSpecIsSilent) {
  const testing::CommandResult titan = testing::RunShardsim(
      "estimate --model llama3-8b --hardware dgx-h100 --gpus 8 --stack torchtitan-fsdp2 --layout tp=2,pp=2,mbs=1,gbs=16");
  ASSERT_EQ(titan.exit_code, 0) << titan.err;
  EXPECT_TRUE(Contains(titan.out, "layout: tp=2,pp=2,dp=2,")) << titan.out;
  EXPECT_TRUE(Contains(titan.out, ",zero=1,sp=on,")) << titan.out;
  EXPECT_TRUE(Contains(titan.out, ",overlap_pp=on,")) << titan.out;
  EXPECT_TRUE(Contains(titan.out, "--layout takes zero=1,sp=on,overlap_pp=on from stack torchtitan-fsdp2 (what the "
                                  "framework runs where the spec is silent")) << titan.out;
  const testing::CommandResult mcore = testing::RunShardsim(
      "estimate --model llama3-8b --hardware dgx-h100 --gpus 8 --stack megatron-core-2024 --layout tp=2,mbs=1,gbs=16");
  ASSERT_EQ(mcore.exit_code, 0) << mcore.err;
  EXPECT_TRUE(Contains(mcore.out, ",overlap_tp=backward,")) << mcore.out;
  // An MoE model under torchtitan with ep and tp: its experts' TP defaults to 1
  // (expert_tensor_parallel_degree), under Megatron-Core to tp (unset); a given etp stays.
  const std::string moe = "estimate --model mixtral-8x7b --hardware dgx-h100 --gpus 64 --layout tp=2,ep=8,pp=2,mbs=1,gbs=64";
  const testing::CommandResult titan_moe = testing::RunShardsim(moe + ",kernels=compiled --stack torchtitan-fsdp2");
  ASSERT_EQ(titan_moe.exit_code, 0) << titan_moe.err;
  EXPECT_TRUE(Contains(titan_moe.out, ",ep=8,etp=1,")) << titan_moe.out;
  const testing::CommandResult titan_etp = testing::RunShardsim(moe + ",etp=2,kernels=compiled --stack torchtitan-fsdp2");
  ASSERT_EQ(titan_etp.exit_code, 0) << titan_etp.err;
  EXPECT_FALSE(Contains(titan_etp.out, "etp=")) << titan_etp.out;  // etp = tp: unset, not written
  const testing::CommandResult mcore_moe = testing::RunShardsim(moe + " --stack megatron-core-2024");
  ASSERT_EQ(mcore_moe.exit_code, 0) << mcore_moe.err;
  EXPECT_FALSE(Contains(mcore_moe.out, "etp=")) << mcore_moe.out;
  // A key the spec sets is the user's: overlap_tp=off is still refused.
  const testing::CommandResult off = testing::RunShardsim(
      "estimate --model llama3-8b --hardware dgx-h100 --gpus 8 --stack megatron-core-2024 --layout tp=2,mbs=1,gbs=16,overlap_tp=off");
  EXPECT_EQ(off.exit_code, 1);
  EXPECT_TRUE(Contains(off.err, "cannot run overlap_tp=off with tp>1")) << off.err;
}

// Transformer Engine's attention backend follows the GPU: megatron-core-2024's default
// attention=cudnn on the H100 description (it has cuDNN's rates), attention=flash on the A100's
// (TE runs FlashAttention there). Megatron-LM arguments without --attention-backend (auto,
// TE's choice) read the same way; --attention-backend flash is flash on both, and fused is
// cudnn, which the A100 description (no cuDNN rates) refuses.
TEST(StackTest, AttentionBackendFollowsTheGpu) {
  const std::string spec = " --gpus 8 --layout tp=1,pp=1,mbs=1,gbs=8 --stack megatron-core-2024";
  const testing::CommandResult h100 = testing::RunShardsim("estimate --model llama3-8b --hardware dgx-h100" + spec);
  ASSERT_EQ(h100.exit_code, 0) << h100.err;
  EXPECT_TRUE(Contains(h100.out, ",attention=cudnn,")) << h100.out;
  EXPECT_TRUE(Contains(h100.out, "--layout takes attention=cudnn from stack megatron-core-2024")) << h100.out;
  const testing::CommandResult a100 = testing::RunShardsim("estimate --model llama3-8b --hardware dgx-a100-80gb" + spec);
  ASSERT_EQ(a100.exit_code, 0) << a100.err;
  EXPECT_TRUE(Contains(a100.out, ",attention=flash,")) << a100.out;

  const std::filesystem::path dir = testing::FreshTempDir("attn-backend");
  const std::string args =
      "--num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 --group-query-attention "
      "--num-query-groups 8 --seq-length 8192 --max-position-embeddings 8192 --swiglu --normalization RMSNorm "
      "--position-embedding-type rope --rotary-base 500000 --untie-embeddings-and-output-weights --disable-bias-linear "
      "--attention-dropout 0.0 --hidden-dropout 0.0 --micro-batch-size 1 --global-batch-size 8 --bf16";
  for (const auto& [backend, h100_attention] :
       {std::pair<std::string, std::string>{"", "cudnn"}, {" --attention-backend flash", "flash"},
        {" --attention-backend fused", "cudnn"}}) {
    const std::filesystem::path file = dir / "args.sh";
    {
      std::ofstream f(file);
      f << args << backend << "\n";
    }
    const std::string from = " --gpus 8 --layout-from '" + file.string() + "'";
    const testing::CommandResult on_h100 = testing::RunShardsim("estimate --model llama3-8b --hardware dgx-h100" + from);
    ASSERT_EQ(on_h100.exit_code, 0) << backend << on_h100.err;
    EXPECT_TRUE(Contains(on_h100.out, ",attention=" + h100_attention + ",")) << backend << on_h100.out;
    const testing::CommandResult on_a100 = testing::RunShardsim("estimate --model llama3-8b --hardware dgx-a100-80gb" + from);
    if (backend.find("fused") != std::string::npos) {
      EXPECT_EQ(on_a100.exit_code, 1) << on_a100.out;
      EXPECT_TRUE(Contains(on_a100.err, "attention_cudnn_tflops")) << on_a100.err;
    } else {
      ASSERT_EQ(on_a100.exit_code, 0) << backend << on_a100.err;
      EXPECT_TRUE(Contains(on_a100.out, ",attention=flash,")) << backend << on_a100.out;
    }
  }
  std::filesystem::remove_all(dir);
}

// plan without --stack searches for megatron-core-2024 and says so; --stack none searches
// every layout. tiny on 2 CPU cores, global batch 8: the default leaves out at least the
// ZeRO-2 and ZeRO-3 layouts (dp = 2 makes them valid), none leaves out nothing.
TEST(StackTest, PlanDefaultsToMegatronCoreAndNoneSearchesEverything) {
  const std::string base = "plan --model tiny --hardware cpu-host --gpus 2 --global-batch 8 --top 1 --threads 1";
  const testing::CommandResult def = testing::RunShardsim(base);
  ASSERT_EQ(def.exit_code, 0) << def.err;
  EXPECT_TRUE(Contains(def.out, "stack: megatron-core-2024 (stacks/megatron-core-2024.yaml; the default, --stack none searches every layout)"))
      << def.out;
  const testing::CommandResult json = testing::RunShardsim(base + " --json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_TRUE(Contains(json.out, "\"stack\": \"megatron-core-2024\"")) << json.out;
  EXPECT_TRUE(Contains(json.out, "\"stack_is_default\": true")) << json.out;
  const testing::CommandResult named = testing::RunShardsim(base + " --stack megatron-core-2024 --json");
  ASSERT_EQ(named.exit_code, 0) << named.err;
  EXPECT_TRUE(Contains(named.out, "\"stack_is_default\": false")) << named.out;
  const testing::CommandResult none = testing::RunShardsim(base + " --stack none --json");
  ASSERT_EQ(none.exit_code, 0) << none.err;
  EXPECT_FALSE(Contains(none.out, "\"stack\"")) << none.out;
}

}  // namespace
}  // namespace shardsim
