// See fp8.h. A value's exponent is read with frexp; the mantissa rounded at the format's
// precision (or, below the smallest normal, at the subnormals' fixed step) with nearbyint, which
// rounds half to even in the default rounding mode.
#include "runtime/backend/fp8.h"

#include <cmath>

namespace shardsim::runtime {
namespace {

struct Format {
  int mantissa_bits;
  int bias;
  int min_exponent;  // of a normal value
  float max;
  uint8_t nan;       // a quiet NaN's code (without the sign)
};

constexpr Format kE4M3{3, 7, -6, 448.0f, 0x7F};
constexpr Format kE5M2{2, 15, -14, 57344.0f, 0x7E};

const Format& Of(Fp8Format f) { return f == Fp8Format::kE4M3 ? kE4M3 : kE5M2; }

}  // namespace

float Fp8Max(Fp8Format f) { return Of(f).max; }

uint8_t ToFp8(float v, Fp8Format f) {
  const Format& x = Of(f);
  const uint8_t sign = std::signbit(v) ? 0x80 : 0;
  if (std::isnan(v)) return sign | x.nan;
  const double a = std::fabs(static_cast<double>(v));
  if (a == 0) return sign;
  int ex = 0;
  std::frexp(a, &ex);  // a = f 2^ex, f in [0.5, 1): a's exponent is ex - 1
  int e = std::max(ex - 1, x.min_exponent);
  const int unit = 1 << x.mantissa_bits;
  double q = std::nearbyint(std::ldexp(a, x.mantissa_bits - e));  // a in steps of 2^(e - m)
  if (q >= 2 * unit) {  // rounded up into the next binade
    q /= 2;
    ++e;
  }
  const double value = std::ldexp(q, e - x.mantissa_bits);
  if (value >= static_cast<double>(x.max)) {  // saturate (SATFINITE), infinities included
    const int max_e = static_cast<int>(std::ilogb(static_cast<double>(x.max)));
    const int max_q = static_cast<int>(std::ldexp(static_cast<double>(x.max), x.mantissa_bits - max_e));
    return sign | static_cast<uint8_t>(((max_e + x.bias) << x.mantissa_bits) | (max_q - unit));
  }
  if (q < unit) return sign | static_cast<uint8_t>(q);  // subnormal (exponent field 0)
  return sign | static_cast<uint8_t>(((e + x.bias) << x.mantissa_bits) | (static_cast<int>(q) - unit));
}

float FromFp8(uint8_t code, Fp8Format f) {
  const Format& x = Of(f);
  const float sign = (code & 0x80) != 0 ? -1.0f : 1.0f;
  const int bits = code & 0x7F;
  const int field = bits >> x.mantissa_bits;
  const int mantissa = bits & ((1 << x.mantissa_bits) - 1);
  if (f == Fp8Format::kE4M3 && bits == 0x7F) return std::nanf("");
  if (f == Fp8Format::kE5M2 && field == 31) return mantissa == 0 ? sign * INFINITY : std::nanf("");
  if (field == 0) return sign * std::ldexp(static_cast<float>(mantissa), x.min_exponent - x.mantissa_bits);
  return sign * std::ldexp(static_cast<float>(mantissa + (1 << x.mantissa_bits)), field - x.bias - x.mantissa_bits);
}

float Fp8Scale(float amax, Fp8Format f) {
  if (!(amax > 0) || !std::isfinite(amax)) return 1.0f;
  return Of(f).max / amax;
}

}  // namespace shardsim::runtime
