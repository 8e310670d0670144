// Quantity parsing and formatting; see units.h.
#include "src/util/units.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <cctype>
#include <cstdlib>

namespace shardsim {
namespace {

struct Unit {
  std::string_view name;
  Dimension dim;
  double scale;  // to SI base units
};

// Bits (b) only in bandwidths, as NIC rates are quoted: 200 Gb/s = 25 GB/s.
constexpr std::array kUnits = {
    Unit{"B", Dimension::kBytes, 1.0},
    Unit{"kB", Dimension::kBytes, kKB},
    Unit{"KB", Dimension::kBytes, kKB},
    Unit{"MB", Dimension::kBytes, kMB},
    Unit{"GB", Dimension::kBytes, kGB},
    Unit{"TB", Dimension::kBytes, kTB},
    Unit{"KiB", Dimension::kBytes, kKiB},
    Unit{"MiB", Dimension::kBytes, kMiB},
    Unit{"GiB", Dimension::kBytes, kGiB},
    Unit{"TiB", Dimension::kBytes, kTiB},
    Unit{"B/s", Dimension::kBandwidth, 1.0},
    Unit{"kB/s", Dimension::kBandwidth, kKB},
    Unit{"MB/s", Dimension::kBandwidth, kMB},
    Unit{"GB/s", Dimension::kBandwidth, kGB},
    Unit{"TB/s", Dimension::kBandwidth, kTB},
    Unit{"KiB/s", Dimension::kBandwidth, kKiB},
    Unit{"MiB/s", Dimension::kBandwidth, kMiB},
    Unit{"GiB/s", Dimension::kBandwidth, kGiB},
    Unit{"Mb/s", Dimension::kBandwidth, kMB / 8},
    Unit{"Gb/s", Dimension::kBandwidth, kGB / 8},
    Unit{"Tb/s", Dimension::kBandwidth, kTB / 8},
    Unit{"FLOP/s", Dimension::kFlopRate, 1.0},
    Unit{"GFLOP/s", Dimension::kFlopRate, 1e9},
    Unit{"TFLOP/s", Dimension::kFlopRate, kTFLOP},
    Unit{"PFLOP/s", Dimension::kFlopRate, 1e15},
    Unit{"s", Dimension::kTime, 1.0},
    Unit{"ms", Dimension::kTime, kMs},
    Unit{"us", Dimension::kTime, kUs},
    Unit{"ns", Dimension::kTime, kNs},
};

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

std::string_view DimensionName(Dimension dim) {
  switch (dim) {
    case Dimension::kBytes: return "a size in bytes";
    case Dimension::kBandwidth: return "a bandwidth";
    case Dimension::kFlopRate: return "a FLOP rate";
    case Dimension::kTime: return "a time";
  }
  return "?";
}

std::string_view DimensionUnits(Dimension dim) {
  switch (dim) {
    case Dimension::kBytes: return "B, kB, MB, GB, TB, KiB, MiB, GiB, TiB";
    case Dimension::kBandwidth: return "GB/s, TB/s, GiB/s, Gb/s (bits), ...";
    case Dimension::kFlopRate: return "GFLOP/s, TFLOP/s, PFLOP/s";
    case Dimension::kTime: return "s, ms, us, ns";
  }
  return "?";
}

StatusOr<double> ParseQuantity(std::string_view text, Dimension dim) {
  const std::string quoted = "'" + std::string(text) + "'";
  std::string_view s = Trim(text);
  size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.' ||
                          s[i] == 'e' || s[i] == 'E' || s[i] == '+' || s[i] == '-')) {
    // An 'e' followed by a letter that is not a digit/sign starts no exponent.
    ++i;
  }
  const std::string number(s.substr(0, i));
  const std::string_view unit = Trim(s.substr(i));
  char* end = nullptr;
  const double value = number.empty() ? 0.0 : std::strtod(number.c_str(), &end);
  if (number.empty() || end != number.c_str() + number.size() || !std::isfinite(value)) {
    return Status::Error(quoted + " is not a quantity: expected " + std::string(DimensionName(dim)) +
                         " written as '<number> <unit>' with unit one of " +
                         std::string(DimensionUnits(dim)));
  }
  if (unit.empty()) {
    return Status::Error(quoted + " has no unit: expected " + std::string(DimensionName(dim)) +
                         " with unit one of " + std::string(DimensionUnits(dim)));
  }
  for (const Unit& u : kUnits) {
    if (u.name != unit) continue;
    if (u.dim != dim) {
      return Status::Error(quoted + " is " + std::string(DimensionName(u.dim)) + ", expected " +
                           std::string(DimensionName(dim)) + " (" +
                           std::string(DimensionUnits(dim)) + ")");
    }
    if (value <= 0) {
      if (!(value == 0 && dim == Dimension::kTime)) {
        return Status::Error(quoted + " must be positive");
      }
    }
    // Finite and at most 1e24 in base units (bytes, seconds, FLOP/s, bytes/s): "1e308 TB" is
    // infinite memory that would fit anything.
    const double scaled = value * u.scale;
    if (!std::isfinite(scaled) || scaled > kMaxQuantity) {
      return Status::Error(quoted + " is more than 1e24 in base units: not a physical " + std::string(DimensionName(dim)));
    }
    return scaled;
  }
  return Status::Error(quoted + ": unknown unit '" + std::string(unit) + "', expected " +
                       std::string(DimensionName(dim)) + " with unit one of " +
                       std::string(DimensionUnits(dim)));
}

std::string FormatQuantity(double value, Dimension dim) {
  char buf[64];
  switch (dim) {
    case Dimension::kBytes: {
      const double a = std::fabs(value);
      if (a >= kTiB) std::snprintf(buf, sizeof buf, "%.2f TiB", value / kTiB);
      else if (a >= kGiB) std::snprintf(buf, sizeof buf, "%.2f GiB", value / kGiB);
      else if (a >= kMiB) std::snprintf(buf, sizeof buf, "%.2f MiB", value / kMiB);
      else if (a >= kKiB) std::snprintf(buf, sizeof buf, "%.2f KiB", value / kKiB);
      else std::snprintf(buf, sizeof buf, "%.0f B", value);
      break;
    }
    case Dimension::kBandwidth:
      std::snprintf(buf, sizeof buf, "%.2f GB/s", value / kGB);
      break;
    case Dimension::kFlopRate:
      std::snprintf(buf, sizeof buf, "%.1f TFLOP/s", value / kTFLOP);
      break;
    case Dimension::kTime: {
      const double a = std::fabs(value);
      if (a >= 1.0) std::snprintf(buf, sizeof buf, "%.3f s", value);
      else if (a >= kMs) std::snprintf(buf, sizeof buf, "%.3f ms", value / kMs);
      else std::snprintf(buf, sizeof buf, "%.2f us", value / kUs);
      break;
    }
  }
  return buf;
}

}  // namespace shardsim
