// See gemm_table.h.
#include "src/cost/gemm_table.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "src/cost/op_time.h"
#include "src/io/yaml_reader.h"
#include "src/util/atomic_file.h"
#include "src/util/check.h"

namespace shardsim {
namespace {

constexpr double kTera = 1e12;

std::string ShapeName(const std::array<int64_t, 4>& s) {
  return std::to_string(s[0]) + "x" + std::to_string(s[1]) + "x" + std::to_string(s[2]) + "x" +
         std::to_string(s[3]);
}

// Position of `x` on a sorted axis: the segment [lo, lo + 1] and the fraction t in log2, with
// x clamped to the axis ends (t = 0 at one point).
struct AxisPos {
  size_t lo = 0;
  double t = 0;
};
AxisPos Locate(const std::vector<int64_t>& axis, double x) {
  if (axis.size() == 1 || x <= static_cast<double>(axis.front())) return {0, 0};
  if (x >= static_cast<double>(axis.back())) return {axis.size() - 2, 1};
  size_t lo = 0;
  while (static_cast<double>(axis[lo + 1]) < x) ++lo;
  const double a = std::log2(static_cast<double>(axis[lo]));
  const double b = std::log2(static_cast<double>(axis[lo + 1]));
  return {lo, (std::log2(x) - a) / (b - a)};
}

}  // namespace

size_t GemmTable::Index(size_t b, size_t m, size_t n, size_t k) const {
  return ((b * axes_[1].size() + m) * axes_[2].size() + n) * axes_[3].size() + k;
}

StatusOr<std::shared_ptr<const GemmTable>> GemmTable::Parse(const std::string& text,
                                                            const std::string& name) {
  SHARDSIM_ASSIGN_OR_RETURN(YamlFile file, YamlFile::Parse(text, name));
  YamlMap r = file.Root();
  auto table = std::shared_ptr<GemmTable>(new GemmTable());
  table->file_ = name;
  table->arch_ = r.String("arch");
  r.Choice("dtype", {"bf16"});
  std::vector<YamlMap> rows = r.MapList("rates");
  r.Finish();
  // Every row's shape and rate, with the row it came from (for "appears twice").
  std::map<std::array<int64_t, 4>, std::pair<double, size_t>> measured;
  for (size_t i = 0; i < rows.size(); ++i) {
    YamlMap& row = rows[i];
    const std::array<int64_t, 4> shape = {row.Int("b"), row.Int("m"), row.Int("n"), row.Int("k")};
    const double tflops = row.Number("tflops", 1e-6, 1e6);
    row.Finish();
    if (!file.status().ok()) break;
    auto [it, added] = measured.emplace(shape, std::make_pair(tflops * kTera, i));
    if (!added) {
      row.Error("b", "shape b x m x n x k = " + ShapeName(shape) + " appears twice (first as rates[" +
                         std::to_string(it->second.second) + "])");
    }
  }
  SHARDSIM_RETURN_IF_ERROR(file.status());
  for (const auto& [shape, rate] : measured) {
    for (int d = 0; d < 4; ++d) table->axes_[d].push_back(shape[d]);
  }
  for (auto& axis : table->axes_) {
    std::sort(axis.begin(), axis.end());
    axis.erase(std::unique(axis.begin(), axis.end()), axis.end());
  }
  const auto& ax = table->axes_;
  table->rates_.assign(ax[0].size() * ax[1].size() * ax[2].size() * ax[3].size(), 0);
  for (size_t b = 0; b < ax[0].size(); ++b) {
    for (size_t m = 0; m < ax[1].size(); ++m) {
      for (size_t n = 0; n < ax[2].size(); ++n) {
        for (size_t k = 0; k < ax[3].size(); ++k) {
          const std::array<int64_t, 4> shape = {ax[0][b], ax[1][m], ax[2][n], ax[3][k]};
          auto it = measured.find(shape);
          if (it == measured.end()) {
            r.Error("rates", "the grid is incomplete: no rate for b x m x n x k = " +
                                 ShapeName(shape) + " (every combination of the b, m, n and k "
                                 "values that appear must be measured)");
            return file.status();
          }
          table->rates_[table->Index(b, m, n, k)] = it->second.first;
          table->saturated_ = std::max(table->saturated_, it->second.first);
        }
      }
    }
  }
  return std::shared_ptr<const GemmTable>(std::move(table));
}

StatusOr<std::shared_ptr<const GemmTable>> GemmTable::Load(const std::string& path) {
  std::error_code ec;
  const std::string key = std::filesystem::weakly_canonical(path, ec).string();
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const GemmTable>> loaded;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = loaded.find(key); it != loaded.end()) return it->second;
  SHARDSIM_ASSIGN_OR_RETURN(std::string text, ReadWholeFile(path, "GEMM table file"));
  SHARDSIM_ASSIGN_OR_RETURN(std::shared_ptr<const GemmTable> table, Parse(text, path));
  loaded.emplace(key, table);
  return table;
}

