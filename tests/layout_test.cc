// Tests of layouts: parsing and formatting (src/layout/layout.h), defaults, the checker that
// returns every reason a layout is invalid (validate.h), and rank placement (placement.h).
#include "src/layout/layout.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "src/hardware/hardware_spec.h"
#include "src/layout/placement.h"
#include "src/layout/validate.h"
#include "src/model/model_spec.h"
#include "src/util/strings.h"
#include "tests/contains.h"

namespace shardsim {
namespace {

using testing::Contains;

Layout MustParse(const std::string& spec) {
  StatusOr<Layout> l = ParseLayout(spec);
  EXPECT_TRUE(l.ok()) << spec << ": " << l.status().message();
  return l.ok() ? *l : Layout{};
}

// Resolved for an A100 cluster, which has a bf16 rate (so the default dtype is bf16).
Layout MustResolve(const std::string& spec, int64_t gpus) {
  static const HardwareSpec a100 = *LoadHardware("dgx-a100-80gb");
  StatusOr<Layout> l = ResolveLayoutFor(MustParse(spec), gpus, a100);
  EXPECT_TRUE(l.ok()) << l.status().message();
  return l.ok() ? *l : Layout{};
}

std::string ParseError(const std::string& spec) {
  StatusOr<Layout> l = ParseLayout(spec);
  EXPECT_FALSE(l.ok()) << "'" << spec << "' parsed as " << (l.ok() ? FormatLayout(*l) : "");
  return l.ok() ? std::string() : l.status().message();
}

// --- ParseLayout / FormatLayout ----------------------------------------------------------------

TEST(ParseLayout, ReadsEveryKindOfValue) {
  const Layout l = MustParse(
      "tp=8,pp=8,vpp=2,mbs=2,gbs=1536,zero=1,sp=on,recompute=selective,schedule=interleaved,"
      "dtype=fp16,offload=optimizer,compress=4,overlap_dp=off,overlap_tp=on,prefetch=off,cp=2,"
      "ep=1,dp=8");
  EXPECT_EQ(l.tp, 8);
  EXPECT_EQ(l.pp, 8);
  EXPECT_EQ(l.dp, 8);
  EXPECT_EQ(l.cp, 2);
  EXPECT_EQ(l.vpp, 2);
  EXPECT_EQ(l.mbs, 2);
  EXPECT_EQ(l.gbs, 1536);
  EXPECT_EQ(l.zero, 1);
  EXPECT_TRUE(l.sp);
  EXPECT_EQ(l.recompute, Recompute::kSelective);
  EXPECT_EQ(l.schedule, Schedule::kInterleaved);
  EXPECT_EQ(l.dtype, DType::kFp16);
  EXPECT_EQ(l.offload, Offload::kOptimizer);
  EXPECT_EQ(l.grad_compression, 4.0);
  EXPECT_FALSE(l.overlap_dp);
  EXPECT_EQ(l.overlap_tp, TpOverlap::kOn);
  EXPECT_FALSE(l.prefetch);
}

// overlap_tp has three values; on and off keep the boolean spellings the other switches take.
TEST(ParseLayout, OverlapTpThreeValues) {
  EXPECT_EQ(MustParse("tp=2").overlap_tp, TpOverlap::kOff);  // the default
  EXPECT_EQ(MustParse("overlap_tp=off").overlap_tp, TpOverlap::kOff);
  EXPECT_EQ(MustParse("overlap_tp=false").overlap_tp, TpOverlap::kOff);
  EXPECT_EQ(MustParse("overlap_tp=0").overlap_tp, TpOverlap::kOff);
  EXPECT_EQ(MustParse("overlap_tp=backward").overlap_tp, TpOverlap::kBackward);
  EXPECT_EQ(MustParse("overlap_tp=on").overlap_tp, TpOverlap::kOn);
  EXPECT_EQ(MustParse("overlap_tp=true").overlap_tp, TpOverlap::kOn);
  EXPECT_EQ(MustParse("overlap_tp=1").overlap_tp, TpOverlap::kOn);
  for (const char* v : {"off", "backward", "on"}) {
    const std::string spec = std::string("tp=2,overlap_tp=") + v;
    EXPECT_TRUE(Contains(FormatLayout(MustParse(spec)), std::string(",overlap_tp=") + v + ","))
        << v;
  }
  StatusOr<Layout> y = ParseLayoutYaml("tp: 2\noverlap_tp: backward\n", "layout.yaml");
  ASSERT_TRUE(y.ok()) << y.status().message();
  EXPECT_EQ(y->overlap_tp, TpOverlap::kBackward);
}

TEST(ParseLayout, UnsetKeysKeepTheirDefaults) {
  const Layout l = MustParse("tp=2");
  EXPECT_EQ(l.pp, 1);
  EXPECT_EQ(l.dp, 0);   // derived later
  EXPECT_EQ(l.gbs, 0);  // derived later
  EXPECT_EQ(l.zero, 0);
  EXPECT_FALSE(l.sp);
  EXPECT_EQ(l.dtype, DType::kBf16);
  EXPECT_TRUE(l.overlap_dp);
  EXPECT_FALSE(l.schedule_given);
}

TEST(FormatLayout, RoundTripIsStableForResolvedLayouts) {
  // FormatLayout writes every key; parsing it back and formatting again gives the same text.
  for (const std::string& spec :
       {std::string("tp=8,pp=8,vpp=2,mbs=1,gbs=1536,sp=on,recompute=selective"),
        std::string("tp=2,pp=4,cp=2,ep=2,zero=3,offload=optimizer+params,dtype=fp8,"
                    "schedule=zero-bubble,compress=2.5,overlap_tp=on,prefetch=off"),
        std::string("tp=4,sp=on,overlap_tp=backward"),
        std::string("mbs=4,recompute=full,schedule=gpipe,dtype=fp32,overlap_dp=off")}) {
    SCOPED_TRACE(spec);
    const Layout resolved = MustResolve(spec, 1024);
    const std::string text = FormatLayout(resolved);
    const Layout reparsed = MustParse(text);
    EXPECT_EQ(FormatLayout(reparsed), text);
    // Resolving the re-parsed layout again changes nothing: every derived field was written.
    EXPECT_EQ(FormatLayout(MustResolve(text, 1024)), text);
  }
}

// cpu-host has no bf16 rate: an unspecified dtype becomes fp32; a given one is kept.
TEST(ResolveLayoutFor, DtypeDefaultFollowsTheHardware) {
  const HardwareSpec cpu = *LoadHardware("cpu-host");
  EXPECT_EQ(ResolveLayoutFor(MustParse("mbs=1"), 1, cpu)->dtype, DType::kFp32);
  EXPECT_EQ(ResolveLayoutFor(MustParse("mbs=1,dtype=bf16"), 1, cpu)->dtype, DType::kBf16);
}

TEST(FormatLayout, FirstSpecInFullAndOrder) {
  // tp=8, pp=8 on 1024 GPUs: dp = 1024 / 64 = 16; gbs given; vpp=2 -> interleaved.
  EXPECT_EQ(
      FormatLayout(MustResolve("tp=8,pp=8,vpp=2,mbs=1,gbs=1536,sp=on,recompute=selective", 1024))
          .rfind("tp=8,pp=8,dp=16,cp=1,ep=1,vpp=2,mbs=1,gbs=1536,zero=0,sp=on,"
                 "recompute=selective,schedule=interleaved,dtype=bf16,offload=none,"
                 "compress=1,overlap_dp=on,overlap_tp=off,overlap_pp=off,prefetch=on",
                 0),
      0u);
}

TEST(FormatLayout, RoundTripOfAnUnresolvedLayoutKeepsWhatIsStillToBeDerived) {
  // A layout that leaves dp, gbs and the schedule to ResolveLayout must format to a spec that
  // parses again and resolves to the same layout (layout.h: ParseLayout(FormatLayout(l)) == l).
  const Layout unresolved = MustParse("pp=2,vpp=2,mbs=2");
  const std::string text = FormatLayout(unresolved);
  StatusOr<Layout> reparsed = ParseLayout(text);
  ASSERT_TRUE(reparsed.ok()) << text << ": " << reparsed.status().message();
  EXPECT_EQ(FormatLayout(*reparsed), text);
  // Resolved for 8 GPUs: dp = 8 / 2 = 4, gbs = 4 x 2 = 8, vpp 2 -> interleaved, both ways.
  StatusOr<Layout> a = ResolveLayout(unresolved, 8);
  StatusOr<Layout> b = ResolveLayout(*reparsed, 8);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(FormatLayout(*a), FormatLayout(*b));
  EXPECT_EQ(b->dp, 4);
  EXPECT_EQ(b->gbs, 8);
  EXPECT_EQ(b->schedule, Schedule::kInterleaved);
}

TEST(FormatLayout, CompressionRatioSurvivesTheRoundTrip) {
  const Layout l = MustParse("compress=1.2345678");
  EXPECT_EQ(MustParse(FormatLayout(l)).grad_compression, 1.2345678);
}

// --- ResolveLayout -----------------------------------------------------------------------------

TEST(ResolveLayout, DerivesDpGbsAndSchedule) {
  // dp = 1024 / (tp 8 x pp 8 x cp 1) = 16; gbs = dp x mbs = 16 x 1; pp without vpp -> 1f1b.
  Layout l = MustResolve("tp=8,pp=8", 1024);
  EXPECT_EQ(l.dp, 16);
  EXPECT_EQ(l.gbs, 16);
  EXPECT_EQ(l.microbatches(), 1);
  EXPECT_EQ(l.schedule, Schedule::k1F1B);
  // mbs 4: gbs = 16 x 4 = 64, still one micro-batch per replica.
  l = MustResolve("tp=8,pp=8,mbs=4", 1024);
  EXPECT_EQ(l.gbs, 64);
  // cp counts in the model-parallel size: dp = 1024 / (8 x 8 x 2) = 8.
  EXPECT_EQ(MustResolve("tp=8,pp=8,cp=2", 1024).dp, 8);
  // vpp > 1 picks the interleaved schedule unless one is given.
  EXPECT_EQ(MustResolve("pp=4,vpp=2", 64).schedule, Schedule::kInterleaved);
  EXPECT_EQ(MustResolve("pp=4,vpp=2,schedule=gpipe", 64).schedule, Schedule::kGpipe);
  // Given values are kept: dp 2 on 1024 GPUs (CheckLayout reports the mismatch), gbs 100.
  l = MustResolve("dp=2,gbs=100", 1024);
  EXPECT_EQ(l.dp, 2);
  EXPECT_EQ(l.gbs, 100);
  // tp 5 does not divide 1024: dp rounds down to 204 (world 1020, reported by CheckLayout).
  EXPECT_EQ(MustResolve("tp=5", 1024).dp, 204);
  // More model parallelism than GPUs: dp is at least 1.
  EXPECT_EQ(MustResolve("tp=8,pp=8", 8).dp, 1);
}

TEST(ResolveLayout, RejectsNoGpus) {
  StatusOr<Layout> l = ResolveLayout(Layout{}, 0);
  ASSERT_FALSE(l.ok());
  EXPECT_TRUE(Contains(l.status().message(), "at least 1"));
}

// --- ParseLayout errors ------------------------------------------------------------------------

TEST(ParseLayoutErrors, UnknownKeySuggestsTheClosest) {
  const std::string e = ParseError("tpp=2");
  EXPECT_TRUE(Contains(e, "unknown key 'tpp'"));
  EXPECT_TRUE(Contains(e, "did you mean 'tp'"));
  EXPECT_TRUE(Contains(e, "known keys: tp, pp, dp"));
  EXPECT_TRUE(Contains(ParseError("recompte=full"), "did you mean 'recompute'"));
}

TEST(ParseLayoutErrors, BadIntegers) {
  const std::string e = ParseError("tp=abc");
  EXPECT_TRUE(Contains(e, "layout key 'tp'"));
  EXPECT_TRUE(Contains(e, "expected a positive integer up to 16777216, found 'abc'"));
  EXPECT_TRUE(Contains(ParseError("tp=0"), "expected a positive integer up to 16777216, found '0'"));
  EXPECT_TRUE(Contains(ParseError("pp=-2"), "expected a positive integer up to 16777216, found '-2'"));
  EXPECT_TRUE(Contains(ParseError("mbs=1.5"), "expected a positive integer up to 16777216, found '1.5'"));
}

TEST(ParseLayoutErrors, BadChoices) {
  const std::string zero = ParseError("zero=4");
  EXPECT_TRUE(Contains(zero, "layout key 'zero'"));
  EXPECT_TRUE(Contains(zero, "expected one of 0, 1, 2, 3, found '4'"));
  // A one-character value replaced wholesale is no typo: no "did you mean '0'".
  EXPECT_FALSE(Contains(zero, "did you mean"));
  const std::string sp = ParseError("sp=maybe");
  EXPECT_TRUE(Contains(sp, "layout key 'sp'"));
  EXPECT_TRUE(Contains(sp, "expected on or off, found 'maybe'"));
  EXPECT_TRUE(Contains(ParseError("schedule=interleave"), "did you mean 'interleaved'"));
  EXPECT_TRUE(Contains(ParseError("dtype=bf8"), "expected one of fp32, fp16, bf16, fp8"));
  EXPECT_TRUE(Contains(ParseError("compress=0.5"), "a compression ratio >= 1"));
  const std::string tp = ParseError("overlap_tp=backwards");
  EXPECT_TRUE(Contains(tp, "layout key 'overlap_tp'"));
  EXPECT_TRUE(Contains(tp, "expected one of off, backward, on, found 'backwards'"));
  EXPECT_TRUE(Contains(tp, "did you mean 'backward'"));
  EXPECT_TRUE(Contains(ParseError("overlap_tp=maybe"), "expected one of off, backward, on"));
}

// The gradient bucket and ZeRO-3 live-parameter limits: counts of parameters, bounded.
TEST(ParseLayoutErrors, BucketAndLiveParams) {
  EXPECT_EQ(MustParse("bucket_params=40000000").bucket_params, 40000000);
  EXPECT_EQ(MustParse("live_params=1").live_params, 1);
  EXPECT_EQ(MustParse("mbs=1").bucket_params, 0);              // default: a bucket per unit
  EXPECT_EQ(MustParse("mbs=1").live_params, 1000000000);       // DeepSpeed's default
  EXPECT_TRUE(Contains(ParseError("bucket_params=-1"), "expected an integer from 0 to"));
  EXPECT_TRUE(Contains(ParseError("bucket_params=1e9"), "found '1e9'"));
  EXPECT_TRUE(Contains(ParseError("bucket_params=99999999999999999999"), "expected an integer from 0 to"));
  EXPECT_TRUE(Contains(ParseError("live_params=0"), "a positive number of parameters"));
  EXPECT_TRUE(Contains(ParseError("bucket_param=1"), "did you mean 'bucket_params'"));
  const Layout l = MustParse("bucket_params=123,live_params=456");
  EXPECT_EQ(FormatLayout(l).find("bucket_params=123,live_params=456") != std::string::npos, true);
}

TEST(ParseLayoutErrors, Syntax) {
  EXPECT_TRUE(Contains(ParseError("tp=2,tp=4"), "key 'tp' given twice"));
  EXPECT_TRUE(Contains(ParseError("tp"), "'tp' is not 'key=value'"));
  EXPECT_TRUE(Contains(ParseError("tp="), "'tp=' is not 'key=value'"));
  EXPECT_TRUE(Contains(ParseError("=2"), "'=2' is not 'key=value'"));
  EXPECT_TRUE(Contains(ParseError("tp=2,"), "'' is not 'key=value' (in 'tp=2,')"));
  EXPECT_TRUE(Contains(ParseError(""), "empty spec"));
}

// --- ParseLayoutYaml ---------------------------------------------------------------------------

TEST(ParseLayoutYaml, SameKeysAsTheSpec) {
  StatusOr<Layout> y = ParseLayoutYaml(
      "tp: 8\npp: 8\nvpp: 2\nmbs: 1\ngbs: 1536\nsp: on\nrecompute: selective\nzero: 1\n",
      "layout.yaml");
  ASSERT_TRUE(y.ok()) << y.status().message();
  const Layout s = MustParse("tp=8,pp=8,vpp=2,mbs=1,gbs=1536,sp=on,recompute=selective,zero=1");
  EXPECT_EQ(FormatLayout(*y), FormatLayout(s));
  EXPECT_EQ(y->tp, 8);
  EXPECT_TRUE(y->sp);
}

TEST(ParseLayoutYaml, UnknownKeyIsLocated) {
  // "tpp" is on line 3, column 1.
  StatusOr<Layout> y = ParseLayoutYaml("tp: 8\npp: 8\ntpp: 2\n", "layout.yaml");
  ASSERT_FALSE(y.ok());
  const std::string& e = y.status().message();
  EXPECT_EQ(e.rfind("layout.yaml:3:1: ", 0), 0u) << e;
  EXPECT_TRUE(Contains(e, "unknown key"));
  EXPECT_TRUE(Contains(e, "did you mean 'tp'"));
}

TEST(ParseLayoutYaml, BadValueIsLocatedAtTheValue) {
  // "tp: abc": the value starts on line 2, column 5.
  StatusOr<Layout> y = ParseLayoutYaml("pp: 2\ntp: abc\n", "layout.yaml");
  ASSERT_FALSE(y.ok());
  const std::string& e = y.status().message();
  EXPECT_EQ(e.rfind("layout.yaml:2:5: ", 0), 0u) << e;
  EXPECT_TRUE(Contains(e, "expected a positive integer up to 16777216, found 'abc'"));
  StatusOr<Layout> zero = ParseLayoutYaml("zero: 4\n", "layout.yaml");
  ASSERT_FALSE(zero.ok());
  EXPECT_TRUE(Contains(zero.status().message(), "layout.yaml:1:7: "));
}

TEST(ParseLayoutYaml, DuplicateKeyAndNonMap) {
  StatusOr<Layout> dup = ParseLayoutYaml("tp: 2\ntp: 4\n", "layout.yaml");
  ASSERT_FALSE(dup.ok());
  EXPECT_TRUE(Contains(dup.status().message(), "more than once"));
  StatusOr<Layout> list = ParseLayoutYaml("- tp: 2\n", "layout.yaml");
  ASSERT_FALSE(list.ok());
  EXPECT_TRUE(Contains(list.status().message(), "expected a map"));
}

// --- CheckLayout -------------------------------------------------------------------------------

class CheckLayoutTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StatusOr<ModelSpec> gpt3 = LoadModel("gpt3-175b");
    StatusOr<ModelSpec> mixtral = LoadModel("mixtral-8x7b");
    StatusOr<HardwareSpec> hw = LoadHardware("dgx-a100-80gb");
    ASSERT_TRUE(gpt3.ok() && mixtral.ok() && hw.ok());
    gpt3_ = *gpt3;
    mixtral_ = *mixtral;
    a100_ = *hw;
  }
  // Resolves `spec` for `gpus` and checks it; gpt3-175b (96 layers, 96 heads, ffn 49152) on
  // dgx-a100-80gb (128 nodes x 8 GPUs) unless told otherwise.
  LayoutCheck Check(const std::string& spec, int64_t gpus = 1024, const ModelSpec* m = nullptr) {
    return CheckLayout(MustResolve(spec, gpus), m ? *m : gpt3_, a100_, gpus);
  }
  static bool Has(const std::vector<std::string>& list, const std::string& part) {
    for (const std::string& s : list) {
      if (s.find(part) != std::string::npos) return true;
    }
    return false;
  }
  static std::string All(const LayoutCheck& c) {
    std::string s = "errors:";
    for (const std::string& e : c.errors) s += "\n  " + e;
    s += "\nwarnings:";
    for (const std::string& w : c.warnings) s += "\n  " + w;
    return s;
  }
  ModelSpec gpt3_, mixtral_;
  HardwareSpec a100_;
};

