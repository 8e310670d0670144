// Issue 17's acceptance: every layout the planner searches, and that CheckLayout lets through, the
// runtime accepts (runtime/exec/executor.h, UnsupportedLayout: the reasons `run` refuses a layout
// before any work). The space is the planner's own (EnumerateLayouts) on dgx-h100, which has a
// bf16 and an fp8 rate, for the runtime's test models: tiny (dense, GQA, SwiGLU), tiny-moe (MoE
// with expert parallelism) and gpt4 (tied embeddings, LayerNorm, GELU with biases), on 2, 4 and 8
// GPUs. Every key's every searched value must therefore be one the runtime runs.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "planner/planner.h"
#include "runtime/exec/executor.h"
#include "src/hardware/hardware_spec.h"
#include "src/layout/validate.h"
#include "src/model/model_spec.h"
#include "tests/test_models.h"

namespace shardsim {
namespace {

TEST(RuntimeAcceptsSearched, EveryValidSearchedLayout) {
  const StatusOr<HardwareSpec> hw = LoadHardware("dgx-h100");
  ASSERT_TRUE(hw.ok()) << hw.status().message();
  std::vector<ModelSpec> models;
  for (const char* name : {"tiny", "tiny-moe"}) {
    StatusOr<ModelSpec> m = LoadModel(name);
    ASSERT_TRUE(m.ok()) << m.status().message();
    models.push_back(*m);
  }
  ModelSpec gpt4 = testing::TinyGptModel();  // 4 layers, so pp up to 4 and ZB-V's 2 chunks
  gpt4.layers = 4;
  models.push_back(gpt4);
  std::map<std::string, std::set<std::string>> searched;  // key -> values seen in valid layouts
  int64_t checked = 0;
  std::map<std::string, std::string> refused;  // reason -> the first layout refused for it
  for (const ModelSpec& m : models) {
    for (int64_t gpus : {2, 4, 8}) {
      planner::PlanOptions o;
      o.gpus = gpus;
      o.global_batch = 8;
      for (const Layout& l : planner::EnumerateLayouts(m, *hw, o)) {
        if (!CheckLayout(l, m, *hw, gpus).ok()) continue;
        const std::vector<std::string> why = runtime::UnsupportedLayout(m, l);
        for (const std::string& w : why) {
          if (!refused.count(w)) refused[w] = m.name + " on " + std::to_string(gpus) + " GPUs: " + FormatLayout(l);
        }
        if (!why.empty()) continue;
        ++checked;
        searched["dtype"].insert(DTypeName(l.dtype));
        searched["schedule"].insert(ScheduleName(l.schedule));
        searched["zero"].insert(std::to_string(l.zero));
        searched["offload"].insert(OffloadName(l.offload));
        searched["recompute"].insert(RecomputeName(l.recompute));
        searched["cp"].insert(std::to_string(l.cp));
        searched["ep"].insert(std::to_string(l.ep));
      }
    }
  }
  for (const auto& [reason, where] : refused) ADD_FAILURE() << reason << "\n  first: " << where;
  EXPECT_GT(checked, 1000);
  // The space has what the runtime was extended for: fp8, both zero-bubble schedules, ZeRO-3
  // with offload of the parameters, CP and EP.
  EXPECT_TRUE(searched["dtype"].count("fp8"));
  EXPECT_TRUE(searched["schedule"].count("zero-bubble"));
  EXPECT_TRUE(searched["schedule"].count("zb-v"));
  EXPECT_TRUE(searched["zero"].count("3"));
  EXPECT_TRUE(searched["offload"].count("optimizer+params"));
  EXPECT_TRUE(searched["cp"].count("2"));
  EXPECT_TRUE(searched["ep"].count("2"));
}

// compress is not searched but may be fixed (--fix compress=R): the planner then searches ZeRO 0
// alone (CheckLayout refuses compression with ZeRO 1-3), and the runtime runs every such layout
// (PowerSGD, runtime/exec/powersgd.h).
TEST(RuntimeAcceptsSearched, EveryLayoutWithCompressionFixed) {
  const StatusOr<HardwareSpec> hw = LoadHardware("dgx-h100");
  ASSERT_TRUE(hw.ok()) << hw.status().message();
  const StatusOr<ModelSpec> m = LoadModel("tiny");
  ASSERT_TRUE(m.ok()) << m.status().message();
  planner::PlanOptions o;
  o.gpus = 4;
  o.global_batch = 8;
  o.fixed["compress"] = "4";
  int64_t checked = 0, compressing = 0;
  for (const Layout& l : planner::EnumerateLayouts(*m, *hw, o)) {
    if (!CheckLayout(l, *m, *hw, o.gpus).ok()) continue;
    ASSERT_EQ(l.grad_compression, 4);
    EXPECT_EQ(l.zero, 0) << FormatLayout(l);
    const std::vector<std::string> why = runtime::UnsupportedLayout(*m, l);
    EXPECT_TRUE(why.empty()) << FormatLayout(l) << ": " << (why.empty() ? "" : why.front());
    ++checked;
    compressing += l.dp_cp() > 1;
  }
  EXPECT_GT(checked, 10);
  EXPECT_GT(compressing, 0);  // layouts with DP replicas, where the gradients are compressed
}

}  // namespace
}  // namespace shardsim
