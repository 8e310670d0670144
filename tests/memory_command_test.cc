// `shardsim memory` (issue 16, item 5): its figures against DeepSpeed's estimator formulas and
// Accelerate's estimate, derived by hand here from Llama 3 8B's 8,030,261,248 parameters
// (psi; ModelParams.Llama3With8bExact) and its largest module, the 128256 x 4096 token
// embedding (L = 525,336,576), and where the tools' assumptions differ, what shardsim says.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <string>

#include "tests/run_shardsim.h"

namespace shardsim {
namespace {

using testing::RunShardsim;

constexpr double kPsi = 8030261248.0;
constexpr double kLargest = 525336576.0;

YAML::Node Row(const YAML::Node& report, int64_t gpus, int zero, const std::string& offload) {
  for (const YAML::Node& r : report["training"]) {
    if (r["gpus"].as<int64_t>() == gpus && r["zero"].as<int>() == zero && r["offload"].as<std::string>() == offload) return r;
  }
  ADD_FAILURE() << "no row for " << gpus << " GPUs, ZeRO-" << zero << ", offload " << offload;
  return YAML::Node();
}

TEST(MemoryCommand, SizesAndAccelerateFigures) {
  const auto r = RunShardsim("memory --model llama3-8b --hardware dgx-h100 --gpus 8 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const YAML::Node j = YAML::Load(r.out);
  EXPECT_EQ(j["parameters"].as<double>(), kPsi);
  EXPECT_EQ(j["largest_module_parameters"].as<double>(), kLargest);
  EXPECT_EQ(j["largest_module"].as<std::string>(), "the token embedding");
  EXPECT_EQ(j["seq_len"].as<int64_t>(), 8192);
  // fp32: 4 psi = 32,121,044,992 bytes; Accelerate's training figure is the largest of its
  // model (4 psi), gradients (4 psi), optimizer (8 psi) and step (16 psi): 128,484,179,968.
  EXPECT_EQ(j["sizes"][0]["dtype"].as<std::string>(), "fp32");
  EXPECT_EQ(j["sizes"][0]["bytes"].as<double>(), 32121044992.0);
  EXPECT_EQ(j["sizes"][0]["accelerate_training_bytes"].as<double>(), 128484179968.0);
  // bf16/fp16: 2 psi = 16,060,522,496; Accelerate: max(4 psi, 6 psi, 8 psi, 8 psi) = 8 psi.
  EXPECT_EQ(j["sizes"][1]["bytes"].as<double>(), 16060522496.0);
  EXPECT_EQ(j["sizes"][1]["accelerate_training_bytes"].as<double>(), 64242089984.0);
  EXPECT_FALSE(j["sizes"][2]["accelerate_training_bytes"].IsDefined());  // int8: N/A there too
}

// DeepSpeed's figures on 8 GPUs (one node): ZeRO-2 2 psi + 18 psi / 8 = 16,060,522,496 +
// 18,068,087,808 = 34,128,610,304; with offload 2 psi. ZeRO-3 4 L + 18 psi / 8 = 2,101,346,304 +
// 18,068,087,808 = 20,169,434,112; optimizer offloaded 4 L + 2 psi / 8 = 4,108,911,616; both 4 L.
TEST(MemoryCommand, DeepSpeedEstimatorsAndWhereShardsimAgrees) {
  const auto r = RunShardsim("memory --model llama3-8b --hardware dgx-h100 --gpus 8 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const YAML::Node j = YAML::Load(r.out);
  EXPECT_EQ(Row(j, 8, 2, "none")["deepspeed_estimator_gpu_bytes"].as<double>(), 34128610304.0);
  EXPECT_EQ(Row(j, 8, 2, "optimizer")["deepspeed_estimator_gpu_bytes"].as<double>(), 16060522496.0);
  EXPECT_EQ(Row(j, 8, 3, "none")["deepspeed_estimator_gpu_bytes"].as<double>(), 20169434112.0);
  EXPECT_EQ(Row(j, 8, 3, "optimizer")["deepspeed_estimator_gpu_bytes"].as<double>(), 4108911616.0);
  EXPECT_EQ(Row(j, 8, 3, "optimizer+params")["deepspeed_estimator_gpu_bytes"].as<double>(), 4 * kLargest);
  EXPECT_FALSE(Row(j, 8, 1, "none")["deepspeed_estimator_gpu_bytes"].IsDefined());  // no estimator for ZeRO-1
  // The same assumptions give the same states: ZeRO-2 with offload keeps the 16-bit weights,
  // 2 psi, on the GPU; ZeRO-3 keeps 2 psi / 8 of them and 12 psi / 8 of Adam's fp32 states (DeepSpeed's
  // 18 psi / N is those plus its 4 psi / N of fp32 gradients).
  EXPECT_EQ(Row(j, 8, 2, "optimizer")["weights"].as<double>(), 2 * kPsi);
  EXPECT_EQ(Row(j, 8, 3, "none")["weights"].as<double>(), 2 * kPsi / 8);
  EXPECT_EQ(Row(j, 8, 3, "none")["optimizer"].as<double>(), 12 * kPsi / 8);
  // ZeRO-0 keeps all 18 psi (bf16 weights 2, fp32 gradients 4, Adam 12): 144,544,702,464 bytes
  // of states, which no 80 GB GPU holds.
  const YAML::Node z0 = Row(j, 8, 0, "none");
  EXPECT_EQ(z0["weights"].as<double>() + z0["gradients"].as<double>() + z0["optimizer"].as<double>(), 18 * kPsi);
  EXPECT_FALSE(z0["fits"].as<bool>());
  // The smallest fit under the default stack is a layout the planner simulated.
  EXPECT_GE(j["smallest_fit"]["gpus"].as<int64_t>(), 1);
  EXPECT_LE(j["smallest_fit"]["peak_memory_bytes"].as<double>(), j["usable_memory_bytes"].as<double>());
  // ... in the table's precision (bf16 on H100 by default), not a cheaper one the table did not show.
  EXPECT_NE(j["smallest_fit"]["layout"].as<std::string>().find("dtype=bf16"), std::string::npos);
}

TEST(MemoryCommand, TextSaysWhereTheToolsDiffer) {
  const auto r = RunShardsim("memory --model llama3-8b --hardware dgx-h100 --gpus 1,8");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Accelerate prints the largest of its model, gradient, optimizer and step figures"), std::string::npos);
  EXPECT_NE(r.out.find("DeepSpeed's estimate_zero2/3_model_states_mem_needs count model states only"), std::string::npos);
  EXPECT_NE(r.out.find("smallest layout that fits on dgx-h100 (megatron-core-2024, bf16, "), std::string::npos);
  const auto bad = RunShardsim("memory --model llama3-8b --hardware dgx-h100 --gpus 0");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--gpus: expected GPU counts from 1"), std::string::npos);
}

}  // namespace
}  // namespace shardsim