TEST_F(CheckLayoutTest, TheCliDefaultIsValid) {
  // tp 8 x pp 8 x dp 16 = 1024; 96 layers / (pp 8 x vpp 2) = 6; 1536 / 16 = 96 micro-batches,
  // a multiple of pp = 8 as the interleaved schedule needs.
  const LayoutCheck c = Check("tp=8,pp=8,vpp=2,mbs=1,gbs=1536,sp=on,recompute=selective");
  EXPECT_TRUE(c.ok()) << All(c);
  EXPECT_TRUE(c.warnings.empty()) << All(c);
  EXPECT_TRUE(c.ToStatus().ok());
}

TEST_F(CheckLayoutTest, TpAcrossNodesIsAWarningNotAnError) {
  // tp 16 > 8 GPUs per node: a warning. 96 % 16 == 0 and 49152 % 16 == 0: no error.
  // dp = 1024 / (16 x 4) = 16; gbs 256 = 16 micro-batches of 16 x 1.
  const LayoutCheck c = Check("tp=16,pp=4,gbs=256");
  EXPECT_TRUE(c.ok()) << All(c);
  EXPECT_TRUE(Has(c.warnings, "tp=16 crosses nodes (8 GPUs per node)")) << All(c);
  EXPECT_FALSE(Has(c.errors, "heads")) << All(c);
}

