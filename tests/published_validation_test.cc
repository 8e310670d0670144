// docs/validation/megatron-2021-table1.md as a test (issue 13's item 7): every row of the table
// (Narayanan et al. 2021, Table 1: model, t, p, GPUs, batch, published TFLOP/s per GPU) is
// predicted again, with the layout scripts/validate-published.sh uses (mbs=1, recompute=full,
// unfused attention, 1F1B, no SP, ZeRO 0; dgx-a100-80gb with GPUs / 8 nodes, with the bundled
// fitted sustained_compute as the commands apply it), and
//   - each prediction must be the table's to its printed rounding (0.05 TFLOP/s): a change that
//     moves one must regenerate the table (scripts/regen-golden.sh);
//   - the mean absolute percentage error must not exceed the one the table records.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "src/cost/estimate.h"
#include "src/layout/validate.h"
#include "src/report/compute_fit.h"
#include "src/sim/simulator.h"

namespace shardsim {
namespace {

struct Row {
  std::string model;
  int64_t tp = 0, pp = 0, gpus = 0, batch = 0;
  double published = 0, estimate = 0, simulated = 0;
};

TEST(PublishedValidation, Megatron2021Table1HoldsItsRecordedError) {
  std::ifstream in(std::string(SHARDSIM_SOURCE_DIR) + "/docs/validation/megatron-2021-table1.md");
  ASSERT_TRUE(in) << "docs/validation/megatron-2021-table1.md";
  std::vector<Row> rows;
  double recorded_est = -1, recorded_sim = -1;
  const std::regex row(R"(^\| (gpt-[^ ]+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \| ([0-9.]+) \| ([0-9.]+) \| [^|]+\| ([0-9.]+) \|.*)");
  const std::regex mape(R"(estimate ([0-9.]+) %, simulation ([0-9.]+) %)");
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_match(line, m, row)) {
      rows.push_back({m[1], std::stoll(m[2]), std::stoll(m[3]), std::stoll(m[4]), std::stoll(m[5]),
                      std::stod(m[6]), std::stod(m[7]), std::stod(m[8])});
    } else if (std::regex_search(line, m, mape)) {
      recorded_est = std::stod(m[1]);
      recorded_sim = std::stod(m[2]);
    }
  }
  ASSERT_EQ(rows.size(), 10u);
  ASSERT_GT(recorded_est, 0);
  double err_est = 0, err_sim = 0;
  for (const Row& r : rows) {
    SCOPED_TRACE(r.model);
    StatusOr<ModelSpec> m = LoadModel(r.model);
    StatusOr<HardwareSpec> loaded = LoadHardware("dgx-a100-80gb");
    ASSERT_TRUE(m.ok() && loaded.ok());
    HardwareSpec spec = *loaded;
    spec.nodes = (r.gpus + 7) / 8;
    ApplyComputeFit(&spec, false);  // the bundled fit, as the commands apply it (the table's columns)
    const HardwareSpec* hw = &spec;
    StatusOr<Layout> parsed = ParseLayout("tp=" + std::to_string(r.tp) + ",pp=" + std::to_string(r.pp) +
                                          ",mbs=1,gbs=" + std::to_string(r.batch) +
                                          ",recompute=full,attention=unfused");
    ASSERT_TRUE(parsed.ok());
    StatusOr<Layout> l = ResolveLayoutFor(*parsed, r.gpus, *hw);
    ASSERT_TRUE(l.ok());
    const Cluster cluster(*hw);
    const Estimate est = EstimateIteration(*m, cluster, *l);
    SimOptions so;
    so.critical_path = false;
    StatusOr<SimResult> sim = Simulate(*m, cluster, *l, so);
    ASSERT_TRUE(sim.ok()) << sim.status().message();
    // The table prints one decimal: a prediction more than half a unit away has moved.
    EXPECT_NEAR(est.hardware_tflops_per_gpu, r.estimate, 0.05 + 1e-9);
    EXPECT_NEAR(sim->hardware_tflops_per_gpu, r.simulated, 0.05 + 1e-9);
    err_est += std::fabs(est.hardware_tflops_per_gpu - r.published) / r.published;
    err_sim += std::fabs(sim->hardware_tflops_per_gpu - r.published) / r.published;
  }
  // The recorded MAPE is rounded to 0.1 %.
  EXPECT_LE(100 * err_est / rows.size(), recorded_est + 0.05);
  EXPECT_LE(100 * err_sim / rows.size(), recorded_sim + 0.05);
}

}  // namespace
}  // namespace shardsim
