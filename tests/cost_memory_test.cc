// Memory model against the published formulas: ZeRO (Rajbhandari et al. 2020, Sec. 3/Fig. 1)
// and activation memory (Korthikanti et al. 2022, Sec. 4, Table 2).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "src/cost/memory.h"
#include "src/layout/pipeline.h"
#include "tests/test_models.h"

namespace shardsim {
namespace {

Layout Dp(int zero, int64_t dp, DType dtype) {
  Layout l;
  l.dp = dp;
  l.gbs = dp;
  l.zero = zero;
  l.dtype = dtype;
  return l;
}

// ZeRO paper, Figure 1: Psi = 7.5B parameters, K = 12, Nd = 64 GPUs, mixed-precision Adam
// with fp16 weights and gradients.
//   baseline: (2 + 2 + K) Psi = 16 x 7.5e9 = 120 GB
//   stage 1 (P_os): 2Psi + 2Psi + K Psi / Nd = 30e9 + 90e9 / 64 = 31.406 GB
//   stage 2 (P_os+g): 2Psi + (2 + K) Psi / Nd = 15e9 + 105e9 / 64 = 16.641 GB
//   stage 3 (P_os+g+p): (2 + 2 + K) Psi / Nd = 120e9 / 64 = 1.875 GB
TEST(ZeroMemoryTest, MatchesZeroPaperFigure1) {
  const StageParams params{7.5e9, 0};
  const double expected[] = {120e9, 31.40625e9, 16.640625e9, 1.875e9};
  for (int stage = 0; stage <= 3; ++stage) {
    const MemoryBreakdown mem = ModelStateMemory(params, Dp(stage, 64, DType::kFp16));
    EXPECT_NEAR(mem.weights + mem.gradients + mem.optimizer, expected[stage], 1.0)
        << "ZeRO stage " << stage;
  }
}

// The same model under bf16, Megatron-LM's default (megatron/training/arguments.py: bf16
// accumulates and all-reduces gradients in fp32): 2 (bf16 weights) + 4 (fp32 gradients) + K.
//   baseline: (2 + 4 + K) Psi = 18 x 7.5e9 = 135 GB
//   stage 1: 2Psi + 4Psi + K Psi / Nd = 15e9 + 30e9 + 90e9 / 64 = 46.406 GB
//   stage 2: 2Psi + (4 + K) Psi / Nd = 15e9 + 120e9 / 64 = 16.875 GB
//   stage 3: (2 + 4 + K) Psi / Nd = 135e9 / 64 = 2.109 GB
// fp8 (Transformer Engine GEMMs over bf16 parameters) keeps the same states.
TEST(ZeroMemoryTest, Bf16KeepsFp32GradientsAsMegatron) {
  const StageParams params{7.5e9, 0};
  const double expected[] = {135e9, 46.40625e9, 16.875e9, 2.109375e9};
  for (DType dtype : {DType::kBf16, DType::kFp8}) {
    for (int stage = 0; stage <= 3; ++stage) {
      const MemoryBreakdown mem = ModelStateMemory(params, Dp(stage, 64, dtype));
      EXPECT_NEAR(mem.weights + mem.gradients + mem.optimizer, expected[stage], 1.0)
          << DTypeName(dtype) << " ZeRO stage " << stage;
    }
  }
}

// Offload against DeepSpeed's own memory estimators (deepspeedai/DeepSpeed edaa72212,
// deepspeed/runtime/zero/stage_1_and_2.py estimate_zero2_model_states_mem_needs and stage3.py
// estimate_zero3_model_states_mem_needs), Psi = 7.5e9 parameters over N = 64 GPUs:
//   ZeRO-2, cpu_offload:                 gpu_mem = 2 Psi                    = 15 GB
//   ZeRO-3, offload optimizer only:      gpu_mem = 4 LL + 2 Psi / N         (persistent 2 Psi / N = 0.234375 GB)
//   ZeRO-3, offload optimizer + params:  gpu_mem = 4 LL                     (persistent 0)
//   ZeRO-3, no offload:                  gpu_mem = 4 LL + 18 Psi / N        (persistent 18 Psi / N = 2.109375 GB)
//   ZeRO-2, no offload:                  gpu_mem = 2 Psi + 18 Psi / N       = 17.109375 GB
// LL (the largest layer's parameters) is a transient, ZeroTransientBytes' (ZeroMemoryModelTest).
// The persistent model states here are the estimators' figures with bf16 (fp32 gradients,
// Megatron's and DeepSpeed's 16-bit-weight training with 4-byte gradient partitions), except
// ZeRO-2 without offload: the estimator counts a 16-bit and a 32-bit gradient partition
// (2 + 4 bytes, its comment "18 = 2_grads_16bit + 4_grads_32bit + 4_params_32bit +
// 8_optimizer_states_32bit"); shardsim keeps the one fp32 partition (2 Psi + 16 Psi / N =
// 16.875 GB), 2 Psi / N = 0.234 GB below it. With offload the host holds the optimizer
// states and the gradient partition: (12 + 4) Psi / N = 1.875 GB.
TEST(ZeroMemoryTest, OffloadMatchesDeepSpeedsEstimators) {
  const double psi = 7.5e9, n = 64;
  const StageParams params{psi, 0};
  auto states = [&](int zero, Offload off) {
    Layout l = Dp(zero, 64, DType::kBf16);
    l.offload = off;
    return ModelStateMemory(params, l);
  };
  auto gpu = [](const MemoryBreakdown& m) { return m.weights + m.gradients + m.optimizer; };
  EXPECT_NEAR(gpu(states(2, Offload::kOptimizer)), 2 * psi, 1.0);
  EXPECT_NEAR(states(2, Offload::kOptimizer).host, 16 * psi / n, 1.0);
  EXPECT_NEAR(gpu(states(3, Offload::kOptimizer)), 2 * psi / n, 1.0);
  EXPECT_NEAR(states(3, Offload::kOptimizer).host, 16 * psi / n, 1.0);
  EXPECT_NEAR(gpu(states(3, Offload::kOptimizerAndParams)), 0, 1.0);
  EXPECT_NEAR(states(3, Offload::kOptimizerAndParams).host, 18 * psi / n, 1.0);
  EXPECT_NEAR(gpu(states(3, Offload::kNone)), 18 * psi / n, 1.0);
  EXPECT_NEAR(gpu(states(2, Offload::kNone)), 2 * psi + 18 * psi / n - 2 * psi / n, 1.0);
  // ZeRO-1 with offload: the gradients accumulate whole on the GPU until the step (DeepSpeed's
  // stage 1 reduces at the accumulation boundary): 2 Psi + 4 Psi. The host holds the
  // optimizer's 12 Psi / N and the fp32 gradient partition CPU Adam reads, 4 Psi / N, copied
  // down at the step (stage_1_and_2.py gives every CPU fp32 partition a CPU .grad whatever the
  // stage): 16 Psi / N = 1.875 GB.
  EXPECT_NEAR(gpu(states(1, Offload::kOptimizer)), 6 * psi, 1.0);
  EXPECT_NEAR(states(1, Offload::kOptimizer).host, 16 * psi / n, 1.0);
  // fp32 training offloaded: the weights are their own master on the GPU, so the host keeps an
  // fp32 master partition (single_partition_of_fp32_groups, a CPU copy) beside the 8-byte
  // moments and the 4-byte gradient partition: 16 Psi / N again; the GPU keeps 4 Psi weights.
  Layout fp32 = Dp(2, 64, DType::kFp32);
  fp32.offload = Offload::kOptimizer;
  EXPECT_NEAR(ModelStateMemory(params, fp32).host, 16 * psi / n, 1.0);
  EXPECT_NEAR(gpu(ModelStateMemory(params, fp32)), 4 * psi, 1.0);
}

// GPT-3 175B's layer shape (Korthikanti et al. 2022, Table 3): s = 2048, h = 12288, a = 96,
// b = 1; 5as/h = 5 x 96 x 2048 / 12288 = 80.
class ActivationTest : public ::testing::Test {
 protected:
  ModelSpec m_ = testing::GptModel(96, 12288, 96, 51200, 2048);
  const double s = 2048, b = 1, h = 12288, a = 96;
  Layout Tp(int64_t t, bool sp, Recompute r) {
    Layout l;
    l.tp = t;
    l.dp = 1;
    l.gbs = 1;
    l.sp = sp;
    l.recompute = r;
    l.attention = AttentionImpl::kUnfused;  // the paper's attention stores the s x s tensors
    return l;
  }
};

// No parallelism: s b h (34 + 5 a s / h) = 2048 x 12288 x (34 + 80) bytes = 2.869e9.
TEST_F(ActivationTest, NoParallelism) {
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m_, Tp(1, false, Recompute::kNone), false),
                   s * b * h * (34 + 5 * a * s / h));
}