TEST_F(CheckLayoutTest, TpMustDivideHeads) {
  const LayoutCheck c = Check("tp=5");
  EXPECT_TRUE(Has(c.errors, "tp=5 does not divide heads=96")) << All(c);
  EXPECT_TRUE(Has(c.errors, "tp=5 does not divide ffn_hidden=49152")) << All(c);
  // 5 and 8 GPUs per node: some TP groups straddle nodes.
  EXPECT_TRUE(Has(c.warnings, "does not divide the 8 GPUs per node")) << All(c);
}

TEST_F(CheckLayoutTest, WorldMustMatchTheGpuCount) {
  // dp 8 given: 8 x 8 x 8 x 1 = 512 of 1024 GPUs.
  const LayoutCheck c = Check("tp=8,pp=8,dp=8");
  EXPECT_TRUE(Has(c.errors, "tp x pp x dp x cp = 8x8x8x1 = 512 but 1024 GPUs")) << All(c);
  // More GPUs than the cluster has: 2048 > 128 x 8.
  const LayoutCheck big = Check("tp=8,pp=8", 2048);
  EXPECT_TRUE(Has(big.errors, "2048 GPUs requested but dgx-a100-80gb has 1024")) << All(big);
}

TEST_F(CheckLayoutTest, GlobalBatchMustSplitIntoMicroBatches) {
  // dp 16 x mbs 1 = 16 does not divide 1537.
  const LayoutCheck c = Check("tp=8,pp=8,gbs=1537");
  EXPECT_TRUE(Has(c.errors, "gbs=1537 is not divisible by dp x mbs = 16x1 = 16")) << All(c);
}

