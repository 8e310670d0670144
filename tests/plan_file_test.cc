// Plan files read back as what was written: every string the embedded model and hardware
// carry (names, citations) survives, whatever characters it holds.
#include <gtest/gtest.h>

#include "src/hardware/hardware_spec.h"
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

TEST(PlanFileTest, YamlQuotedEscapes) {
  // YAML 1.2 double-quoted escapes: \" and \\ for the two specials, \xNN for control bytes.
  EXPECT_EQ(YamlQuoted("plain"), "\"plain\"");
  EXPECT_EQ(YamlQuoted("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(YamlQuoted("\n"), "\"\\x0a\"");
}

}  // namespace
}  // namespace shardsim