// Tensor parallel t = 8: s b h (10 + 24/t + 5 a s / (h t)) = sbh (10 + 3 + 10).
TEST_F(ActivationTest, TensorParallel) {
  const double t = 8;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m_, Tp(8, false, Recompute::kNone), false),
                   s * b * h * (10 + 24 / t + 5 * a * s / (h * t)));
}

// TP + SP: s b h / t (34 + 5 a s / h); with selective recompute the 5as/h term goes: 34 sbh / t.
TEST_F(ActivationTest, SequenceParallelAndSelective) {
  const double t = 8;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m_, Tp(8, true, Recompute::kNone), false),
                   s * b * h / t * (34 + 5 * a * s / h));
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m_, Tp(8, true, Recompute::kSelective), false),
                   34 * s * b * h / t);
}

// A fused (flash) attention stores no s x s tensor: the 5as/h term goes without recompute.
TEST_F(ActivationTest, FlashAttentionDropsTheQuadraticTerm) {
  Layout l = Tp(1, false, Recompute::kNone);
  l.attention = AttentionImpl::kFlash;
  // What it keeps instead: the fp32 log-sum-exp per token and head, 4 s b a = 786,432 bytes
  // next to 34 s b h = 855,638,016.
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m_, l, false), 34 * s * b * h + 4 * s * b * a);
}