TEST_F(CheckLayoutTest, PipelineSchedulesAndVirtualStages) {
  // schedule=interleaved with vpp 1.
  LayoutCheck c = Check("tp=8,pp=8,schedule=interleaved,gbs=128");
  EXPECT_TRUE(Has(c.errors, "schedule=interleaved needs vpp >= 2")) << All(c);
  // vpp 2 forced onto 1f1b.
  c = Check("tp=8,pp=8,vpp=2,schedule=1f1b,gbs=128");
  EXPECT_TRUE(Has(c.errors, "vpp=2 needs schedule=interleaved (found 1f1b)")) << All(c);
  // pp 32 x vpp 2 = 64 does not divide 96 layers (96 = 1.5 x 64); dp = 1024 / 256 = 4.
  c = Check("tp=8,pp=32,vpp=2,gbs=128");
  EXPECT_TRUE(Has(c.errors, "layers=96 is not divisible by pp x vpp = 32x2 = 64")) << All(c);
  // Interleaving needs the micro-batch count to be a multiple of pp: gbs 1040 / dp 16 = 65
  // micro-batches, not a multiple of 8.
  c = Check("tp=8,pp=8,vpp=2,gbs=1040");
  EXPECT_TRUE(Has(c.errors, "micro-batches per iteration (65) must be a multiple of pp=8"))
      << All(c);
  // Too few micro-batches to fill the pipeline is legal but warned: gbs 64 / 16 = 4 < 8.
  c = Check("tp=8,pp=8,gbs=64");
  EXPECT_TRUE(c.ok()) << All(c);
  EXPECT_TRUE(Has(c.warnings, "4 micro-batches for pp=8 stages")) << All(c);
}

