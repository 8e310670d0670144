// SplitMix64 (Steele, Lea & Flood 2014, "Fast splittable pseudorandom number generators"):
// a counter-based mixer, so a random value can be computed from its index alone.
// The runtime's determinism rests on it: initial weights and synthetic tokens are pure
// functions of (seed, name, index), whichever rank computes them.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>
#include <string_view>

namespace shardsim::runtime {

inline constexpr uint64_t kGoldenGamma = 0x9E3779B97F4A7C15ULL;

// The SplitMix64 output function applied to x + gamma: a bijection on 64-bit integers whose
// outputs pass BigCrush for consecutive inputs.
constexpr uint64_t SplitMix64(uint64_t x) {
  uint64_t z = x + kGoldenGamma;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// FNV-1a, 64-bit: a stable hash of a parameter name (std::hash is not stable across builds).
constexpr uint64_t Fnv1a64(std::string_view s) {
  uint64_t h = 0xCBF29CE484222325ULL;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001B3ULL;
  }
  return h;
}

// A uniform double in (0, 1]: the top 53 bits, shifted by one ulp so log() never sees 0.
inline double ToUnitInterval(uint64_t bits) {
  return static_cast<double>((bits >> 11) + 1) * 0x1.0p-53;
}

// One standard normal from two uniforms (Box & Muller 1958): sqrt(-2 ln u1) cos(2 pi u2).
inline double BoxMuller(uint64_t bits1, uint64_t bits2) {
  const double u1 = ToUnitInterval(bits1);
  const double u2 = ToUnitInterval(bits2);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

// A sequential stream over SplitMix64: state advances by the golden gamma per draw.
class SplitMix64Stream {
 public:
  explicit SplitMix64Stream(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    const uint64_t out = SplitMix64(state_);
    state_ += kGoldenGamma;
    return out;
  }
  // Uniform in [0, n): floor(u * n) with u = top 53 bits / 2^53 in [0, 1); the bias is below
  // n / 2^53, nothing for the vocabulary sizes used here.
  int64_t Below(int64_t n) {
    const double u = static_cast<double>(Next() >> 11) * 0x1.0p-53;
    return static_cast<int64_t>(u * static_cast<double>(n));
  }
  double Uniform() { return ToUnitInterval(Next()); }  // (0, 1]

 private:
  uint64_t state_;
};

}  // namespace shardsim::runtime
