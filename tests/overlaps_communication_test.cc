// gpu.overlaps_communication: parsed strictly, written back, and honoured by the simulator
// (false: every collective and send runs on the rank's compute stream) and so the estimate,
// which evaluates the same tasks (false: nothing is hidden). The cases run on one node of 2 GPUs whose figures make each
// expected value a sum of compute and collective times read from the cost model:
// 100 TFLOP/s bf16, memory and host links fast enough to cost nothing, no latencies, so an
// all-reduce of b bytes over 2 GPUs takes 2(n-1)/n · b / B = b / B exactly, and the costs of
// a set of collectives add up to the cost of one over their total bytes.
#include <gtest/gtest.h>

#include "src/cost/collective.h"
#include "src/cost/estimate.h"
#include "src/cost/memory.h"
#include "src/io/plan_file.h"
#include "src/sim/simulator.h"
#include "tests/contains.h"
#include "tests/test_hardware.h"
#include "tests/test_models.h"

namespace shardsim {
namespace {

// The ideal 2-GPU node (tests/test_hardware.h) at 200 GB/s, with `gpu_extra` in its gpu section.
std::string NodeYaml(const std::string& gpu_extra) {
  return testing::TwoGpuNodeYaml("200 GB/s", gpu_extra);
}

HardwareSpec Node(bool overlaps) {
  return testing::TwoGpuNode("200 GB/s", overlaps ? "" : "  overlaps_communication: false\n");
}

// L = 4 layers, h = 1024, 16 heads, 1024-token sequences, vocabulary 8 (a negligible head).
constexpr int64_t kLayers = 4;
ModelSpec Model() { return testing::GptModel(kLayers, 1024, 16, 8, 1024); }

// A layout spec resolved for the 2-GPU node (dtype bf16).
Layout L(const std::string& spec) {
  StatusOr<Layout> l = ParseLayout(spec);
  CHECK(l.ok()) << l.status().message();
  StatusOr<Layout> r = ResolveLayoutFor(*l, 2, Node(true));
  CHECK(r.ok()) << r.status().message();
  return *r;
}

// dp = 2, one micro-batch per rank, ZeRO-0.
Layout Dp2(bool overlap_dp) {
  return L(std::string("dp=2,mbs=1,gbs=2,overlap_dp=") + (overlap_dp ? "on" : "off"));
}

struct SimRun {
  double iteration_s, compute_s, dp_s;
};

SimRun Sim(bool overlaps, const Layout& l) {
  const Cluster cluster(Node(overlaps));
  StatusOr<SimResult> r = Simulate(Model(), cluster, l, SimOptions{});
  CHECK(r.ok()) << r.status().message();
  const RankResult& c = r->ranks[r->critical];
  return {r->iteration_time_s, c.breakdown_s[static_cast<int>(Category::kCompute)],
          c.breakdown_s[static_cast<int>(Category::kDp)]};
}

TEST(OverlapsCommunication, DefaultsToTrueAndParsesFalse) {
  EXPECT_TRUE(Node(true).gpu.overlaps_communication);
  EXPECT_FALSE(Node(false).gpu.overlaps_communication);
}

TEST(OverlapsCommunication, BadValueAndMisspelledKeyAreErrors) {
  StatusOr<HardwareSpec> bad =
      ParseHardwareYaml(NodeYaml("  overlaps_communication: sometimes\n"), "two");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(testing::Contains(bad.status().message(), "gpu.overlaps_communication"));
  EXPECT_TRUE(
      testing::Contains(bad.status().message(), "expected true or false, found 'sometimes'"));
  StatusOr<HardwareSpec> typo =
      ParseHardwareYaml(NodeYaml("  overlap_communication: false\n"), "two");
  ASSERT_FALSE(typo.ok());
  EXPECT_TRUE(testing::Contains(typo.status().message(), "did you mean 'overlaps_communication'"));
}

// Written only when false (the default leaves plan files and calibrated descriptions as they
// were), and read back as written.
TEST(OverlapsCommunication, SurvivesBeingWrittenAndReadBack) {
  for (bool overlaps : {true, false}) {
    const std::string yaml = HardwareYaml(Node(overlaps));
    EXPECT_EQ(yaml.find("overlaps_communication") == std::string::npos, overlaps) << yaml;
    StatusOr<HardwareSpec> back = ParseHardwareYaml(yaml, "written");
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(back->gpu.overlaps_communication, overlaps);
  }
}

// The CPU host's ranks drive MPI on their own cores; the GPU clusters overlap.
TEST(OverlapsCommunication, BundledDescriptions) {
  StatusOr<HardwareSpec> cpu = LoadHardware("cpu-host");
  ASSERT_TRUE(cpu.ok()) << cpu.status().message();
  EXPECT_FALSE(cpu->gpu.overlaps_communication);
  StatusOr<HardwareSpec> h100 = LoadHardware("dgx-h100");
  ASSERT_TRUE(h100.ok()) << h100.status().message();
  EXPECT_TRUE(h100->gpu.overlaps_communication);
}

// dp = 2, ZeRO-0: with overlap one gradient all-reduce per bucket (the final norm, each layer,
// the embeddings) in the last micro-batch's backward, without it one all-reduce of them all
// after the backward. A layer's bucket is g = 12.6 M params x 4 B (fp32 gradients under bf16)
// ≈ 50 MB, A = g / B ≈ 252 us at 200 GB/s, below one layer's backward (2 x (24·T·h² + 4·T²·h)
// FLOP ≈ 60 GFLOP -> ~600 us), so with overlap the buckets of layers L-1..1 run under the next
// layer's backward; layer 0's and the embeddings' (E: 8 x 1024 + 1024 x 1024 learned
// positions, the tied table counted once) follow the last compute (the embedding's backward is
// memory-bound: ~0 here), and the final norm's (H: 2 x 1024) hides under the layers'.
//   overlaps, overlap_dp off:  iteration = C + L·A + E + H  (one all-reduce after the compute)
//   overlaps, overlap_dp on:   iteration = C + A + E
//   serialised, either switch: iteration = C + L·A + E + H, all charged to dp.
TEST(OverlapsCommunicationSim, DataParallelAllReduceSerialisesWithCompute) {
  const double b = StateBytesPerParam(DType::kBf16).gradients;
  const double grads = static_cast<double>(Model().DenseLayerParams()) * b;
  const Cluster cluster(Node(true));
  const CollectiveModel comm(cluster);
  const double a = comm.Estimate(Collective::kAllReduce, {0, 1}, grads).time_s;
  const double e = comm.Estimate(Collective::kAllReduce, {0, 1}, (8.0 * 1024 + 1024.0 * 1024) * b).time_s;
  const double h = comm.Estimate(Collective::kAllReduce, {0, 1}, 2.0 * 1024 * b).time_s;
  ASSERT_NEAR(a, grads / 200e9, 1e-12);

  const SimRun off = Sim(true, Dp2(false));
  const SimRun on = Sim(true, Dp2(true));
  const SimRun serial_on = Sim(false, Dp2(true));
  const SimRun serial_off = Sim(false, Dp2(false));
  ASSERT_LT(a, off.compute_s / (3 * kLayers));  // A below a layer's backward
  EXPECT_NEAR(off.iteration_s - on.iteration_s, (kLayers - 1) * a + h, 1e-9);
  EXPECT_NEAR(on.dp_s, a + e, 1e-9);
  // Serialised: nothing hidden, the switch changes no time.
  EXPECT_NEAR(serial_on.iteration_s, off.iteration_s, 1e-9);
  EXPECT_NEAR(serial_off.iteration_s, off.iteration_s, 1e-9);
  EXPECT_NEAR(serial_on.dp_s, kLayers * a + e + h, 1e-9);
  EXPECT_NEAR(serial_on.compute_s, off.compute_s, 1e-9);
}

// The other overlap switches lose their effect the same way: TP (backward, on), ZeRO-3
// prefetch, pipeline sends (overlap_pp). Each pair runs the same work in one stream.
TEST(OverlapsCommunicationSim, OverlapSwitchesChangeNoTime) {
  auto check = [](const std::string& off, const std::string& on) {
    SCOPED_TRACE(on);
    EXPECT_NEAR(Sim(false, L(on)).iteration_s, Sim(false, L(off)).iteration_s, 1e-9);
    EXPECT_LT(Sim(true, L(on)).iteration_s, Sim(true, L(off)).iteration_s);  // where they act
  };
  check("tp=2,mbs=1,gbs=1,overlap_tp=off", "tp=2,mbs=1,gbs=1,overlap_tp=backward");
  check("tp=2,sp=on,mbs=1,gbs=1,overlap_tp=off", "tp=2,sp=on,mbs=1,gbs=1,overlap_tp=on");
  check("dp=2,zero=3,mbs=1,gbs=4,prefetch=off", "dp=2,zero=3,mbs=1,gbs=4,prefetch=on");
  check("pp=2,mbs=1,gbs=4,schedule=1f1b,overlap_pp=off",
        "pp=2,mbs=1,gbs=4,schedule=1f1b,overlap_pp=on");
}

// The estimate is the simulation's closed form (src/cost/estimate.h). On this node no two
// transfers of these layouts share a link at once (one TP, DP or pipeline stream each; links
// are full duplex; the pipeline's last gradient send has arrived before the embedding group's
// all-reduce meets it), so the two agree to the simulator's picosecond rounding; and on the
// serial device an overlap switch changes nothing in either.
TEST(OverlapsCommunicationEstimate, EqualsTheSimulationAndHidesNothingWhenSerial) {
  const Cluster overlapping(Node(true)), serial(Node(false));
  auto est = [&](const Cluster& c, const std::string& spec) {
    return EstimateIteration(Model(), c, L(spec)).iteration_time_s;
  };
  auto sim = [&](const Cluster& c, const std::string& spec) {
    StatusOr<SimResult> r = Simulate(Model(), c, L(spec), SimOptions{});
    CHECK(r.ok()) << r.status().message();
    return r->iteration_time_s;
  };
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {"dp=2,mbs=1,gbs=2,overlap_dp=off", "dp=2,mbs=1,gbs=2,overlap_dp=on"},
      {"tp=2,mbs=1,gbs=1,overlap_tp=off", "tp=2,mbs=1,gbs=1,overlap_tp=backward"},
      {"tp=2,sp=on,mbs=1,gbs=1,overlap_tp=off", "tp=2,sp=on,mbs=1,gbs=1,overlap_tp=on"},
      {"dp=2,zero=3,mbs=1,gbs=4,prefetch=off", "dp=2,zero=3,mbs=1,gbs=4,prefetch=on"},
      {"pp=2,mbs=1,gbs=4,schedule=1f1b,overlap_pp=off", "pp=2,mbs=1,gbs=4,schedule=1f1b,overlap_pp=on"}};
  for (const auto& [off, on] : pairs) {
    SCOPED_TRACE(on);
    for (const Cluster* c : {&overlapping, &serial}) {
      for (const std::string& spec : {off, on}) {
        const double s = sim(*c, spec);
        // The simulator rounds each task up to the picosecond: at most 1 ns over these few tasks.
        EXPECT_NEAR(est(*c, spec), s, 1e-9);
      }
    }
    EXPECT_NEAR(est(serial, off), est(serial, on), 1e-12);
    EXPECT_LT(est(overlapping, on), est(overlapping, off));
  }
}

}  // namespace
}  // namespace shardsim