TEST_F(CheckLayoutTest, ExpertParallelism) {
  // On a dense model.
  LayoutCheck c = Check("tp=8,pp=8,ep=2");
  EXPECT_TRUE(Has(c.errors, "ep=2 but model gpt3-175b has no experts")) << All(c);
  // Mixtral (8 experts) on 64 GPUs: tp 2 x pp 4 x dp 8, ep 8 divides both 8 experts and dp.
  c = Check("tp=2,pp=4,ep=8,gbs=64", 64, &mixtral_);
  EXPECT_TRUE(c.ok()) << All(c);
  // ep 3 divides neither the 8 experts nor the stage's tp 2 x cp 1 x dp 8 = 16 ranks over the
  // experts' TP 2 (ep x etp = 6 does not divide 16).
  c = Check("tp=2,pp=4,ep=3,gbs=64", 64, &mixtral_);
  EXPECT_TRUE(Has(c.errors, "ep=3 does not divide experts=8")) << All(c);
  EXPECT_TRUE(Has(c.errors, "ep x etp = 3x2 does not divide tp x cp x dp = 2x1x8 = 16")) << All(c);
  // Folded over CP (Megatron-Core's MoE parallel folding): tp 2 x pp 4 x cp 2 x dp 4 on 64 GPUs,
  // ep 8 does not divide dp 4 but divides cp x dp = 8: legal.
  c = Check("tp=2,pp=4,cp=2,ep=8,sp=on,gbs=64", 64, &mixtral_);
  EXPECT_TRUE(c.ok()) << All(c);
}

