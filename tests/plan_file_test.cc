// Plan files read back as what was written: every string the embedded model and hardware
// carry (names, citations) survives, whatever characters it holds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "planner/planner.h"
#include "src/hardware/cluster.h"
#include "src/hardware/hardware_spec.h"
#include "src/sim/simulator.h"
#include "src/model/model_spec.h"
#include "src/io/plan_file.h"
#include "src/util/strings.h"

namespace shardsim {
namespace {

// Found by `plan --model llama3-8b --hardware dgx-h200 --gpus 8 --global-batch 64 --out p.yaml
// && simulate --plan p.yaml`: dgx-h200's source cites `"1,128 GB total GPU memory"` in double
// quotes, and the plan file wrote it between double quotes unescaped ("not valid YAML").
TEST(PlanFileTest, StringsWithQuotesAndBackslashesRoundTrip) {
  StatusOr<ModelSpec> m = LoadModel("llama3-8b");
  StatusOr<HardwareSpec> hw = LoadHardware("dgx-h200");
  ASSERT_TRUE(m.ok() && hw.ok());
  PlanFile p;
  p.gpus = 8;
  p.model = *m;
  p.hardware = *hw;
  p.model.name = "llama \"3\" 8b";
  p.model.source = "a \\ backslash, a \"quote\", a tab\there";
  p.hardware.gpu.name = "GPU \"x\"";
  StatusOr<Layout> l = ParseLayout("dp=8,mbs=1,gbs=8");
  ASSERT_TRUE(l.ok());
  p.layout = *l;
  StatusOr<PlanFile> back = ParsePlanFile(FormatPlanFile(p), "plan.yaml");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->model.name, p.model.name);
  EXPECT_EQ(back->model.source, p.model.source);
  EXPECT_EQ(back->hardware.gpu.name, p.hardware.gpu.name);
  EXPECT_EQ(back->hardware.source, hw->source);  // holds "1,128 GB total GPU memory" in quotes
}

// The efficiencies that price GEMMs survive the plan file: dgx-h200's fp8 share (0.734 of the
// fp8 peak, hardware/dgx-h200.yaml) and its GEMM table (the bundled sm_90 sweep, named as
// written). Without matmul_fp8 an fp8 plan read back would price fp8 GEMMs at matmul's 0.797.
TEST(PlanFileTest, GemmEfficienciesRoundTrip) {
  StatusOr<HardwareSpec> hw = LoadHardware("dgx-h200");
  ASSERT_TRUE(hw.ok()) << hw.status().message();
  StatusOr<HardwareSpec> back = ParseHardwareYaml(HardwareYaml(*hw), "plan.yaml");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_DOUBLE_EQ(back->gpu.efficiency.matmul_fp8, 0.734);
  EXPECT_EQ(back->gpu.efficiency.matmul_table_path, "gemm/sm90-bf16.yaml");
  EXPECT_EQ(back->gpu.efficiency.matmul_table.get(), hw->gpu.efficiency.matmul_table.get());
  EXPECT_EQ(back->gpu.architecture, "sm90");
  EXPECT_FALSE(back->gpu.efficiency.sustained_compute.has_value());  // not set: stays structural
}

// A fitted (or described) sustained_compute is written, so a plan read back is priced as it
// was planned and is not fitted again (compute_fit.h keeps a description's own value).
TEST(PlanFileTest, SustainedComputeRoundTrips) {
  StatusOr<HardwareSpec> hw = LoadHardware("dgx-h100");
  ASSERT_TRUE(hw.ok()) << hw.status().message();
  HardwareSpec spec = *hw;
  spec.gpu.efficiency.sustained_compute = 0.8125;
  StatusOr<HardwareSpec> back = ParseHardwareYaml(HardwareYaml(spec), "plan.yaml");
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_TRUE(back->gpu.efficiency.sustained_compute.has_value());
  EXPECT_DOUBLE_EQ(*back->gpu.efficiency.sustained_compute, 0.8125);
}

TEST(PlanFileTest, YamlQuotedEscapes) {
  // YAML 1.2 double-quoted escapes: \" and \\ for the two specials, \xNN for control bytes.
  EXPECT_EQ(YamlQuoted("plain"), "\"plain\"");
  EXPECT_EQ(YamlQuoted("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(YamlQuoted("\n"), "\"\\x0a\"");
}

// Every bundled model on every bundled cluster (issue 13's item 4): the winner of `plan` (on
// up to 64 GPUs, 2 sequences per GPU), written as `plan --out` writes it and read back as
// `simulate --plan` reads it, simulates to exactly the figures the plan recorded. Where nothing
// fits, the planner says so (closest layouts) and there is no file to write.
TEST(PlanFileTest, EveryBundledModelOnEveryClusterRoundTrips) {
  namespace fs = std::filesystem;
  const std::string src = SHARDSIM_SOURCE_DIR;
  std::vector<std::string> models, clusters;
  for (const auto& e : fs::directory_iterator(src + "/models")) models.push_back(e.path().stem().string());
  for (const auto& e : fs::directory_iterator(src + "/hardware")) {
    if (e.path().extension() == ".yaml") clusters.push_back(e.path().stem().string());  // not gemm/
  }
  std::sort(models.begin(), models.end());
  std::sort(clusters.begin(), clusters.end());
  int written = 0, nothing_fits = 0;
  for (const std::string& hw_name : clusters) {
    const StatusOr<HardwareSpec> hw = LoadHardware(hw_name);
    ASSERT_TRUE(hw.ok()) << hw.status().message();
    const Cluster cluster(*hw);
    for (const std::string& model_name : models) {
      SCOPED_TRACE(model_name + " on " + hw_name);
      const StatusOr<ModelSpec> m = LoadModel(model_name);
      ASSERT_TRUE(m.ok()) << m.status().message();
      planner::PlanOptions o;
      o.gpus = std::min<int64_t>(64, hw->total_gpus());
      o.global_batch = 2 * o.gpus;
      o.top_k = 1;
      o.threads = 2;
      StatusOr<planner::PlanResult> r = planner::Plan(*m, cluster, o);
      ASSERT_TRUE(r.ok()) << r.status().message();
      if (r->ranked.empty()) {
        EXPECT_FALSE(r->closest.empty());
        ++nothing_fits;
        continue;
      }
      const PlanFile written_plan = planner::WinnerPlanFile(*m, *hw, *r, "throughput");
      StatusOr<PlanFile> back = ParsePlanFile(FormatPlanFile(written_plan), "plan.yaml");
      ASSERT_TRUE(back.ok()) << back.status().message();
      SimOptions so;
      so.critical_path = false;
      StatusOr<SimResult> sim = Simulate(back->model, Cluster(back->hardware), back->layout, so);
      ASSERT_TRUE(sim.ok()) << sim.status().message();
      EXPECT_EQ(FormatLayout(back->layout), FormatLayout(r->ranked.front().layout));
      EXPECT_EQ(sim->iteration_time_s, back->predicted.iteration_time_s);
      EXPECT_EQ(sim->peak_memory_bytes, back->predicted.peak_memory_bytes);
      EXPECT_EQ(sim->mfu, back->predicted.mfu);
      EXPECT_TRUE(sim->fits);
      EXPECT_TRUE(back->predicted.fits);
      ++written;
    }
  }
  std::printf("plan files: %d written and reproduced, %d problems where nothing fits\n", written, nothing_fits);
  EXPECT_GT(written, 40);
}

}  // namespace
}  // namespace shardsim
