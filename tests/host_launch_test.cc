// Kernel launches (Op::launches, op_time.h OpKernels) and the host floor (layer_plan.cc
// HostFloor): every kernel of an eager element-wise chain costs the device its kernel latency,
// and a pass takes at least its launches x the host's launch_overhead. Every expected value is
// worked by hand from the op lists in the comments.
#include <gtest/gtest.h>

#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "src/cost/estimate.h"
#include "src/cost/op_time.h"
#include "src/cost/ops.h"
#include "src/hardware/cluster.h"
#include "src/hardware/hardware_spec.h"
#include "src/io/megatron_args.h"
#include "src/io/nemo_overrides.h"
#include "src/layout/layout.h"
#include "src/layout/stack.h"
#include "src/layout/validate.h"
#include "src/model/model_spec.h"
#include "src/util/strings.h"
#include "src/report/compute_fit.h"
#include "src/report/estimate_report.h"
#include "src/sim/simulator.h"
#include "tests/find_op.h"
#include "tests/run_shardsim.h"
#include "tests/test_hardware.h"
#include "tests/test_models.h"

namespace shardsim {
namespace {

Layout L(const std::string& spec) {
  StatusOr<Layout> l = ParseLayout(spec);
  CHECK(l.ok()) << l.status().message();
  return *l;
}

// Eager (torchtitan without torch.compile): RMSNorm is x.float(), pow, mean, + eps, rsqrt, the
// multiply, type_as and the weight's multiply, 8 kernels (6 at fp32: the casts launch none);
// RoPE a cast, the complex multiply and a cast back for Q and again for K, 6 (2 at fp32); SiLU
// and the multiply, 2; the loss the logits' fp32 cast, log_softmax and the NLL gather, 3 (2 at
// fp32). Fused and compiled: one kernel each.
TEST(KernelLaunches, EagerChainsLaunchEachOp) {
  const ModelSpec m = testing::TinyModel(64);
  for (const char* dtype : {"bf16", "fp32"}) {
    SCOPED_TRACE(dtype);
    const bool fp32 = std::string(dtype) == "fp32";
    const Layout eager = L(std::string("mbs=1,gbs=1,kernels=eager,dtype=") + dtype);
    const std::vector<Op> ops = LayerOps(m, eager, false);
    EXPECT_EQ(testing::FindOp(ops, "norm1").launches, fp32 ? 6 : 8);
    EXPECT_EQ(testing::FindOp(ops, "norm2").launches, fp32 ? 6 : 8);
    EXPECT_EQ(testing::FindOp(ops, "rope").launches, fp32 ? 2 : 6);
    EXPECT_EQ(testing::FindOp(ops, "mlp_swiglu").launches, 2);
    EXPECT_EQ(testing::FindOp(ops, "wq").launches, 1);
    const std::vector<Op> head = HeadOps(m, eager);
    EXPECT_EQ(testing::FindOp(head, "final_norm").launches, fp32 ? 6 : 8);
    EXPECT_EQ(testing::FindOp(head, "cross_entropy").launches, fp32 ? 2 : 3);
    for (const char* kernels : {"fused", "compiled"}) {
      const Layout l = L(std::string("mbs=1,gbs=1,dtype=") + dtype + ",kernels=" + kernels);
      for (const Op& op : LayerOps(m, l, false)) EXPECT_EQ(op.launches, 1) << kernels << " " << op.name;
      for (const Op& op : HeadOps(m, l)) EXPECT_EQ(op.launches, 1) << kernels << " " << op.name;
    }
  }
}

// Each launch costs the device its kernel latency: on a GPU whose memory and math take no time
// to speak of (TwoGpuNode: 1e6 TB/s) with a 5 us latency, eager RMSNorm's forward takes 8 x 5 =
// 40 us and its backward (backward_factor 2: two passes of the chain) 16 x 5 = 80 us; the fused
// norm 5 and 10 us. An fp8 GEMM's input quantization is one more kernel (qkv's is its fused
// norm's, so proj: GEMM + cast, 2 x 5 us forward).
TEST(KernelLaunches, EveryKernelPaysTheDeviceLatency) {
  HardwareSpec hw = testing::TwoGpuNode("100 GB/s");
  hw.gpu.efficiency.kernel_latency_s = 5e-6;
  const ModelSpec m = testing::TinyModel(64);
  const Op eager = testing::FindOp(LayerOps(m, L("mbs=1,gbs=1,kernels=eager"), false), "norm1");
  const Op fused = testing::FindOp(LayerOps(m, L("mbs=1,gbs=1"), false), "norm1");
  EXPECT_NEAR(OpForwardTime(hw.gpu, DType::kBf16, eager), 40e-6, 1e-9);
  EXPECT_NEAR(OpBackwardTime(hw.gpu, DType::kBf16, eager), 80e-6, 1e-9);
  EXPECT_NEAR(OpForwardTime(hw.gpu, DType::kBf16, fused), 5e-6, 1e-9);
  EXPECT_NEAR(OpBackwardTime(hw.gpu, DType::kBf16, fused), 10e-6, 1e-9);
  EXPECT_EQ(OpForwardKernels(eager), 8);
  EXPECT_EQ(OpBackwardKernels(eager), 16);
  hw.gpu.peak_flops[DType::kFp8] = 200e12;
  const Op proj = testing::FindOp(LayerOps(m, L("mbs=1,gbs=1,dtype=fp8"), false), "proj");
  EXPECT_EQ(OpForwardKernels(proj), 2);
  EXPECT_EQ(OpBackwardKernels(proj), 3);  // dgrad, wgrad, the output gradient's quantization
}

// The host floor. TwoGpuNode's device does the tiny model's work in nanoseconds with no kernel
// latency; a 1 ms launch_overhead then sets every pass's pace. One GPU, one micro-batch, fused
// kernels, flash attention. A layer's forward launches norm1, qkv, rope, attention, proj,
// residual1, norm2, gate_up, swiglu, down, residual2: 11; its backward ceil(backward_factor) a
// kernel: 2 each but rope (1) and attention (2.5: 3), 22. The embedding 1 and 2; the head
// final_norm 1 + 2, lm_head 1 + 2, cross_entropy (backward_factor 0.5) 1 + 1: 3 and 5. So
// 4 x 33 + 3 + 8 = 143 launches, 143 ms of compute; the optimizer's step is not a pass (its
// time, 0 here, is apart). Without the overhead the compute takes tens of microseconds (the
// 64-row GEMMs fill a few of the 100 SMs: wave quantization), under 0.1 ms.
TEST(HostFloor, ALaunchBoundStepTakesTheHostsTime) {
  HardwareSpec hw = testing::TwoGpuNode("100 GB/s");
  const ModelSpec m = testing::TinyModel(64);
  const Layout l = L("tp=1,pp=1,dp=1,mbs=1,gbs=1,dtype=bf16");
  const Estimate device_bound = EstimateIteration(m, Cluster(hw, 1), l);
  EXPECT_LT(device_bound.time.compute, 1e-4);
  hw.node.host.launch_s = 1e-3;
  const Estimate host_bound = EstimateIteration(m, Cluster(hw, 1), l);
  EXPECT_NEAR(host_bound.time.compute, 0.143, 1e-9);
  StatusOr<SimResult> sim = Simulate(m, Cluster(hw, 1), l, SimOptions{});
  ASSERT_TRUE(sim.ok()) << sim.status().message();
  EXPECT_NEAR(sim->iteration_time_s, host_bound.iteration_time_s, 1e-9);
}

// The estimate says so: the same step's 4 x 11 + 1 + 3 = 48 forward and 4 x 22 + 2 + 5 = 95
// backward launches, 143 ms of the host against tens of microseconds of kernels: launch-bound.
TEST(HostFloor, TheEstimateSaysWhenItIsLaunchBound) {
  HardwareSpec hw = testing::TwoGpuNode("100 GB/s");
  hw.node.host.launch_s = 1e-3;
  const ModelSpec m = testing::TinyModel(64);
  const Estimate e = EstimateIteration(m, Cluster(hw, 1), L("tp=1,pp=1,dp=1,mbs=1,gbs=1,dtype=bf16"));
  const std::string text = EstimateText(m, hw, e);
  EXPECT_NE(text.find("kernel launches per micro-batch: 48 forward, 95 backward; at 1.000 ms each the host needs "
                      "143.000 ms"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("LAUNCH-BOUND"), std::string::npos);
  const std::string json = EstimateJson(m, hw, e);
  EXPECT_NE(json.find("\"kernel_launches\": {\n    \"forward\": 48,\n    \"backward\": 95,\n"
                      "    \"launch_overhead_s\": 0.001,"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"launch_bound\": true"), std::string::npos);
}

// CUDA graphs, on the launch-bound step above (1 ms a launch): cuda_graphs=layers replays
// each layer pass from one graph, one launch: 4 layers x (1 + 1) = 8 ms, the embedding's and
// the head's kernels still the host's own (1 + 2 and 3 + 5: 11 ms), 19 ms in all; the host
// launches 4 + 1 + 3 = 8 forward and 4 + 2 + 5 = 11 backward. cuda_graphs=step replays the
// whole step from one graph: no pass waits for the host, the step is the device's (under
// 0.1 ms, as without the overhead). The simulation agrees.
TEST(HostFloor, CudaGraphsLaunchOneGraphAPass) {
  HardwareSpec hw = testing::TwoGpuNode("100 GB/s");
  hw.node.host.launch_s = 1e-3;
  const ModelSpec m = testing::TinyModel(64);
  const Layout layers = L("tp=1,pp=1,dp=1,mbs=1,gbs=1,dtype=bf16,cuda_graphs=layers");
  const Estimate e = EstimateIteration(m, Cluster(hw, 1), layers);
  EXPECT_NEAR(e.time.compute, 0.019, 1e-9);
  StatusOr<SimResult> sim = Simulate(m, Cluster(hw, 1), layers, SimOptions{});
  ASSERT_TRUE(sim.ok()) << sim.status().message();
  EXPECT_NEAR(sim->iteration_time_s, e.iteration_time_s, 1e-9);
  const std::string text = EstimateText(m, hw, e);
  EXPECT_NE(text.find("kernel launches per micro-batch: 48 forward, 95 backward, replayed from CUDA graphs "
                      "(cuda_graphs=layers): the host launches 8 and 11, a graph a layer pass and the embedding's "
                      "and head's kernels; at 1.000 ms each the host needs 19.000 ms"),
            std::string::npos)
      << text;
  EXPECT_NE(EstimateJson(m, hw, e).find("\"cuda_graphs\": \"layers\",\n    \"host_forward\": 8,\n    \"host_backward\": 11,"),
            std::string::npos);

  const Estimate step = EstimateIteration(m, Cluster(hw, 1), L("tp=1,pp=1,dp=1,mbs=1,gbs=1,dtype=bf16,cuda_graphs=step"));
  EXPECT_LT(step.time.compute, 1e-4);
  EXPECT_EQ(FormatLayout(layers).find(",cuda_graphs=layers"), FormatLayout(layers).size() - 19);
  EXPECT_EQ(FormatLayout(L("tp=1")).find("cuda_graphs"), std::string::npos);  // off is not written
  EXPECT_FALSE(ParseLayout("cuda_graphs=on").ok());
}

// Who runs CUDA graphs: Megatron-Core 2024-25 does; the 2021 and 2022 Megatron stacks,
// DeepSpeed's ZeRO engine and torchtitan v0.2.2 refuse them. Megatron-LM's arguments read
// back: --cuda-graph-impl local and transformer_engine (each layer), full_iteration (the
// step), the deprecated --enable-cuda-graph (local; with --cuda-graph-scope full_iteration,
// the step) and --external-cuda-graph (transformer_engine); with --cuda-graph-impl, the
// deprecated ones are refused (validate_args).
TEST(HostFloor, CudaGraphsStacksAndArguments) {
  Layout l = L("tp=1,pp=1,dp=8,mbs=1,gbs=8,zero=1,cuda_graphs=layers");
  for (const char* name : {"megatron-core-2024"}) {
    StatusOr<StackSpec> s = LoadStack(name);
    ASSERT_TRUE(s.ok()) << s.status().message();
    EXPECT_FALSE(StackRefusal(*s, l).has_value()) << name;
  }
  // Each stack's base layout runs there; with graphs it is refused for them.
  for (const auto& [name, base] : std::vector<std::pair<std::string, std::string>>{
           {"megatron-lm-2021", "tp=1,pp=1,dp=8,mbs=1,gbs=8,zero=0,attention=unfused"},
           {"megatron-deepspeed-2022", "tp=1,pp=1,dp=8,mbs=1,gbs=8,zero=1,attention=unfused"},
           {"deepspeed-zero3", "tp=1,pp=1,dp=8,mbs=1,gbs=8,zero=3"},
           {"torchtitan-fsdp2", "tp=1,pp=1,dp=8,mbs=1,gbs=8,zero=3,kernels=compiled,live_params=1000000000000"}}) {
    StatusOr<StackSpec> s = LoadStack(name);
    ASSERT_TRUE(s.ok()) << s.status().message();
    Layout b = L(base);
    EXPECT_FALSE(StackRefusal(*s, b).has_value()) << name << ": " << StackRefusal(*s, b).value_or("");
    for (CudaGraphs g : {CudaGraphs::kLayers, CudaGraphs::kStep}) {
      b.cuda_graphs = g;
      const std::optional<std::string> why = StackRefusal(*s, b);
      ASSERT_TRUE(why.has_value()) << name;
      EXPECT_NE(why->find("cuda_graphs="), std::string::npos) << *why;
    }
  }
  const std::string model = "--num-layers 4 --hidden-size 1024 --num-attention-heads 16 --seq-length 2048 ";
  for (const auto& [args, graphs] : std::vector<std::pair<std::string, CudaGraphs>>{
           {"", CudaGraphs::kOff},
           {"--cuda-graph-impl none", CudaGraphs::kOff},
           {"--cuda-graph-impl local", CudaGraphs::kLayers},
           {"--cuda-graph-impl transformer_engine", CudaGraphs::kLayers},
           {"--cuda-graph-impl full_iteration --no-check-for-nan-in-loss-and-grad", CudaGraphs::kStep},
           {"--enable-cuda-graph", CudaGraphs::kLayers},
           {"--enable-cuda-graph --cuda-graph-scope full_iteration", CudaGraphs::kStep},
           {"--external-cuda-graph", CudaGraphs::kLayers}}) {
    StatusOr<MegatronRead> r = ParseMegatronArgs(model + args, "train.sh");
    ASSERT_TRUE(r.ok()) << args << ": " << r.status().message();
    EXPECT_EQ(r->layout.cuda_graphs, graphs) << args;
  }
  StatusOr<MegatronRead> both = ParseMegatronArgs(model + "--enable-cuda-graph --cuda-graph-impl local", "train.sh");
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("--cuda-graph-impl"), std::string::npos) << both.status().message();
}

// --cuda-graph-modules and its deprecated spelling --cuda-graph-scope are a closed,
// multi-valued choice (nargs '+'; Megatron-LM d98e8a64dd refuses the two together): full
// alone, the CudaGraphModule names, the deprecated full_iteration and
// full_iteration_inference. A module scope graphs part of each layer and is read as the whole
// layer with a warning; full_iteration moves the impl to the step (from none, with a warning
// that older Megatron-LM graphed nothing there); a typo is refused where it stands, with the
// nearest name, where before it read as per-layer graphs.
TEST(HostFloor, CudaGraphScopeIsAClosedChoice) {
  const std::string model = "--num-layers 4 --hidden-size 1024 --num-attention-heads 16 --seq-length 2048 ";
  struct Case {
    std::string args;
    CudaGraphs graphs;
    std::string warning;  // "" for none
  };
  for (const Case& c : std::vector<Case>{
           {"--cuda-graph-impl transformer_engine --cuda-graph-scope attn mlp", CudaGraphs::kLayers, "attn mlp graphs part"},
           {"--cuda-graph-impl transformer_engine --cuda-graph-scope full", CudaGraphs::kLayers, ""},
           {"--cuda-graph-impl local --cuda-graph-scope full_iteration", CudaGraphs::kStep, ""},
           {"--cuda-graph-scope full_iteration", CudaGraphs::kStep, "000c4ac24f61"},
           {"--cuda-graph-scope attn", CudaGraphs::kOff, ""},
           {"--cuda-graph-impl local --cuda-graph-scope full_iteration_inference", CudaGraphs::kLayers, ""},
           {"--cuda-graph-impl transformer_engine --cuda-graph-modules attn moe_router", CudaGraphs::kLayers,
            "--cuda-graph-modules attn moe_router graphs part"},
           {"--cuda-graph-impl local --cuda-graph-modules full_iteration", CudaGraphs::kStep, ""}}) {
    StatusOr<MegatronRead> r = ParseMegatronArgs(model + c.args, "train.sh");
    ASSERT_TRUE(r.ok()) << c.args << ": " << r.status().message();
    EXPECT_EQ(r->layout.cuda_graphs, c.graphs) << c.args;
    const std::string warnings = Join(r->warnings, "\n");
    if (c.warning.empty()) {
      EXPECT_EQ(warnings.find("--cuda-graph-scope"), std::string::npos) << c.args << ": " << warnings;
    } else {
      EXPECT_NE(warnings.find(c.warning), std::string::npos) << c.args << ": " << warnings;
    }
  }
  // Refused, each with where the flag stands (line 1; the flag's column) and why.
  for (const auto& [args, why] : std::vector<std::pair<std::string, std::string>>{
           {"--cuda-graph-impl local --cuda-graph-scope ful_iteration", "did you mean 'full_iteration'"},
           {"--cuda-graph-impl local --cuda-graph-scope full attn", "'full' cannot be used with other scopes"},
           {"--external-cuda-graph --cuda-graph-scope full_iteration", "cannot be combined with cuda_graph_impl 'transformer_engine'"},
           {"--cuda-graph-impl full_iteration --cuda-graph-scope mlp", "no module scope"},
           {"--cuda-graph-scope full_iteration full_iteration_inference", "at most one deprecated scope"},
           {"--cuda-graph-impl local --cuda-graph-scope attn --cuda-graph-modules mlp", "cannot be used together"},
           {"--cuda-graph-impl local --cuda-graph-modules atn", "did you mean 'attn'"}}) {
    StatusOr<MegatronRead> r = ParseMegatronArgs(model + args, "train.sh");
    ASSERT_FALSE(r.ok()) << args;
    EXPECT_NE(r.status().message().find(why), std::string::npos) << args << ": " << r.status().message();
    EXPECT_NE(r.status().message().find("train.sh:1:"), std::string::npos) << r.status().message();
  }
  // NeMo's model.config.cuda_graph_scope: a string or a Python list, the same names.
  const std::string nemo =
      "recipe.model.config.num_layers = 2\nrecipe.model.config.hidden_size = 1024\n"
      "recipe.model.config.num_attention_heads = 8\nrecipe.model.config.seq_length = 2048\n"
      "recipe.model.config.enable_cuda_graph = True\n";
  StatusOr<MegatronRead> step = ParseNemoOverrides(nemo + "recipe.model.config.cuda_graph_scope = \"full_iteration\"\n", "o.py");
  ASSERT_TRUE(step.ok()) << step.status().message();
  EXPECT_EQ(step->layout.cuda_graphs, CudaGraphs::kStep);
  StatusOr<MegatronRead> part = ParseNemoOverrides(nemo + "recipe.model.config.cuda_graph_scope = [\"attn\", \"mlp\"]\n", "o.py");
  ASSERT_TRUE(part.ok()) << part.status().message();
  EXPECT_EQ(part->layout.cuda_graphs, CudaGraphs::kLayers);
  EXPECT_NE(Join(part->warnings, "\n").find("attn mlp graphs part"), std::string::npos) << Join(part->warnings, "\n");
  StatusOr<MegatronRead> typo = ParseNemoOverrides(nemo + "recipe.model.config.cuda_graph_scope = \"atn\"\n", "o.py");
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.status().message().find("o.py:6:"), std::string::npos) << typo.status().message();
  EXPECT_NE(typo.status().message().find("did you mean 'attn'"), std::string::npos) << typo.status().message();
}

// `estimate` on a launch-bound step says what CUDA graphs would save: the DGX H100 with a
// 20 us host (5x the bundled 4 us), small-17m eager at one sequence a micro-batch, where the
// host's 149 + 278 launches a micro-batch outlast the kernels; the warning quotes the estimate
// of the same layout with cuda_graphs=layers (on the fitted description, as the command). The bundled 4 us host gives no such warning.
TEST(HostFloor, EstimateSaysWhatCudaGraphsWouldSave) {
  const std::string dir = testing::FreshTempDir("slow-host").string();
  std::ifstream in(std::string(SHARDSIM_SOURCE_DIR) + "/hardware/dgx-h100.yaml");
  std::stringstream text;
  text << in.rdbuf();
  std::string yaml = text.str();
  const std::string fast = "launch_overhead: \"4 us\"";
  ASSERT_NE(yaml.find(fast), std::string::npos);
  yaml.replace(yaml.find(fast), fast.size(), "launch_overhead: \"20 us\"");
  const std::string file = dir + "/slow-host.yaml";
  std::ofstream(file) << yaml;
  const std::string layout = "tp=1,pp=1,mbs=1,gbs=64,zero=1,kernels=eager";
  const testing::CommandResult r =
      testing::RunShardsim("estimate --model small-17m --hardware '" + file + "' --gpus 8 --layout " + layout);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  StatusOr<HardwareSpec> loaded = LoadHardware(file);
  StatusOr<ModelSpec> m = LoadModel("small-17m");
  ASSERT_TRUE(loaded.ok() && m.ok());
  HardwareSpec hw = *loaded;
  ApplyComputeFit(&hw, false);  // as the command does (compute_fit.h)
  Layout graphed = *ResolveLayoutFor(L(layout + ",cuda_graphs=layers"), 8, hw);
  const double with = EstimateIteration(*m, Cluster(hw, 8), graphed).iteration_time_s;
  EXPECT_NE(r.out.find("warning: launch-bound: with each layer replayed from a CUDA graph (cuda_graphs=layers; "
                       "Megatron-Core --cuda-graph-impl local) the step would take " + Fmt("%.4g", with) + " s"),
            std::string::npos)
      << r.out;
  const testing::CommandResult bundled =
      testing::RunShardsim("estimate --model small-17m --hardware dgx-h100 --gpus 8 --layout " + layout);
  ASSERT_EQ(bundled.exit_code, 0) << bundled.err;
  EXPECT_EQ(bundled.out.find("launch-bound:"), std::string::npos);
  // plan --fix cuda_graphs=layers plans with graphs and says their memory is not priced.
  const testing::CommandResult plan =
      testing::RunShardsim("plan --model tiny --hardware dgx-h100 --gpus 8 --global-batch 8 --fix cuda_graphs=layers --top 1");
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  EXPECT_NE(plan.out.find("warning: cuda_graphs=layers prices the host's launches only"), std::string::npos) << plan.out;
  EXPECT_NE(plan.out.find(",cuda_graphs=layers\n"), std::string::npos) << plan.out;
}

// Where the device is the slower, the host runs ahead and costs nothing: the bundled DGX H100
// (kernel_latency 5 us, launch_overhead 4 us: every kernel takes the device longer than the
// host) predicts the same step as without the overhead, even for the small model.
TEST(HostFloor, ADeviceBoundStepIsUnchanged) {
  StatusOr<HardwareSpec> loaded = LoadHardware("dgx-h100");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  HardwareSpec hw = *loaded;
  ASSERT_NEAR(hw.node.host.launch_s, 4e-6, 1e-12);
  const ModelSpec m = testing::TinyModel(64);
  const Layout l = L("tp=1,pp=1,dp=1,mbs=1,gbs=4,kernels=eager");
  const double with = EstimateIteration(m, Cluster(hw, 1), l).iteration_time_s;
  hw.node.host.launch_s = 0;
  EXPECT_DOUBLE_EQ(EstimateIteration(m, Cluster(hw, 1), l).iteration_time_s, with);
}

// The loader: launch_overhead is a time, optional (0), at most 1 ms.
TEST(HostFloor, LaunchOverheadIsReadAndBounded) {
  const std::string base = testing::TwoGpuNodeYaml("100 GB/s");
  const std::string from = "link_latency: \"0 us\"}";
  ASSERT_NE(base.find(from), std::string::npos);
  auto with = [&](const std::string& value) {
    std::string y = base;
    y.replace(y.find(from), from.size(), "link_latency: \"0 us\", launch_overhead: \"" + value + "\"}");
    return ParseHardwareYaml(y, "two");
  };
  StatusOr<HardwareSpec> ok = with("4 us");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_NEAR(ok->node.host.launch_s, 4e-6, 1e-15);
  StatusOr<HardwareSpec> none = ParseHardwareYaml(base, "two");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->node.host.launch_s, 0);
  StatusOr<HardwareSpec> slow = with("2 ms");
  ASSERT_FALSE(slow.ok());
  EXPECT_NE(slow.status().message().find("launch_overhead"), std::string::npos) << slow.status().message();
  StatusOr<HardwareSpec> unit = with("4 GB");
  ASSERT_FALSE(unit.ok());
  EXPECT_NE(unit.status().message().find("launch_overhead"), std::string::npos) << unit.status().message();
}

}  // namespace
}  // namespace shardsim