TEST_F(CheckLayoutTest, ExpertTensorParallelism) {
  // etp=1 with tp 2: EP 8 folds over a stage's tp 2 x dp 8 = 16 ranks (ep x etp = 8 divides 16;
  // expert DP 2).
  LayoutCheck c = Check("tp=2,pp=4,ep=8,etp=1,sp=on,gbs=64", 64, &mixtral_);
  EXPECT_TRUE(c.ok()) << All(c);
  // ep 16 x etp 1 = 16 divides the 16 ranks, but not Mixtral's 8 experts.
  c = Check("tp=2,pp=4,ep=16,etp=1,sp=on,gbs=64", 64, &mixtral_);
  EXPECT_TRUE(Has(c.errors, "ep=16 does not divide experts=8")) << All(c);
  // Without SP every TP rank would hold the same tokens: refused.
  c = Check("tp=2,pp=4,ep=8,etp=1,gbs=64", 64, &mixtral_);
  EXPECT_TRUE(Has(c.errors, "etp=1 with tp=2 needs sp=on")) << All(c);
  // etp 4 x ep 8 = 32 does not divide the stage's 16 ranks.
  c = Check("tp=2,pp=4,ep=8,etp=4,sp=on,gbs=64", 64, &mixtral_);
  EXPECT_TRUE(Has(c.errors, "ep x etp = 8x4 does not divide tp x cp x dp = 2x1x8 = 16")) << All(c);
  // Mixtral's expert width 14336 is not divisible by etp 3 (14336 = 2^11 x 7).
  c = Check("tp=2,pp=4,ep=2,etp=3,sp=on,gbs=48", 48, &mixtral_);
  EXPECT_TRUE(Has(c.errors, "etp=3 does not divide moe.ffn_hidden=14336")) << All(c);
  // On a dense model.
  c = Check("tp=8,pp=8,etp=1");
  EXPECT_TRUE(Has(c.errors, "etp=1 but model gpt3-175b has no experts")) << All(c);
}

TEST_F(CheckLayoutTest, OffloadNeedsZero) {
  LayoutCheck c = Check("tp=8,pp=8,offload=optimizer");
  EXPECT_TRUE(Has(c.errors, "offload=optimizer needs zero >= 1")) << All(c);
  c = Check("tp=8,pp=8,offload=optimizer+params,zero=1");
  EXPECT_TRUE(Has(c.errors, "offload=optimizer+params needs zero=3")) << All(c);
  c = Check("tp=8,pp=8,offload=optimizer,zero=1");
  EXPECT_FALSE(Has(c.errors, "offload")) << All(c);
}

// LayoutValue gives, key by key, what FormatLayout writes (and the keys it leaves out:
// schedule and dtype not given, fp8_params off); a stack rule reads it.
TEST(ParseLayout, LayoutValueIsWhatFormatLayoutWrites) {
  for (const char* spec : {"tp=8,pp=8,vpp=2,mbs=1,gbs=1536,sp=on,recompute=selective",
                           "tp=2,pp=4,dp=3,cp=2,ep=1,mbs=4,gbs=96,zero=3,schedule=zb-v,dtype=fp8,fp8_params=on,"
                           "offload=optimizer+params,compress=2.5,overlap_dp=off,overlap_tp=backward,overlap_pp=on,"
                           "prefetch=off,attention=unfused,bucket_params=7,live_params=12"}) {
    const StatusOr<Layout> l = ParseLayout(spec);
    ASSERT_TRUE(l.ok()) << l.status().message();
    for (const std::string& item : Split(FormatLayout(*l), ',')) {
      const size_t eq = item.find('=');
      EXPECT_EQ(LayoutValue(*l, item.substr(0, eq)), item.substr(eq + 1)) << spec << ": " << item;
    }
  }
  const StatusOr<Layout> d = ParseLayout("tp=1");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(LayoutValue(*d, "schedule"), "1f1b");
  EXPECT_EQ(LayoutValue(*d, "dtype"), "bf16");
  EXPECT_EQ(LayoutValue(*d, "fp8_params"), "off");
  EXPECT_EQ(LayoutValue(*d, "tpp"), std::nullopt);
}

// fp8_params is an fp8 switch: written only when on, and an error without dtype=fp8.
TEST_F(CheckLayoutTest, Fp8ParamsNeedsFp8) {
  const StatusOr<Layout> on = ParseLayout("tp=8,pp=8,fp8_params=on,dtype=fp8");
  ASSERT_TRUE(on.ok()) << on.status().message();
  EXPECT_TRUE(on->fp8_params);
  EXPECT_NE(FormatLayout(*on).find(",fp8_params=on"), std::string::npos) << FormatLayout(*on);
  const StatusOr<Layout> off = ParseLayout("tp=8,pp=8,fp8_params=off");
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(FormatLayout(*off).find("fp8_params"), std::string::npos) << FormatLayout(*off);
  const LayoutCheck c = Check("tp=8,pp=8,fp8_params=on");
  EXPECT_TRUE(Has(c.errors, "fp8_params=on stores Transformer Engine's weights in fp8: it needs dtype=fp8, found dtype=bf16"))
      << All(c);
}

