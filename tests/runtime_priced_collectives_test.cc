// The runtime executes the collectives the layer plan prices (issue 13): for every layout the
// CPU runtime trains (the layouts of the MPI equivalence tests, and 8-rank hybrids), every rank
// is run alone for two steps through EmulatedCollectives (the same executor code and calls as
// under mpirun; emulated_collectives.h) wrapped in a RecordingCollectives, and the second
// step's calls, by kind, group and bytes, must equal with their counts the calls the plan
// lists for the rank's stage (src/cost/stage_calls.h). Both sides are exact integers of bytes:
// the expected values come from the plan, the observed ones from the executor; neither is
// computed from the other. Under offload the bytes the step moves between device and host
// memory are checked the same way (StageHostTransferBytes against the runtime's offload spans).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/backend/emulated_collectives.h"
#include "runtime/backend/recording_collectives.h"
#include "runtime/cpu/cpu_backend.h"
#include "runtime/cpu/markov_stream.h"
#include "runtime/exec/executor.h"
#include "src/cost/layer_plan.h"
#include "src/cost/ops.h"
#include "src/cost/stage_calls.h"
#include "src/layout/placement.h"
#include "src/layout/validate.h"
#include "tests/test_models.h"

namespace shardsim {
namespace {

using runtime::CallKey;
using runtime::CallKind;
using runtime::Group;

std::string Describe(const std::map<CallKey, int64_t>& calls) {
  std::ostringstream os;
  for (const auto& [key, count] : calls) {
    const auto& [kind, group, bytes] = key;
    os << "  " << count << " x " << runtime::CallKindName(kind) << " " << runtime::GroupName(group)
       << " " << bytes << " B\n";
  }
  return os.str();
}

// The plan's calls for `stage`, keyed as the recorder keys the runtime's.
std::map<CallKey, int64_t> Priced(const Layout& l, const IterationPlan& plan, int32_t stage) {
  std::map<CallKey, int64_t> out;
  for (const StageCall& c : StageCalls(l, plan, plan.stages[stage])) {
    CallKind kind = CallKind::kSend;
    Group group = Group::kPp;
    if (c.kind == TaskKind::kCollective) {
      switch (c.collective) {
        case Collective::kAllReduce: kind = CallKind::kAllReduce; break;
        case Collective::kReduceScatter: kind = CallKind::kReduceScatter; break;
        case Collective::kAllGather: kind = CallKind::kAllGather; break;
        case Collective::kAllToAll: kind = CallKind::kAllToAll; break;
        default: ADD_FAILURE() << "the runtime has no " << CollectiveName(c.collective);
      }
      switch (c.group) {
        case GroupKind::kTp: group = Group::kTp; break;
        case GroupKind::kDp: group = Group::kDp; break;
        case GroupKind::kCp: group = Group::kCp; break;
        case GroupKind::kEp: group = Group::kEp; break;
        case GroupKind::kEdp: group = Group::kEdp; break;
        case GroupKind::kEtp: group = Group::kEtp; break;
        default: ADD_FAILURE() << "the runtime has no group " << GroupKindName(c.group);
      }
    }
    out[CallKey{kind, group, std::llround(c.bytes)}] += c.count;
  }
  return out;
}

// An MoE layer's all-to-alls, priced as this rank's tokens x top_k x hidden each (balanced
// routing: the plan's moe_imbalance = 1). The token side of each exchange, the dispatch and its
// gradients' (this rank's kept slots), is that exactly; the expert side, the combine and the
// inputs' gradients (the rows this rank's experts received), depends on the routing. So the
// all-to-alls are compared by count, and at least half of them (the token side) must move
// exactly the priced bytes; every other call keeps its exact key. Under Megatron-Core's
// dispatcher with TP (ops.h MoeInputSplitOverTp) the experts' tokens gathered over TP and
// their outputs reduce-scattered are priced at the balanced T x top_k rows (`expert_tp_bytes`);
// the runtime's blocks are the busiest TP rank's received rows, which depend on the routing
// (and on the emulated ranks' routing here): those at no priced size are compared by count.
std::map<CallKey, int64_t> ExceptAllToAllBytes(const std::map<CallKey, int64_t>& calls,
                                               const std::map<CallKey, int64_t>& priced,
                                               double expert_tp_bytes = 0) {
  std::map<CallKey, int64_t> out;
  int64_t all = 0, exact = 0;
  for (const auto& [key, count] : calls) {
    const auto& [kind, group, bytes] = key;
    if (expert_tp_bytes > 0 && (group == Group::kTp || group == Group::kEtp) &&
        (kind == CallKind::kAllGather || kind == CallKind::kReduceScatter) &&
        (static_cast<double>(bytes) == expert_tp_bytes || !priced.contains(key))) {
      out[CallKey{kind, group, -1}] += count;
      continue;
    }
    if (kind != CallKind::kAllToAll) {
      out[key] += count;
      continue;
    }
    all += count;
    if (priced.contains(key)) exact += count;
    out[CallKey{kind, group, -1}] += count;
  }
  EXPECT_GE(2 * exact, all) << "of " << all << " all-to-alls, " << exact << " move the priced bytes";
  return out;
}

void ExpectSameCalls(const ModelSpec& m, const std::string& spec) {
  SCOPED_TRACE(m.name + " " + spec);
  StatusOr<HardwareSpec> loaded = LoadHardware("cpu-host");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  HardwareSpec hw_spec = *loaded;
  HardwareSpec* hw = &hw_spec;
  // cpu-host has no bf16 rate; mixed-precision layouts are given one (only the calls matter).
  hw->gpu.peak_flops[DType::kBf16] = hw->gpu.peak_flops.at(DType::kFp32);
  const bool bf16 = spec.find("dtype=bf16") != std::string::npos;
  StatusOr<Layout> parsed = ParseLayout(spec + ",gbs=8" + (bf16 ? "" : ",dtype=fp32") +
                                        (spec.find("attention=") == std::string::npos ? ",attention=unfused" : ""));
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  const int64_t world = parsed->tp * parsed->pp * parsed->cp * std::max<int64_t>(parsed->dp, 1);
  hw->node.gpus = world;
  StatusOr<Layout> l = ResolveLayoutFor(*parsed, world, *hw);
  ASSERT_TRUE(l.ok()) << l.status().message();
  const LayoutCheck check = CheckLayout(*l, m, *hw, world);
  ASSERT_TRUE(check.ok()) << check.ToStatus().message();
  const IterationPlan plan = BuildIterationPlan(m, *hw, *l);
  const runtime::MarkovStream data({.vocab = m.vocab, .seed = 7});
  // Offload's host transfers (bytes a step moves between device and host memory), summed over
  // each stage's ranks: rank by rank they differ by ZeRO's padding, their sum is exact.
  std::map<int32_t, double> host_bytes, ranks_of_stage;
  for (int64_t r = 0; r < world; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    runtime::RecordingCollectives* rec = nullptr;
    runtime::CpuBackend backend([&](runtime::Memory& mem) {
      auto made = std::make_unique<runtime::RecordingCollectives>(
          std::make_unique<runtime::EmulatedCollectives>(*l, r, &mem));
      rec = made.get();
      return made;
    });
    runtime::Timeline timeline;
    StatusOr<std::unique_ptr<runtime::Executor>> exec =
        runtime::Executor::Create(m, *l, &backend, runtime::AdamWConfig{}, 1234, &timeline);
    ASSERT_TRUE(exec.ok()) << exec.status().message();
    ASSERT_TRUE((*exec)->Step(data, 0).ok());
    rec->Clear();  // the second step: what every step issues
    timeline.Clear();
    ASSERT_TRUE((*exec)->Step(data, 1).ok());
    const int32_t stage = static_cast<int32_t>(CoordOf(*l, r).pp);
    for (const runtime::TimelineEvent& e : timeline.events()) {
      if (e.phase == runtime::Phase::kOffload) host_bytes[stage] += e.bytes;
    }
    ranks_of_stage[stage] += 1;
    const std::map<CallKey, int64_t> priced = Priced(*l, plan, stage);
    if (world > 1) {
      EXPECT_FALSE(priced.empty());  // a layout over several ranks communicates
    }
    // The experts' tokens over their TP group (TP's, or their own under etp): the balanced rows
    // MoeExpertTokensPerRank of hidden (the runtime's activations fp32 or bf16).
    const double expert_tp_bytes =
        m.moe && MoeGathersOverExpertTp(*l) ? static_cast<double>(MoeExpertTokensPerRank(m, *l) * m.hidden) * (bf16 ? 2 : 4) : 0;
    const std::map<CallKey, int64_t> executed = ExceptAllToAllBytes(rec->calls(), priced, expert_tp_bytes);
    EXPECT_TRUE(executed == ExceptAllToAllBytes(priced, priced, expert_tp_bytes)) << "executed:\n" << Describe(rec->calls()) << "priced:\n"
                                                                 << Describe(priced);
  }
  for (const auto& [stage, ranks] : ranks_of_stage) {
    const double priced = StageHostTransferBytes(*l, plan, plan.stages[stage]) * ranks;
    EXPECT_NEAR(host_bytes[stage], priced, 1e-9 * priced) << "host transfers of stage " << stage;
    if (l->offload != Offload::kNone) {
      EXPECT_GT(priced, 0);  // an offloaded step moves bytes
    }
  }
}

TEST(RuntimePricedCollectivesTest, OneRank) {
  for (const char* spec : {"mbs=2", "mbs=2,recompute=full", "mbs=2,attention=flash", "mbs=2,dtype=bf16"}) {
    ExpectSameCalls(testing::TinyModel(32), spec);
  }
}

TEST(RuntimePricedCollectivesTest, DataParallelAndZero) {
  for (const char* spec : {"dp=2,mbs=2", "dp=2,mbs=2,overlap_dp=off", "dp=2,mbs=2,zero=1",
                           "dp=2,mbs=2,zero=1,overlap_dp=off", "dp=2,mbs=2,zero=2",
                           "dp=2,mbs=2,zero=2,overlap_dp=off", "dp=2,mbs=2,zero=3",
                           "dp=2,mbs=2,zero=3,recompute=full", "dp=2,mbs=2,zero=3,prefetch=off",
                           "dp=2,mbs=2,zero=2,dtype=bf16", "dp=2,mbs=2,zero=3,dtype=bf16",
                           "dp=2,mbs=2,zero=1,offload=optimizer", "dp=2,mbs=2,zero=2,offload=optimizer",
                           "dp=2,mbs=2,zero=3,offload=optimizer,overlap_dp=off",
                           "dp=2,mbs=1,zero=1,offload=optimizer,dtype=bf16",
                           "dp=2,mbs=2,zero=3,offload=optimizer,dtype=bf16",
                           "dp=2,mbs=2,zero=3,offload=optimizer+params",
                           "dp=2,mbs=1,zero=3,offload=optimizer+params,recompute=full,dtype=bf16"}) {
    ExpectSameCalls(testing::TinyModel(32), spec);
  }
}

TEST(RuntimePricedCollectivesTest, TensorParallel) {
  for (const char* spec : {"tp=2,mbs=2", "tp=2,sp=on,mbs=2", "tp=2,sp=on,mbs=2,recompute=selective",
                           "tp=2,sp=on,mbs=2,recompute=full", "tp=2,sp=on,mbs=2,attention=flash",
                           "tp=2,sp=on,mbs=2,overlap_tp=on", "tp=2,mbs=2,overlap_tp=on",
                           "tp=2,sp=on,mbs=2,overlap_tp=backward", "tp=2,mbs=2,overlap_tp=backward",
                           "tp=2,sp=on,mbs=2,dtype=bf16"}) {
    ExpectSameCalls(testing::TinyModel(32), spec);
  }
}

TEST(RuntimePricedCollectivesTest, Pipeline) {
  for (const char* spec : {"pp=2,mbs=2,schedule=1f1b", "pp=2,mbs=2,schedule=gpipe",
                           "pp=2,vpp=2,mbs=1,schedule=interleaved", "pp=2,mbs=2,recompute=full",
                           "pp=2,mbs=2,overlap_pp=off", "pp=2,mbs=2,schedule=zero-bubble",
                           "pp=2,vpp=2,mbs=1,schedule=zb-v", "pp=2,vpp=2,mbs=1,schedule=zb-v,recompute=full"}) {
    ExpectSameCalls(testing::TinyModel(32), spec);
  }
}

// Context parallelism (runtime/exec/context_parallel.h): per layer one all-gather of K and V over
// CP in the forward, one all-gather and one reduce-scatter of their gradients in the backward
// (another all-gather under full recompute), and the gradients reduced over DP x CP.
TEST(RuntimePricedCollectivesTest, ContextParallel) {
  for (const char* spec : {"cp=2,mbs=2", "cp=2,mbs=2,recompute=full", "cp=2,mbs=2,recompute=selective",
                           "cp=2,mbs=2,attention=flash", "cp=4,mbs=1", "cp=2,dp=2,mbs=2,zero=1",
                           "cp=2,dp=2,mbs=1,zero=2", "cp=2,dp=2,mbs=1,zero=3,dtype=bf16",
                           "cp=2,tp=2,sp=on,mbs=2", "cp=2,pp=2,mbs=1", "cp=2,pp=2,vpp=2,mbs=1,schedule=zb-v",
                           "cp=2,mbs=2,zero=1,offload=optimizer"}) {
    ExpectSameCalls(testing::TinyModel(32), spec);
  }
  ExpectSameCalls(testing::TinyGptModel(), "cp=2,mbs=2");
}

// The experts split over a TP group of their own (etp above 1, apart from tp: MoE parallel
// folding): the dispatcher all-gathers what the group received and reduce-scatters the experts'
// outputs over Group::kEtp, as the plan prices over GroupKind::kEtp; the experts' replicas
// reduced over tp x cp x dp / (etp x ep).
TEST(RuntimePricedCollectivesTest, ExpertsOverTheirOwnTpGroup) {
  for (const char* spec : {"dp=4,ep=2,etp=2,mbs=1", "dp=4,etp=2,mbs=1", "dp=4,etp=4,mbs=1", "tp=2,sp=on,dp=2,etp=4,mbs=1",
                           "dp=4,ep=2,etp=2,mbs=1,zero=1", "dp=4,ep=2,etp=2,mbs=1,zero=3", "cp=2,dp=2,ep=2,etp=2,mbs=1",
                           "dp=2,pp=2,etp=2,mbs=1,schedule=zero-bubble"}) {
    ExpectSameCalls(testing::TinyMoeModel(32), spec);
  }
}

// Expert parallelism (runtime/exec/moe_block.h): per MoE layer the dispatch and combine
// all-to-alls over EP in the forward and the same two in the backward (two more under full
// recompute), each this rank's kept slots x hidden (dropless: every token's top 2), and in the
// last micro-batch each layer's experts all-reduced over their dp / ep replicas.
TEST(RuntimePricedCollectivesTest, ExpertParallel) {
  for (const char* spec : {"mbs=2", "dp=2,mbs=2", "dp=2,ep=2,mbs=2", "dp=2,ep=2,mbs=1,recompute=full",
                           "dp=4,ep=2,mbs=1", "dp=4,ep=2,mbs=1,overlap_dp=off", "dp=2,ep=2,mbs=1,zero=1",
                           "dp=2,ep=2,mbs=1,zero=3", "dp=2,ep=2,pp=2,mbs=1", "dp=4,ep=4,mbs=1,zero=2,dtype=bf16",
                           "tp=2,mbs=2", "tp=2,sp=on,mbs=2", "tp=2,sp=on,dp=2,ep=2,mbs=1", "cp=2,mbs=2",
                           "cp=2,dp=2,ep=2,mbs=1", "cp=2,dp=4,ep=2,mbs=1", "dp=2,ep=2,pp=2,mbs=1,schedule=zero-bubble",
                           "dp=4,ep=2,pp=2,vpp=2,mbs=1,schedule=zb-v", "dp=4,ep=2,mbs=1,zero=1",
                           "dp=4,ep=2,mbs=1,zero=1,overlap_dp=off", "dp=4,ep=2,mbs=1,zero=2", "dp=4,ep=2,mbs=1,zero=3",
                           "dp=4,mbs=1,zero=3", "cp=2,dp=2,ep=2,mbs=1,zero=1",
                           "dp=2,ep=2,pp=2,mbs=1,zero=2,schedule=zero-bubble"}) {
    ExpectSameCalls(testing::TinyMoeModel(32), spec);
  }
}

// The experts whole under tp 2 (etp=1: Megatron-Core's MoE parallel folding): each TP rank's own
// tokens all-to-all over an EP group folded over TP x CP x DP, no TP exchange around or inside
// the MoE layer, and the experts reduced over their tp x cp x dp / ep replicas (without DP too:
// tp 2, etp 1 has two replicas of each expert, and ZeRO-1 shards their states over them alone,
// reduce-scattering and gathering the experts' buckets and leaving the dense ones whole).
TEST(RuntimePricedCollectivesTest, ExpertsWholeUnderTp) {
  for (const char* spec : {"tp=2,sp=on,etp=1,mbs=2", "tp=2,sp=on,etp=1,mbs=1,zero=1", "tp=2,sp=on,etp=1,mbs=1,zero=1,overlap_dp=off",
                           "tp=2,sp=on,pp=2,etp=1,mbs=1,zero=1", "tp=2,sp=on,dp=2,etp=1,mbs=1,zero=1",
                           "tp=2,sp=on,ep=2,etp=1,mbs=2", "tp=2,sp=on,dp=2,ep=4,etp=1,mbs=1",
                           "tp=2,sp=on,dp=2,ep=2,etp=1,mbs=1,zero=1", "tp=2,sp=on,dp=2,ep=2,etp=1,mbs=1,zero=3",
                           "tp=2,sp=on,cp=2,ep=4,etp=1,mbs=1", "tp=2,sp=on,pp=2,ep=2,etp=1,mbs=1,schedule=zero-bubble"}) {
    ExpectSameCalls(testing::TinyMoeModel(32), spec);
  }
}

// Zero-bubble's split backward: the weight gradients' buckets reduced from the W passes (every
// micro-batch under ZeRO-2/3), with TP and SP, and ZB-V on a tied model (its head and table on
// the first stage, the embedding group of one stage: no table all-reduce).
TEST(RuntimePricedCollectivesTest, ZeroBubble) {
  for (const char* spec : {"dp=2,pp=2,mbs=2,schedule=zero-bubble", "dp=2,pp=2,mbs=2,schedule=zero-bubble,zero=1",
                           "dp=2,pp=2,mbs=1,schedule=zero-bubble,zero=2", "dp=2,pp=2,vpp=2,mbs=1,schedule=zb-v,zero=3",
                           "tp=2,pp=2,dp=2,mbs=1,sp=on,schedule=zero-bubble,zero=2",
                           "tp=2,pp=2,vpp=2,mbs=1,sp=on,schedule=zb-v,overlap_tp=on,zero=1",
                           "dp=2,pp=2,vpp=2,mbs=1,schedule=zb-v,zero=2,overlap_dp=off"}) {
    ExpectSameCalls(testing::TinyModel(32), spec);
  }
  ModelSpec gpt = testing::TinyGptModel();
  gpt.layers = 4;
  for (const char* spec : {"pp=2,vpp=2,mbs=1,schedule=zb-v", "dp=2,pp=2,vpp=2,mbs=1,schedule=zb-v,zero=3",
                           "tp=2,pp=2,vpp=2,mbs=1,sp=on,schedule=zb-v"}) {
    ExpectSameCalls(gpt, spec);
  }
}

TEST(RuntimePricedCollectivesTest, Hybrid) {
  for (const char* spec : {"dp=2,tp=2,mbs=2", "tp=2,pp=2,mbs=2", "dp=2,pp=2,mbs=2",
                           "dp=2,tp=2,sp=on,zero=1,mbs=2", "tp=2,pp=2,sp=on,vpp=2,mbs=1,schedule=interleaved",
                           "dp=2,tp=2,sp=on,zero=2,mbs=2", "dp=2,pp=2,zero=3,mbs=2", "dp=2,tp=2,zero=3,mbs=2",
                           "dp=2,pp=2,vpp=2,mbs=1,schedule=interleaved,zero=1",
                           "tp=2,pp=2,dp=2,mbs=1,sp=on,zero=1", "tp=2,pp=2,dp=2,mbs=1,sp=on,zero=3",
                           "pp=2,dp=4,vpp=2,mbs=1,zero=3", "dp=2,tp=2,sp=on,zero=2,mbs=2,overlap_dp=off",
                           "dp=2,tp=2,sp=on,zero=1,mbs=2,overlap_dp=off,dtype=bf16",
                           "tp=2,pp=2,dp=2,mbs=1,sp=on,overlap_tp=on,zero=2",
                           "tp=2,pp=2,dp=2,mbs=1,sp=on,zero=1,offload=optimizer",
                           "pp=2,dp=4,vpp=2,mbs=1,zero=2,offload=optimizer",
                           "tp=2,pp=2,dp=2,mbs=1,sp=on,zero=3,offload=optimizer+params"}) {
    ExpectSameCalls(testing::TinyModel(32), spec);
  }
}

TEST(RuntimePricedCollectivesTest, GptStyle) {
  for (const char* spec : {"dp=2,mbs=2", "tp=2,mbs=2", "tp=2,sp=on,zero=1,mbs=2", "dp=2,zero=2,mbs=2",
                           "dp=2,zero=3,mbs=2", "tp=2,overlap_tp=on,mbs=2", "tp=2,overlap_tp=backward,mbs=2"}) {
    ExpectSameCalls(testing::TinyGptModel(), spec);
  }
}

// Gradient compression (compress=R: PowerSGD, src/cost/grad_compression.h): each part's
// [whole tensors ++ P] and Q all-reduces, with and without overlap_dp, over DP, CP, TP with SP
// (the router and the norms sent whole), pipelines, a tied table (sent whole), zero-bubble's W
// passes, MoE layers (experts uncompressed over their replicas).
TEST(RuntimePricedCollectivesTest, GradientCompression) {
  for (const char* spec : {"dp=2,mbs=2,compress=4", "dp=2,mbs=2,compress=4,overlap_dp=off", "dp=4,mbs=1,compress=16",
                           "cp=2,mbs=2,compress=8", "dp=2,tp=2,sp=on,mbs=2,compress=4",
                           "dp=2,pp=2,mbs=1,compress=4", "dp=2,pp=2,mbs=1,compress=4,schedule=zero-bubble",
                           "dp=2,mbs=2,compress=4,dtype=bf16", "dp=2,pp=2,vpp=2,mbs=1,schedule=interleaved,compress=3"}) {
    ExpectSameCalls(testing::TinyModel(32), spec);
  }
  ModelSpec gpt = testing::TinyGptModel();
  gpt.layers = 4;
  // (ZB-V keeps the tied head beside its table on the first stage: the runtime's exchange of a
  // table's two copies is point-to-point, the plan's an all-reduce over the embedding group, so
  // 1F1B's tied pipelines are not compared here. With tp, the row-parallel biases, whole on every
  // TP rank, go whole in the plan too since 2026-12-06: the gradient all-reduce's bytes agree.)
  for (const char* spec : {"dp=2,mbs=2,compress=4", "dp=2,pp=2,vpp=2,mbs=1,schedule=zb-v,compress=4",
                           "dp=2,pp=2,vpp=2,mbs=1,schedule=zb-v,compress=4,overlap_dp=off",
                           "dp=2,tp=2,sp=on,mbs=1,compress=4", "dp=2,tp=2,mbs=2"}) {
    ExpectSameCalls(gpt, spec);
  }
  for (const char* spec : {"dp=2,mbs=2,compress=4", "dp=4,ep=2,mbs=1,compress=4", "dp=2,tp=2,sp=on,mbs=1,compress=4"}) {
    ExpectSameCalls(testing::TinyMoeModel(32), spec);
  }
}

}  // namespace
}  // namespace shardsim
