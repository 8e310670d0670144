// NCCL's kernels hold SMs beside the compute stream (src/cost/sm_contention.h): the blocks a
// call holds, the compute rate beside them, and the simulator and the estimate stretching the
// compute that overlaps a collective.
#include <gtest/gtest.h>

#include "src/cost/collective.h"
#include "src/cost/estimate.h"
#include "src/cost/memory.h"
#include "src/cost/sm_contention.h"
#include "src/hardware/hardware_spec.h"
#include "src/sim/simulator.h"
#include "tests/test_hardware.h"
#include "tests/test_models.h"

namespace shardsim {
namespace {

HardwareSpec H100() {
  StatusOr<HardwareSpec> hw = LoadHardware("dgx-h100");
  CHECK(hw.ok()) << hw.status().message();
  return *hw;
}

TaskSpec Transfer(TaskKind kind, GroupKind group, double bytes) {
  TaskSpec t;
  t.kind = kind;
  t.group = group;
  t.bytes = bytes;
  return t;
}

// dgx-h100: 32 NCCL channels, 400 Gb/s (50 GB/s) NICs. A ring call keeps one channel per
// 512 threads x 64 bytes = 32 KiB of message, at least one, at most the 32 channels; a send
// to another node max(1 NIC, ceil(50 / 14 GB/s)) = 4 channels (a power of two already); to a
// GPU of the same node over NVSwitch, all 32.
TEST(NcclKernelSms, ChannelsPerCall) {
  const HardwareSpec hw = H100();
  ASSERT_EQ(hw.gpu.nccl_channels, 32);
  const Layout l = testing::ResolvedOnH100("tp=8,sp=on,overlap_tp=backward", 8);
  EXPECT_EQ(NcclKernelSms(hw, l, Transfer(TaskKind::kCollective, GroupKind::kDp, 64.0 * 1024 * 1024), false), 32);
  // 100 KiB: floor(102400 / 32768) = 3 channels.
  EXPECT_EQ(NcclKernelSms(hw, l, Transfer(TaskKind::kCollective, GroupKind::kDp, 100.0 * 1024), false), 3);
  EXPECT_EQ(NcclKernelSms(hw, l, Transfer(TaskKind::kCollective, GroupKind::kTp, 1024), false), 1);
  EXPECT_EQ(NcclKernelSms(hw, l, Transfer(TaskKind::kSend, GroupKind::kTp, 64.0 * 1024 * 1024), true), 4);
  EXPECT_EQ(NcclKernelSms(hw, l, Transfer(TaskKind::kSend, GroupKind::kTp, 64.0 * 1024 * 1024), false), 32);
  EXPECT_EQ(NcclKernelSms(hw, l, Transfer(TaskKind::kCompute, GroupKind::kTp, 0), false), 0);
  // overlap_tp=on: Transformer Engine's userbuffers, on the SMs the GEMMs leave them; DP's
  // collectives still go through NCCL.
  const Layout ub = testing::ResolvedOnH100("tp=8,sp=on,overlap_tp=on", 8);
  EXPECT_EQ(NcclKernelSms(hw, ub, Transfer(TaskKind::kCollective, GroupKind::kTp, 64.0 * 1024 * 1024), false), 0);
  EXPECT_EQ(NcclKernelSms(hw, ub, Transfer(TaskKind::kCollective, GroupKind::kDp, 64.0 * 1024 * 1024), false), 32);
}

// (132 - held) / 132 on an H100, at least one SM's share.
TEST(NcclKernelSms, ComputeRate) {
  const GpuSpec gpu = H100().gpu;
  EXPECT_DOUBLE_EQ(ComputeRateBesideNccl(gpu, 0), 1.0);
  EXPECT_DOUBLE_EQ(ComputeRateBesideNccl(gpu, 32), 100.0 / 132.0);
  EXPECT_DOUBLE_EQ(ComputeRateBesideNccl(gpu, 500), 1.0 / 132.0);
  EXPECT_TRUE(PricesSmContention(H100()));
  EXPECT_FALSE(PricesSmContention(testing::TwoGpuNode("200 GB/s")));  // no nccl_channels
}

// The ideal 2-GPU node of tests/test_hardware.h (100 SMs, no latencies, memory free) at
// 200 GB/s, with and without 25 NCCL channels; L = 4 layers, h = 1024 (as
// overlaps_communication_test.cc).
constexpr int64_t kLayers = 4;
ModelSpec Model() { return testing::GptModel(kLayers, 1024, 16, 8, 1024); }
HardwareSpec Node(bool channels) {
  return testing::TwoGpuNode("200 GB/s", channels ? "  nccl_channels: 25\n" : "");
}

// dp = 2, ZeRO-0, overlap_dp on: the all-reduce of layer i's gradient bucket (g = 12.6 M
// params x 4 B, ~50 MB: all 25 channels) runs under layer i-1's backward, A = g / 200 GB/s
// ~ 252 us, below a layer's backward (~600 us); so layers L-1..1's buckets each slow the
// compute to 75/100 for A: the compute, and the iteration, last (L - 1) x A x 25/100 longer.
// The final norm's bucket (2 x 1024 x 4 B = 8 KiB: one channel) runs under layer L-1's
// backward for h: h x 1/100 more. Layer 0's and the embeddings' buckets follow the last
// compute: nothing beside them.
TEST(SmContentionSim, OverlappedAllReducesStretchTheCompute) {
  StatusOr<Layout> parsed = ParseLayout("dp=2,mbs=1,gbs=2,overlap_dp=on");
  ASSERT_TRUE(parsed.ok());
  StatusOr<Layout> l = ResolveLayoutFor(*parsed, 2, Node(true));
  ASSERT_TRUE(l.ok()) << l.status().message();
  const Cluster with(Node(true)), without(Node(false));
  const double b = StateBytesPerParam(DType::kBf16).gradients;
  const CollectiveModel comm(without);
  const double a = comm.Estimate(Collective::kAllReduce, {0, 1}, static_cast<double>(Model().DenseLayerParams()) * b).time_s;
  const double h = comm.Estimate(Collective::kAllReduce, {0, 1}, 2.0 * 1024 * b).time_s;
  StatusOr<SimResult> base = Simulate(Model(), without, *l, SimOptions{});
  StatusOr<SimResult> held = Simulate(Model(), with, *l, SimOptions{});
  ASSERT_TRUE(base.ok() && held.ok());
  const double extra = (kLayers - 1) * a * 0.25 + h * 0.01;
  EXPECT_NEAR(held->iteration_time_s - base->iteration_time_s, extra, 1e-9);
  EXPECT_NEAR(held->ranks[held->critical].sm_contention_s, extra, 1e-9);
  EXPECT_EQ(base->ranks[base->critical].sm_contention_s, 0);
  // The estimate prices the same stretch (pass_contention.h); its critical path leaves it out.
  const Estimate e = EstimateIteration(Model(), with, *l);
  EXPECT_NEAR(e.iteration_time_s, held->iteration_time_s, 1e-9);
  EXPECT_NEAR(e.sm_contention_s, extra, 1e-9);
  EXPECT_NEAR(e.critical_path_s, base->iteration_time_s, 1e-9);
}

}  // namespace
}  // namespace shardsim