TEST_F(CheckLayoutTest, UnsupportedDtype) {
  // The A100 file has no fp8 peak.
  const LayoutCheck c = Check("tp=8,pp=8,dtype=fp8");
  EXPECT_TRUE(Has(c.errors, "dtype=fp8 is not supported by NVIDIA A100-SXM4-80GB")) << All(c);
}

TEST_F(CheckLayoutTest, ReturnsEveryReasonAtOnce) {
  // tp 5: heads, kv heads, ffn; world 5 x 1 x 204 = 1020 != 1024; interleaved without vpp or
  // pp; ep on a dense model; offload without ZeRO: eight errors in one call.
  const LayoutCheck c = Check("tp=5,ep=2,offload=optimizer,schedule=interleaved");
  const std::vector<std::string> expected = {
      "= 1020 but 1024 GPUs",
      "tp=5 does not divide heads=96",
      "tp=5 does not divide kv_heads=96",
      "tp=5 does not divide ffn_hidden=49152",
      "schedule=interleaved needs vpp >= 2",
      "schedule=interleaved needs pp >= 2",
      "ep=2 but model gpt3-175b has no experts",
      "offload=optimizer needs zero >= 1",
  };
  for (const std::string& e : expected) EXPECT_TRUE(Has(c.errors, e)) << e << "\n" << All(c);
  EXPECT_EQ(c.errors.size(), expected.size()) << All(c);
  // ToStatus joins them all into one message.
  const Status st = c.ToStatus();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message().rfind("invalid layout: ", 0), 0u);
  for (const std::string& e : expected) EXPECT_TRUE(Contains(st.message(), e));
}

// --- Placement ---------------------------------------------------------------------------------

TEST(Placement, CoordOfAndRankOfAreInverse) {
  const Layout l = MustResolve("tp=2,pp=2,dp=2,cp=2", 16);
  ASSERT_EQ(l.world(), 16);
  std::vector<bool> seen(16, false);
  for (int64_t r = 0; r < l.world(); ++r) {
    const RankCoord c = CoordOf(l, r);
    EXPECT_EQ(RankOf(l, c), r);
    EXPECT_TRUE(c.tp < 2 && c.cp < 2 && c.dp < 2 && c.pp < 2);
    seen[r] = true;
  }
  // Order tp, cp, dp, pp (innermost first): rank 13 = 1 + 2*(0 + 2*(1 + 2*1)) -> tp 1, cp 0,
  // dp 1, pp 1.
  const RankCoord c = CoordOf(l, 13);
  EXPECT_EQ(c.tp, 1);
  EXPECT_EQ(c.cp, 0);
  EXPECT_EQ(c.dp, 1);
  EXPECT_EQ(c.pp, 1);
}

