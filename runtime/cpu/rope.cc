// RoPE rotation and its transpose (see rope.h). Angles are computed in double and rounded
// once, so float and double tables agree to the float's precision.
#include "runtime/cpu/rope.h"

#include <cmath>

#include "src/util/check.h"

namespace shardsim::runtime {

template <typename S>
RopeTable<S> MakeRopeTable(int64_t max_t, int64_t head_dim, double base) {
  CHECK(head_dim % 2 == 0) << "RoPE needs an even head_dim, got " << head_dim;
  RopeTable<S> table;
  table.max_t = max_t;
  table.half = head_dim / 2;
  table.cos.resize(max_t * table.half);
  table.sin.resize(max_t * table.half);
  for (int64_t t = 0; t < max_t; ++t) {
    for (int64_t i = 0; i < table.half; ++i) {
      const double theta =
          std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
      const double angle = static_cast<double>(t) * theta;
      table.cos[t * table.half + i] = static_cast<S>(std::cos(angle));
      table.sin[t * table.half + i] = static_cast<S>(std::sin(angle));
    }
  }
  return table;
}

namespace {

// Rotates every head's pairs by `sign` * angle(t, i): +1 forward, -1 for the transpose.
template <typename S>
void Rotate(S* x, const RopeTable<S>& table, int64_t b, int64_t t, int64_t heads, int64_t pos0, S sign) {
  CHECK(pos0 >= 0 && pos0 + t <= table.max_t)
      << "positions " << pos0 << ".." << pos0 + t << " past the RoPE table's " << table.max_t;
  const int64_t half = table.half;
  const int64_t d = 2 * half;
  for (int64_t row = 0; row < b * t; ++row) {
    const int64_t pos = pos0 + row % t;
    const S* cos = table.cos.data() + pos * half;
    const S* sin = table.sin.data() + pos * half;
    for (int64_t h = 0; h < heads; ++h) {
      S* v = x + (row * heads + h) * d;
      for (int64_t i = 0; i < half; ++i) {
        const S a = v[i];
        const S c = v[i + half];
        const S s = sign * sin[i];
        v[i] = a * cos[i] - c * s;
        v[i + half] = a * s + c * cos[i];
      }
    }
  }
}

}  // namespace

template <typename S>
void RopeForward(S* x, const RopeTable<S>& table, int64_t b, int64_t t, int64_t heads, int64_t pos0) {
  Rotate(x, table, b, t, heads, pos0, S(1));
}

template <typename S>
void RopeBackward(S* dx, const RopeTable<S>& table, int64_t b, int64_t t, int64_t heads, int64_t pos0) {
  Rotate(dx, table, b, t, heads, pos0, S(-1));
}

template RopeTable<float> MakeRopeTable<float>(int64_t, int64_t, double);
template RopeTable<double> MakeRopeTable<double>(int64_t, int64_t, double);
template void RopeForward<float>(float*, const RopeTable<float>&, int64_t, int64_t, int64_t, int64_t);
template void RopeForward<double>(double*, const RopeTable<double>&, int64_t, int64_t, int64_t, int64_t);
template void RopeBackward<float>(float*, const RopeTable<float>&, int64_t, int64_t, int64_t, int64_t);
template void RopeBackward<double>(double*, const RopeTable<double>&, int64_t, int64_t, int64_t, int64_t);

}  // namespace shardsim::runtime
