// Units: the one place GB, GiB, TFLOP/s and friends are defined, and the parser for
// quantity strings such as "80 GiB", "2.039 TB/s", "200 Gb/s", "312 TFLOP/s", "5 us".
#pragma once

#include <string>
#include <string_view>

#include "src/util/status.h"

namespace shardsim {

// Decimal (SI) prefixes, as vendors and nccl-tests use them: GB = 1e9 bytes.
inline constexpr double kKB = 1e3;
inline constexpr double kMB = 1e6;
inline constexpr double kGB = 1e9;
inline constexpr double kTB = 1e12;
// Binary prefixes: GiB = 2^30 bytes.
inline constexpr double kKiB = 1024.0;
inline constexpr double kMiB = 1024.0 * 1024.0;
inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
inline constexpr double kTiB = 1024.0 * kGiB;
inline constexpr double kTFLOP = 1e12;
inline constexpr double kUs = 1e-6;  // seconds per microsecond
inline constexpr double kMs = 1e-3;
inline constexpr double kNs = 1e-9;

// What a quantity measures; the parser rejects a unit of another dimension.
enum class Dimension { kBytes, kBandwidth, kFlopRate, kTime };

std::string_view DimensionName(Dimension dim);
// The units accepted for a dimension, for error messages ("GB, GiB, ...").
std::string_view DimensionUnits(Dimension dim);

// Parses "<number> <unit>" into SI base units (bytes, bytes/s, FLOP/s, seconds).
// Errors name what was expected, e.g. "'80 GB/s' is a bandwidth, expected a size in bytes".
// The largest quantity a description may state, in base units (bytes, seconds, FLOP/s,
// bytes/s): 1e24, beyond anything physical, so that no figure is infinite.
inline constexpr double kMaxQuantity = 1e24;
StatusOr<double> ParseQuantity(std::string_view text, Dimension dim);

// Formats a value of the dimension with a readable unit: "80 GiB", "2.04 TB/s", "4.2 ms".
std::string FormatQuantity(double value, Dimension dim);

}  // namespace shardsim