std::optional<double> GemmTable::Measured(int64_t b, int64_t m, int64_t n, int64_t k) const {
  const int64_t want[4] = {b, m, n, k};
  size_t at[4];
  for (int d = 0; d < 4; ++d) {
    auto it = std::lower_bound(axes_[d].begin(), axes_[d].end(), want[d]);
    if (it == axes_[d].end() || *it != want[d]) return std::nullopt;
    at[d] = static_cast<size_t>(it - axes_[d].begin());
  }
  return rates_[Index(at[0], at[1], at[2], at[3])];
}

double GemmTable::Interpolate(int64_t b, double m, double n, double k) const {
  auto bi = std::lower_bound(axes_[0].begin(), axes_[0].end(), b);
  CHECK(bi != axes_[0].end() && *bi == b) << "batch " << b << " is not in " << file_;
  const size_t bidx = static_cast<size_t>(bi - axes_[0].begin());
  const AxisPos pm = Locate(axes_[1], m), pn = Locate(axes_[2], n), pk = Locate(axes_[3], k);
  double rate = 0;
  for (int corner = 0; corner < 8; ++corner) {
    const int dm = corner & 1, dn = (corner >> 1) & 1, dk = (corner >> 2) & 1;
    const double w = (dm ? pm.t : 1 - pm.t) * (dn ? pn.t : 1 - pn.t) * (dk ? pk.t : 1 - pk.t);
    if (w == 0) continue;  // also keeps a one-point axis from reading past its end
    rate += w * rates_[Index(bidx, pm.lo + dm, pn.lo + dn, pk.lo + dk)];
  }
  return rate;
}

GemmTableRows MapGemmRows(const GemmTable& table, int64_t rows) {
  const std::vector<int64_t>& batches = table.batches();
  const int64_t m_max = table.ms().back();
  if (rows <= m_max) return {batches.front(), static_cast<double>(rows)};
  const int64_t need = (rows + m_max - 1) / m_max;  // ceil(rows / m_max)
  auto it = std::lower_bound(batches.begin(), batches.end(), need);
  const int64_t b = it == batches.end() ? batches.back() : *it;
  return {b, static_cast<double>(rows) / static_cast<double>(b)};
}

double GemmTableFlops(const GpuSpec& gpu, const GemmTable& table, int64_t m, int64_t n, int64_t k) {
  CHECK(m > 0 && n > 0 && k > 0) << "GEMM shape " << m << "x" << n << "x" << k;
  const GemmTableRows at = MapGemmRows(table, m);
  const double rate = table.Interpolate(at.b, at.m, static_cast<double>(n), static_cast<double>(k));
  // Wave factor beyond the grid (step 3): the output the rate was read at, clamped above only.
  const double m_max = static_cast<double>(table.ms().back());
  const int64_t rows_read = at.m > m_max ? at.b * table.ms().back() : m;
  const int64_t cols_read = std::min(n, table.ns().back());
  return rate * WaveEfficiency(gpu, m, n) / WaveEfficiency(gpu, rows_read, cols_read);
}

}  // namespace shardsim