TEST(Placement, GroupsOfRankZero) {
  const Layout small = MustResolve("tp=2,pp=2,dp=2,cp=2", 16);
  EXPECT_EQ(GroupOf(small, 0, ParallelDim::kTp), (std::vector<int64_t>{0, 1}));
  // cp stride = tp = 2; dp stride = tp x cp = 4; pp stride = tp x cp x dp = 8.
  EXPECT_EQ(GroupOf(small, 0, ParallelDim::kCp), (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(GroupOf(small, 0, ParallelDim::kDp), (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(GroupOf(small, 0, ParallelDim::kPp), (std::vector<int64_t>{0, 8}));
  EXPECT_EQ(GroupOf(small, 7, ParallelDim::kTp), (std::vector<int64_t>{6, 7}));
  // DP x CP: tp 0 and pp 0, (dp, cp) = (0, 0), (0, 1), (1, 0), (1, 1) -> ranks 0, 2, 4, 6; rank
  // 11 (tp 1, cp 1, dp 0, pp 1) -> 9, 11, 13, 15.
  EXPECT_EQ(DpCpGroupOf(small, 0), (std::vector<int64_t>{0, 2, 4, 6}));
  EXPECT_EQ(DpCpGroupOf(small, 11), (std::vector<int64_t>{9, 11, 13, 15}));

  // tp 8, pp 8, dp 16 (1024 GPUs): the TP group is one node, dp stride 8, pp stride 128.
  const Layout big = MustResolve("tp=8,pp=8", 1024);
  ASSERT_EQ(big.dp, 16);
  std::vector<int64_t> tp, dp, pp;
  for (int64_t i = 0; i < 8; ++i) tp.push_back(i);
  for (int64_t i = 0; i < 16; ++i) dp.push_back(8 * i);
  for (int64_t i = 0; i < 8; ++i) pp.push_back(128 * i);
  EXPECT_EQ(GroupOf(big, 0, ParallelDim::kTp), tp);
  EXPECT_EQ(GroupOf(big, 0, ParallelDim::kDp), dp);
  EXPECT_EQ(GroupOf(big, 0, ParallelDim::kPp), pp);
}

TEST(Placement, ExpertGroupIsConsecutiveDpIndices) {
  // ep 4 within dp 16 (tp 8): rank 0's EP group is dp indices 0..3 -> ranks 0, 8, 16, 24;
  // rank 40 (dp 5) is in the second group, dp 4..7 -> ranks 32, 40, 48, 56.
  const Layout l = MustResolve("tp=8,pp=8,ep=4", 1024);
  EXPECT_EQ(GroupOf(l, 0, ParallelDim::kEp), (std::vector<int64_t>{0, 8, 16, 24}));
  EXPECT_EQ(GroupOf(l, 40, ParallelDim::kEp), (std::vector<int64_t>{32, 40, 48, 56}));
  // Its expert-data-parallel group: the same tp and EP index, every fourth dp index: rank 40
  // (dp 5, EP index 1) -> dp 1, 5, 9, 13 -> ranks 8, 40, 72, 104.
  EXPECT_EQ(EdpGroupOf(l, 40), (std::vector<int64_t>{8, 40, 72, 104}));
}

TEST(Placement, ExpertGroupsFoldTheStageAsMegatronCore) {
  // Megatron-Core's expert grid (parallel_state.py: RankGenerator over etp, ep, expert dp, pp,
  // order tp-cp-ep-dp-pp) numbers a stage's ranks etp fastest, then ep, then expert dp.
  // Grok-1 on 512 GPUs, tp 4, pp 8, cp 2, dp 8, ep 8, etp 1 (dgxc-benchmarking v25.05.02):
  // a stage holds 4 x 2 x 8 = 64 consecutive ranks; EP index = rank mod 8, expert DP index =
  // (rank mod 64) / 8. Rank 0's EP group is ranks 0..7 (one node: two TP groups, both CP
  // halves); rank 77 (stage 1, local 13) is in 72..79; its expert DP group is local 5, 13, ...,
  // 61 of stage 1 -> 69, 77, ..., 125.
  const Layout g = MustResolve("tp=4,pp=8,cp=2,ep=8,etp=1,sp=on", 512);
  ASSERT_EQ(g.dp, 8);
  EXPECT_EQ(g.edp(), 8);  // 4 x 2 x 8 / (1 x 8)
  EXPECT_EQ(GroupOf(g, 0, ParallelDim::kEp), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(GroupOf(g, 77, ParallelDim::kEp), (std::vector<int64_t>{72, 73, 74, 75, 76, 77, 78, 79}));
  EXPECT_EQ(EdpGroupOf(g, 77), (std::vector<int64_t>{69, 77, 85, 93, 101, 109, 117, 125}));
  EXPECT_EQ(GroupOf(g, 77, ParallelDim::kEtp), (std::vector<int64_t>{77}));
  // The same without etp (the experts' TP is tp 4): ep 8 x etp 4 = 32 of the stage's 64 ranks,
  // EP index = (local / 4) mod 8, so rank 0's EP group strides by 4 over CP x DP: 0, 4, ..., 28
  // (CP 0 and 1 of dp 0..3); the experts' TP group is the TP group; expert DP 2: 0, 32.
  const Layout h = MustResolve("tp=4,pp=8,cp=2,ep=8,sp=on", 512);
  EXPECT_EQ(h.edp(), 2);
  EXPECT_EQ(GroupOf(h, 0, ParallelDim::kEp), (std::vector<int64_t>{0, 4, 8, 12, 16, 20, 24, 28}));
  EXPECT_EQ(GroupOf(h, 0, ParallelDim::kEtp), GroupOf(h, 0, ParallelDim::kTp));
  EXPECT_EQ(EdpGroupOf(h, 0), (std::vector<int64_t>{0, 32}));
  // Qwen3-235B-A22B on 256 GPUs, tp 2, pp 8, ep 32, etp 1 (Megatron-Bridge): EP spans the
  // whole 32-rank stage (four 8-GPU nodes), expert DP 1.
  const Layout q = MustResolve("tp=2,pp=8,ep=32,etp=1,sp=on", 256);
  EXPECT_EQ(q.edp(), 1);
  const std::vector<int64_t> ep = GroupOf(q, 40, ParallelDim::kEp);
  ASSERT_EQ(ep.size(), 32u);
  EXPECT_EQ(ep.front(), 32);
  EXPECT_EQ(ep.back(), 63);
  EXPECT_EQ(EdpGroupOf(q, 40), (std::vector<int64_t>{40}));
}

TEST(ParseLayout, EtpEqualToTpIsTheDefault) {
  // etp=tp resolves to unset (not written); another value is kept and written after ep.
  const Layout same = MustResolve("tp=4,etp=4", 8);
  EXPECT_EQ(same.etp, 0);
  EXPECT_EQ(same.expert_tp(), 4);
  EXPECT_EQ(FormatLayout(same).find("etp"), std::string::npos);
  const Layout one = MustResolve("tp=4,etp=1", 8);
  EXPECT_EQ(one.expert_tp(), 1);
  EXPECT_NE(FormatLayout(one).find(",ep=1,etp=1,"), std::string::npos) << FormatLayout(one);
  EXPECT_EQ(LayoutValue(one, "etp"), "1");
  EXPECT_EQ(LayoutValue(same, "etp"), "4");
}

}  // namespace
}  // namespace shardsim
