// NCCL's buffers per rank (src/cost/memory.h NcclBufferBytes): 12 MiB per (peer, channel)
// connection, the three protocols' FIFOs of NCCL's src/init.cc (LL 512 KiB + LL128 4.6875 MiB
// + Simple 4 MiB = 9.1875 MiB) in 2 MiB cuMem granules (10 MiB) and one 2 MiB granule beside
// them; a collective group two connections a channel, a point-to-point group one per peer.
// Expected values derived in the comments from those counts and the descriptions' channels
// (dgx-h100: 32, dgx-a100-80gb: 24).
#include <gtest/gtest.h>

#include <string>

#include "src/cost/memory.h"
#include "src/hardware/hardware_spec.h"
#include "src/io/plan_file.h"
#include "src/layout/layout.h"
#include "tests/test_models.h"

namespace shardsim {
namespace {

constexpr double kMiB = 1 << 20;

HardwareSpec Load(const std::string& name) {
  StatusOr<HardwareSpec> hw = LoadHardware(name);
  CHECK(hw.ok()) << hw.status().message();
  return *hw;
}

Layout Resolved(const std::string& spec, int64_t gpus, const HardwareSpec& hw) {
  StatusOr<Layout> parsed = ParseLayout(spec);
  CHECK(parsed.ok()) << parsed.status().message();
  StatusOr<Layout> l = ResolveLayoutFor(*parsed, gpus, hw);
  CHECK(l.ok()) << l.status().message();
  return *l;
}

TEST(NcclBuffers, CollectiveAndPointToPointGroups) {
  const HardwareSpec h100 = Load("dgx-h100");
  ASSERT_EQ(h100.gpu.nccl_channels, 32);
  const ModelSpec m = testing::GptModel(8, 1024, 16, 8192, 2048);  // tied embeddings (GPT)
  ASSERT_TRUE(m.tied_embeddings);
  // tp 2 x dp 4: two collective groups, 2 + 2 = 4 connections x 32 channels x 12 MiB = 1536 MiB.
  EXPECT_EQ(NcclBufferBytes(m, h100, Resolved("tp=2,pp=1,mbs=1,gbs=8", 8, h100), 0), 1536 * kMiB);
  // One GPU: no communicator, nothing.
  EXPECT_EQ(NcclBufferBytes(m, h100, Resolved("tp=1,pp=1,mbs=1,gbs=8", 1, h100), 0), 0);
  // pp 4 alone (dp 1), 1F1B: the first stage sends to one neighbour and all-reduces the tied
  // embedding with the last (1 + 2 = 3 connections, 1152 MiB); a middle stage has two
  // neighbours (2, 768 MiB).
  const Layout pp = Resolved("tp=1,pp=4,mbs=1,gbs=8,schedule=1f1b", 4, h100);
  EXPECT_EQ(NcclBufferBytes(m, h100, pp, 0), 3 * 32 * 12 * kMiB);
  EXPECT_EQ(NcclBufferBytes(m, h100, pp, 1), 2 * 32 * 12 * kMiB);
  // Interleaved: the last stage's chunks wrap round to the first, so every stage has two.
  const Layout vpp = Resolved("tp=1,pp=4,vpp=2,mbs=1,gbs=8,schedule=interleaved", 4, h100);
  EXPECT_EQ(NcclBufferBytes(m, h100, vpp, 1), 2 * 32 * 12 * kMiB);
  // cp 2: its ring is one peer; cp 4: two (previous and next). With dp 1 the gradient group
  // (dp x cp) is the CP ranks, a collective group: 1 + 2 and 2 + 2 connections.
  EXPECT_EQ(NcclBufferBytes(m, h100, Resolved("tp=1,pp=1,cp=2,mbs=1,gbs=8", 2, h100), 0), 3 * 32 * 12 * kMiB);
  EXPECT_EQ(NcclBufferBytes(m, h100, Resolved("tp=1,pp=1,cp=4,mbs=1,gbs=8", 4, h100), 0), 4 * 32 * 12 * kMiB);

  // The A100 description opens 24 channels: tp 8 alone, 2 x 24 x 12 MiB = 576 MiB (NVIDIA/nccl
  // #964 measured 544 MB for a new 2-GPU group and 688 MB for a larger one on A100s).
  const HardwareSpec a100 = Load("dgx-a100-80gb");
  EXPECT_EQ(NcclBufferBytes(m, a100, Resolved("tp=8,pp=1,mbs=1,gbs=8", 8, a100), 0), 576 * kMiB);
  // The CPU host runs no NCCL: nothing.
  const HardwareSpec cpu = Load("cpu-host");
  EXPECT_EQ(NcclBufferBytes(m, cpu, Resolved("tp=1,pp=1,mbs=1,gbs=8", 2, cpu), 0), 0);
}

TEST(NcclBuffers, ExpertAllToAllReachesEveryPeer) {
  const HardwareSpec h100 = Load("dgx-h100");
  const ModelSpec moe = testing::TinyMoeModel(256);  // 4 experts
  ASSERT_TRUE(moe.moe.has_value());
  // 4 GPUs, ep 4 (inside dp 4): the gradient group (2) and the all-to-all's 3 peers (3); the
  // expert-data-parallel group has one rank (dp / ep = 1): 5 x 32 x 12 MiB = 1920 MiB (NVIDIA/nccl
  // #1685: an all-to-all among 8 H100s took 1.06 -> 4.34 GB, 7 peers).
  EXPECT_EQ(NcclBufferBytes(moe, h100, Resolved("tp=1,pp=1,ep=4,mbs=1,gbs=8", 4, h100), 0), 5 * 32 * 12 * kMiB);
  // 8 GPUs, ep 4: the expert-data-parallel group has two ranks: 2 + 3 + 2 = 7 connections.
  EXPECT_EQ(NcclBufferBytes(moe, h100, Resolved("tp=1,pp=1,ep=4,mbs=1,gbs=8", 8, h100), 0), 7 * 32 * 12 * kMiB);
}

TEST(NcclBuffers, CountedUnderOtherAndWrittenBack) {
  const HardwareSpec h100 = Load("dgx-h100");
  const ModelSpec m = testing::GptModel(8, 1024, 16, 8192, 2048);
  const Layout one = Resolved("tp=2,pp=1,mbs=1,gbs=8", 2, h100);
  const MemoryBreakdown mem = StageMemory(m, h100, one, 0);
  // tp 2 alone: one collective group, 2 x 32 x 12 MiB = 768 MiB, inside `other`.
  EXPECT_EQ(mem.nccl_buffers, 768 * kMiB);
  EXPECT_GE(mem.other, mem.nccl_buffers + h100.gpu.reserved_memory_bytes);
  // The plan file keeps the channels; a description may not claim more than NCCL's 64.
  const std::string text = HardwareYaml(h100);
  EXPECT_NE(text.find("nccl_channels: 32"), std::string::npos) << text;
  StatusOr<HardwareSpec> back = ParseHardwareYaml(text, "plan.yaml");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->gpu.nccl_channels, 32);
  std::string bad = text;
  bad.replace(bad.find("nccl_channels: 32"), 17, "nccl_channels: 65");
  StatusOr<HardwareSpec> refused = ParseHardwareYaml(bad, "bad.yaml");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("at most 64"), std::string::npos) << refused.status().message();
}

}  // namespace
}  // namespace shardsim
