// Issue 16's "counts you can check": every real config under tests/data/hf against the
// published total and active parameter counts in tests/data/hf/published.tsv (each row cites
// its source). A published figure of d significant digits stands for a range: the test allows
// 0.5 % or half a unit of the figure's last digit, whichever is wider. Two rows disagree with
// their publisher's rounding and are allowed their measured gap with the reason beside; the
// table is docs/models.md's (scripts/hf-param-table.sh).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "src/model/model_spec.h"

namespace shardsim {
namespace {

struct Published {
  std::string file;
  double total = 0, active = 0;
  int total_digits = 0, active_digits = 0;
};

std::vector<Published> ReadPublished() {
  std::ifstream in("tests/data/hf/published.tsv");
  EXPECT_TRUE(in.good());
  std::vector<Published> rows;
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string x; std::getline(ss, x, '\t');) f.push_back(x);
    if (f.size() < 5) continue;
    Published p;
    p.file = f[0];
    p.total = std::stod(f[1]);
    p.active = std::stod(f[2]);
    const size_t comma = f[3].find(',');
    p.total_digits = std::stoi(f[3].substr(0, comma));
    p.active_digits = comma == std::string::npos ? p.total_digits : std::stoi(f[3].substr(comma + 1));
    rows.push_back(p);
  }
  return rows;
}

// 0.5 % of the figure, or half a unit in its last significant digit (8B of 1 digit: 0.5B).
double Tolerance(double published, int digits) {
  const double unit = std::pow(10.0, std::floor(std::log10(published)) - digits + 1);
  return std::max(0.005 * published, unit / 2);
}

TEST(HfCounts, EveryShippedConfigMatchesItsPublishedCount) {
  // Measured gaps that exceed the rule, with why (shardsim's counts are the checkpoint's):
  //  - mistral-7b: Mistral AI announced 7.3B; the checkpoint's tensors hold 7,241,732,096
  //    (32 layers x 218,112,000 + 2 x 32000 x 4096 + 4096), 0.8 % below.
  //  - qwen3-30b-a3b active: the card's 3.3B reads as cut, not rounded, from 3.35B (48 layers
  //    of attention, 8 of 128 experts, router and norms, plus embedding and head).
  const std::map<std::string, double> gap_total = {{"mistral-7b.json", 0.009}};
  const std::map<std::string, double> gap_active = {{"mistral-7b.json", 0.009}, {"qwen3-30b-a3b.json", 0.017}};
  const std::vector<Published> rows = ReadPublished();
  ASSERT_GE(rows.size(), 15u);
  for (const Published& p : rows) {
    StatusOr<ModelSpec> m = LoadModel("tests/data/hf/" + p.file);
    ASSERT_TRUE(m.ok()) << p.file << ": " << m.status().message();
    const double total = static_cast<double>(m->TotalParams()), active = static_cast<double>(m->ActiveParams());
    const double tol_total = gap_total.count(p.file) ? gap_total.at(p.file) * p.total : Tolerance(p.total, p.total_digits);
    const double tol_active =
        gap_active.count(p.file) ? gap_active.at(p.file) * p.active : Tolerance(p.active, p.active_digits);
    EXPECT_NEAR(total, p.total, tol_total) << p.file << " total";
    EXPECT_NEAR(active, p.active, tol_active) << p.file << " active";
  }
}

TEST(HfCounts, ToleranceFollowsTheFiguresDigits) {
  // "8B" (1 digit) stands for 7.5B to 8.5B; "46.7B" (3 digits) for 0.5 % = 0.2335B > 0.05B.
  EXPECT_DOUBLE_EQ(Tolerance(8e9, 1), 0.5e9);
  EXPECT_DOUBLE_EQ(Tolerance(46.7e9, 3), 0.2335e9);
}

}  // namespace
}  // namespace shardsim
