// Whole training steps on runtime/cuda in the CPU emulator (tests/cuda_emu): the Executor on an
// emulated CudaBackend against the CPU backend, same model, layout, seed and data. What the
// emulator can and cannot show is in docs/gpu.md ("Kernel checks without a GPU"); here it runs
// every kernel a step launches, in the executor's order, with its real shapes and workspace.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "runtime/backend/emulated_collectives.h"
#include "runtime/backend/local_collectives.h"
#include "runtime/cpu/cpu_backend.h"
#include "runtime/cpu/markov_stream.h"
#include "runtime/cuda/cuda_backend.h"
#include "runtime/exec/executor.h"
#include "src/hardware/hardware_spec.h"
#include "src/layout/layout.h"
#include "src/model/model_spec.h"

namespace shardsim::runtime {
namespace {

std::vector<double> Losses(Backend* backend, const ModelSpec& m, const Layout& l, int steps) {
  Timeline timeline;
  StatusOr<std::unique_ptr<Executor>> exec = Executor::Create(m, l, backend, AdamWConfig{}, 1234, &timeline);
  EXPECT_TRUE(exec.ok()) << exec.status().message();
  if (!exec.ok()) return {};
  const MarkovStream data({.vocab = m.vocab, .seed = 7});
  std::vector<double> out;
  for (int s = 0; s < steps; ++s) {
    StatusOr<double> loss = (*exec)->Step(data, s);
    EXPECT_TRUE(loss.ok()) << loss.status().message();
    if (!loss.ok()) return {};
    out.push_back(*loss);
  }
  return out;
}

Layout Resolved(const std::string& spec, int64_t world) {
  StatusOr<Layout> parsed = ParseLayout(spec);
  CHECK(parsed.ok()) << parsed.status().message();
  StatusOr<HardwareSpec> hw = LoadHardware("dgx-h100");
  CHECK(hw.ok()) << hw.status().message();
  StatusOr<Layout> l = ResolveLayoutFor(*parsed, world, *hw);
  CHECK(l.ok()) << l.status().message();
  return *l;
}

// `rank` < 0: a one-rank layout over LocalCollectives. Else rank `rank` of a `world`-rank layout
// alone, over EmulatedCollectives on both backends (its peers' data stood in for alike, so the
// two runs compute the same numbers: run --emulate-rank's collectives).
void ExpectSameTraining(const std::string& model, const std::string& spec, double tolerance, int64_t world = 1,
                        int64_t rank = -1) {
  SCOPED_TRACE(model + " " + spec + " rank " + std::to_string(rank));
  StatusOr<ModelSpec> m = LoadModel(model);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const Layout l = Resolved(spec, world);
  std::unique_ptr<CpuBackend> cpu =
      rank < 0 ? std::make_unique<CpuBackend>(std::make_unique<LocalCollectives>())
               : std::make_unique<CpuBackend>([&](Memory& mem) { return std::make_unique<EmulatedCollectives>(l, rank, &mem); });
  const std::vector<double> want = Losses(cpu.get(), *m, l, 2);
  StatusOr<std::unique_ptr<CudaBackend>> gpu = CudaBackend::Create(0);
  ASSERT_TRUE(gpu.ok()) << gpu.status().message();
  if (rank >= 0) (*gpu)->SetCollectives(std::make_unique<EmulatedCollectives>(l, rank, &(*gpu)->memory()));
  const std::vector<double> got = Losses(gpu->get(), *m, l, 2);
  ASSERT_EQ(got.size(), want.size());
  for (size_t s = 0; s < got.size(); ++s) {
    EXPECT_NEAR(got[s], want[s], tolerance * std::fabs(want[s])) << "step " << s;
  }
}

// Tolerances are tests/mpi/exec_equivalence_main.cc's for a layout against the single-process
// run, for the same reason: only the order of floating-point sums differs (the emulated GEMMs
// add in k order in fp32, Eigen and oneDNN in blocks). fp32: 1e-5 relative on each step's loss
// (~100 fp32 ulps; measured 6e-9). bf16: 1e-3 (bf16 roundings of differently summed values
// flip one in 256; measured 3e-5), where a kernel error moves the loss at the 1e-2 level and up.
TEST(ExecutorEmu, DenseFp32) { ExpectSameTraining("tiny", "mbs=1,gbs=2,dtype=fp32", 1e-5); }

// MoE on CUDA (runtime/exec/moe_block.h on the CUDA kernels: the router's GEMM and softmax on
// the device, routing on the host, GatherRows / ScatterAddRows permuting tokens to experts and
// back, each expert's SwiGLU MLP), with and without token dropping (moe_capacity=1.0 drops the
// slots past each expert's capacity; the aux loss trains either way).
TEST(ExecutorEmu, MoeFp32) { ExpectSameTraining("tiny-moe", "mbs=1,gbs=2,dtype=fp32", 1e-5); }
TEST(ExecutorEmu, MoeBf16) { ExpectSameTraining("tiny-moe", "mbs=1,gbs=2,dtype=bf16", 1e-3); }
TEST(ExecutorEmu, MoeDroppingTokensFp32) {
  ExpectSameTraining("tiny-moe", "mbs=1,gbs=2,dtype=fp32,moe_capacity=1.0", 1e-5);
}

// dtype=fp8 on CUDA (CudaFp8Kernels: the amax, the cast and cast-transpose to E4M3 / E5M2,
// the scaled GEMMs over codes), dense and MoE: the codes are the CPU backend's bit for bit
// where their bf16 inputs are, and the GEMMs sum exact products in fp32 in another order.
TEST(ExecutorEmu, Fp8) {
  ExpectSameTraining("tiny", "mbs=1,gbs=2,dtype=fp8", 1e-3);
  ExpectSameTraining("tiny-moe", "mbs=1,gbs=2,dtype=fp8", 1e-3);
}

// Context parallelism on CUDA: each rank's two load-balanced query chunks (at offsets r L and
// (2 cp - 1 - r) L of the sequence, L = T / 2 cp) against the gathered keys, the attention
// kernels' AttentionDims::kv_seq and q_offset. Both ranks of cp=2, unfused and flash (bf16 flash
// takes the cuBLAS recomputation under CP: the fused kernels take no offset).
TEST(ExecutorEmu, ContextParallelUnfusedFp32) {
  for (const int64_t rank : {0, 1}) ExpectSameTraining("tiny", "cp=2,mbs=1,gbs=2,dtype=fp32,attention=unfused", 1e-5, 2, rank);
}
// Gradient compression on CUDA (compress=8: PowerSGD, powersgd.h): its compress, project and
// decompress on the device kernels, the orthonormalization on the host between stream copies,
// the error feedback and Q carried over; rank 0 of dp=2 alone, with and without overlap_dp.
TEST(ExecutorEmu, PowerSgdFp32) {
  ExpectSameTraining("tiny", "dp=2,zero=0,mbs=1,gbs=4,compress=8,dtype=fp32", 1e-5, 2, 0);
  ExpectSameTraining("tiny", "dp=2,zero=0,mbs=1,gbs=4,compress=8,dtype=fp32,overlap_dp=off", 1e-5, 2, 0);
}
TEST(ExecutorEmu, ContextParallelFlashBf16) {
  for (const int64_t rank : {0, 1}) ExpectSameTraining("tiny", "cp=2,mbs=1,gbs=2,dtype=bf16,attention=flash", 1e-3, 2, rank);
}

}  // namespace
}  // namespace shardsim::runtime
