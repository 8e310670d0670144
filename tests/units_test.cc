// Tests of src/util/units.h: quantity strings in, SI base units out, and errors that say
// what was expected.
#include "src/util/units.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/contains.h"

namespace shardsim {
namespace {

using testing::Contains;

double ParseOk(const std::string& text, Dimension dim) {
  StatusOr<double> q = ParseQuantity(text, dim);
  EXPECT_TRUE(q.ok()) << text << ": " << q.status().message();
  return q.ok() ? *q : -1;
}

std::string ParseError(const std::string& text, Dimension dim) {
  StatusOr<double> q = ParseQuantity(text, dim);
  EXPECT_FALSE(q.ok()) << text << " parsed as " << (q.ok() ? *q : 0.0);
  return q.ok() ? std::string() : q.status().message();
}

TEST(ParseQuantity, BinarySizes) {
  // GiB is binary: 80 GiB = 80 * 2^30 = 85,899,345,920 bytes, exactly representable.
  EXPECT_EQ(ParseOk("80 GiB", Dimension::kBytes), 80.0 * (1LL << 30));
  // The A100 file writes its memory as "81920 MiB": 81920 * 2^20 = 80 * 2^30.
  EXPECT_EQ(ParseOk("81920 MiB", Dimension::kBytes), 80.0 * (1LL << 30));
  // 2 TiB = 2 * 2^40.
  EXPECT_EQ(ParseOk("2 TiB", Dimension::kBytes), 2.0 * (1LL << 40));
}

TEST(ParseQuantity, DecimalSizesDifferFromBinary) {
  // GB is decimal: 80 GB = 80e9, about 6.9% less than 80 GiB.
  EXPECT_EQ(ParseOk("80 GB", Dimension::kBytes), 80e9);
  EXPECT_LT(ParseOk("80 GB", Dimension::kBytes), ParseOk("80 GiB", Dimension::kBytes));
  EXPECT_EQ(ParseOk("512 B", Dimension::kBytes), 512.0);
}

TEST(ParseQuantity, Bandwidths) {
  // HBM of the A100-80GB: 2.039 TB/s = 2.039e12 B/s (decimal).
  EXPECT_DOUBLE_EQ(ParseOk("2.039 TB/s", Dimension::kBandwidth), 2.039e12);
  // NIC rates are in bits: 200 Gb/s = 200e9 / 8 = 25e9 bytes/s.
  EXPECT_DOUBLE_EQ(ParseOk("200 Gb/s", Dimension::kBandwidth), 25e9);
  // Bytes and bits of the same prefix differ by 8: 300 GB/s vs 300 Gb/s.
  EXPECT_DOUBLE_EQ(ParseOk("300 GB/s", Dimension::kBandwidth),
                   8 * ParseOk("300 Gb/s", Dimension::kBandwidth));
}

TEST(ParseQuantity, FlopRates) {
  // 312 TFLOP/s = 312e12 FLOP/s (A100 dense bf16).
  EXPECT_DOUBLE_EQ(ParseOk("312 TFLOP/s", Dimension::kFlopRate), 312e12);
  EXPECT_DOUBLE_EQ(ParseOk("213 GFLOP/s", Dimension::kFlopRate), 213e9);
}

TEST(ParseQuantity, Times) {
  // 5 us = 5e-6 s; 3.4 us = 3.4e-6 s; 2 ms = 2e-3 s.
  EXPECT_DOUBLE_EQ(ParseOk("5 us", Dimension::kTime), 5e-6);
  EXPECT_DOUBLE_EQ(ParseOk("3.4 us", Dimension::kTime), 3.4e-6);
  EXPECT_DOUBLE_EQ(ParseOk("2 ms", Dimension::kTime), 2e-3);
  // A time may be zero (cpu-host's collectives.base_latency is "0 us").
  EXPECT_EQ(ParseOk("0 us", Dimension::kTime), 0.0);
}

TEST(ParseQuantity, SpacingAndExponents) {
  // No space, surrounding spaces, and an exponent all read the same number.
  EXPECT_EQ(ParseOk("80GiB", Dimension::kBytes), 80.0 * (1LL << 30));
  EXPECT_EQ(ParseOk("  80 GiB  ", Dimension::kBytes), 80.0 * (1LL << 30));
  EXPECT_DOUBLE_EQ(ParseOk("1.5e3 GB/s", Dimension::kBandwidth), 1.5e12);
}

TEST(ParseQuantity, WrongDimensionSaysWhatItIsAndListsUnits) {
  const std::string e = ParseError("80 GB/s", Dimension::kBytes);
  EXPECT_TRUE(Contains(e, "'80 GB/s'"));
  EXPECT_TRUE(Contains(e, "is a bandwidth"));
  EXPECT_TRUE(Contains(e, "expected a size in bytes"));
  // The size units are listed so the user can pick one.
  EXPECT_TRUE(Contains(e, "GiB"));
  EXPECT_TRUE(Contains(e, "GB"));
  // The reverse: a size where a bandwidth is expected.
  EXPECT_TRUE(Contains(ParseError("80 GiB", Dimension::kBandwidth), "is a size in bytes"));
  // Bits exist only for bandwidths: "8 Gb" is no size.
  EXPECT_TRUE(Contains(ParseError("8 Gb", Dimension::kBytes), "unknown unit 'Gb'"));
}

TEST(ParseQuantity, MissingUnit) {
  const std::string e = ParseError("80", Dimension::kBytes);
  EXPECT_TRUE(Contains(e, "has no unit"));
  EXPECT_TRUE(Contains(e, "GiB"));
}

TEST(ParseQuantity, NotANumber) {
  EXPECT_TRUE(Contains(ParseError("abc GiB", Dimension::kBytes), "is not a quantity"));
  EXPECT_TRUE(Contains(ParseError("", Dimension::kBytes), "is not a quantity"));
  EXPECT_TRUE(Contains(ParseError("1.2.3 GiB", Dimension::kBytes), "is not a quantity"));
  // 1e999 overflows a double to infinity.
  EXPECT_TRUE(Contains(ParseError("1e999 GiB", Dimension::kBytes), "is not a quantity"));
}

TEST(ParseQuantity, SizesMustBePositive) {
  EXPECT_TRUE(Contains(ParseError("-1 GiB", Dimension::kBytes), "must be positive"));
  EXPECT_TRUE(Contains(ParseError("0 GiB", Dimension::kBytes), "must be positive"));
  EXPECT_TRUE(Contains(ParseError("0 GB/s", Dimension::kBandwidth), "must be positive"));
  EXPECT_TRUE(Contains(ParseError("0 TFLOP/s", Dimension::kFlopRate), "must be positive"));
  // Zero is fine for a time, a negative time is not.
  EXPECT_TRUE(Contains(ParseError("-1 us", Dimension::kTime), "must be positive"));
}

TEST(ParseQuantity, UnknownUnit) {
  const std::string e = ParseError("80 XB", Dimension::kBytes);
  EXPECT_TRUE(Contains(e, "unknown unit 'XB'"));
  EXPECT_TRUE(Contains(e, "GiB"));
  // Units are case sensitive: "gib" is not "GiB".
  EXPECT_TRUE(Contains(ParseError("80 gib", Dimension::kBytes), "unknown unit 'gib'"));
}

TEST(FormatQuantity, RoundNumbers) {
  // Sizes pick the largest binary unit not above the value, two decimals.
  EXPECT_EQ(FormatQuantity(80.0 * (1LL << 30), Dimension::kBytes), "80.00 GiB");
  EXPECT_EQ(FormatQuantity(2.0 * (1LL << 40), Dimension::kBytes), "2.00 TiB");
  EXPECT_EQ(FormatQuantity(1.5 * (1 << 20), Dimension::kBytes), "1.50 MiB");
  EXPECT_EQ(FormatQuantity(4096, Dimension::kBytes), "4.00 KiB");
  EXPECT_EQ(FormatQuantity(512, Dimension::kBytes), "512 B");
  // Bandwidths are always in decimal GB/s: 2.039e12 B/s = 2039 GB/s; 25e9 B/s = 25 GB/s.
  EXPECT_EQ(FormatQuantity(2.039e12, Dimension::kBandwidth), "2039.00 GB/s");
  EXPECT_EQ(FormatQuantity(25e9, Dimension::kBandwidth), "25.00 GB/s");
  // FLOP rates in TFLOP/s, one decimal.
  EXPECT_EQ(FormatQuantity(312e12, Dimension::kFlopRate), "312.0 TFLOP/s");
  // Times: seconds from 1 s, milliseconds from 1 ms, else microseconds.
  EXPECT_EQ(FormatQuantity(1.5, Dimension::kTime), "1.500 s");
  EXPECT_EQ(FormatQuantity(4.2e-3, Dimension::kTime), "4.200 ms");
  EXPECT_EQ(FormatQuantity(5e-6, Dimension::kTime), "5.00 us");
}

TEST(FormatQuantity, ParsesBack) {
  // What FormatQuantity writes, ParseQuantity reads: "80.00 GiB" -> 80 GiB.
  const double bytes = 80.0 * (1LL << 30);
  EXPECT_EQ(ParseOk(FormatQuantity(bytes, Dimension::kBytes), Dimension::kBytes), bytes);
  EXPECT_DOUBLE_EQ(ParseOk(FormatQuantity(25e9, Dimension::kBandwidth), Dimension::kBandwidth),
                   25e9);
  EXPECT_DOUBLE_EQ(ParseOk(FormatQuantity(5e-6, Dimension::kTime), Dimension::kTime), 5e-6);
}

}  // namespace
}  // namespace shardsim