// Full recompute keeps only the layer input: 2 s b h.
TEST_F(ActivationTest, FullRecompute) {
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m_, Tp(1, false, Recompute::kFull), false), 2 * s * b * h);
}

// In-flight micro-batches on the first stage: 1F1B p, GPipe m, interleaved
// (p-1)*2 + (v-1)*p + 1 chunks of 1/v stage each (Megatron's warm-up): p=8, v=2 -> 23/2.
TEST(InFlightTest, Schedules) {
  Layout l;
  l.pp = 8;
  l.dp = 1;
  l.mbs = 1;
  l.gbs = 64;  // m = 64 micro-batches
  l.schedule = Schedule::k1F1B;
  EXPECT_DOUBLE_EQ(InFlightMicrobatches(l, 0), 8);
  EXPECT_DOUBLE_EQ(InFlightMicrobatches(l, 7), 1);
  l.schedule = Schedule::kGpipe;
  EXPECT_DOUBLE_EQ(InFlightMicrobatches(l, 0), 64);
  l.schedule = Schedule::kInterleaved;
  l.vpp = 2;
  EXPECT_DOUBLE_EQ(InFlightMicrobatches(l, 0), 23.0 / 2);
  // Korthikanti's factor L (1 + (p-1)/(p v)) in units of L/p layers: p + (p-1)/v = 11.5.
  EXPECT_DOUBLE_EQ(InFlightMicrobatches(l, 0), 8 + 7.0 / 2);
}

// ZB-V: the most micro-batches in flight (forwards run, their input-gradient pass B not yet),
// counted by walking the order schedule_zbv.cc builds, equal the closed form the memory
// model uses, ZeroBubbleVChunkInFlight's sum: for pp = 4 and m >= 7 that is 2 pp = 8 chunks
// (pp whole-stage micro-batches, Qi et al. 2024, Sec. 6) on every stage; for m = 1, 2.
TEST(InFlightTest, ZeroBubbleVMatchesItsOrder) {
  for (int64_t p : {2, 3, 4, 8}) {
    for (int64_t m : {1, 2, 3, 5, 7, 8, 16, 33}) {
      Layout l;
      l.pp = p;
      l.vpp = 2;
      l.dp = 1;
      l.mbs = 1;
      l.gbs = m;
      l.schedule = Schedule::kZeroBubbleV;
      for (int32_t r = 0; r < p; ++r) {
        int64_t in_flight = 0, most = 0;
        for (const PipelineStep& step : ScheduleOrder(l, r)) {
          if (step.pass == Pass::kForward) ++in_flight;
          if (step.pass == Pass::kBackward) --in_flight;
          most = std::max(most, in_flight);
        }
        SCOPED_TRACE("pp " + std::to_string(p) + " m " + std::to_string(m) + " stage " + std::to_string(r));
        EXPECT_EQ(ZeroBubbleVChunkInFlight(l, r, 0) + ZeroBubbleVChunkInFlight(l, r, 1), most);
        EXPECT_DOUBLE_EQ(InFlightMicrobatches(l, r), static_cast<double>(most) / 2);
        if (m >= 2 * p) {
          EXPECT_EQ(most, 2 * p);
        }
        if (m == 1) {
          EXPECT_EQ(most, 2);
        }
      }
    }
  }
}

}  // namespace
}  // namespace shardsim
