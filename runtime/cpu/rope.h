// Rotary position embedding (RoPE; Su et al. 2021, "RoFormer", eq. 34), applied to Q and K.
// Positions enter attention only through q_t . k_s, which after rotation depends on t - s.
#pragma once

#include <cstdint>
#include <vector>

namespace shardsim::runtime {

// RoFormer's base: theta_i = base^(-2i/d). ModelSpec has no field for it yet.
inline constexpr double kRopeBase = 10000.0;

// A model's RoPE base: its rotary_base (Llama 3's 500000, Qwen's 1e6), RoFormer's 10000 when
// the description states none.
inline double RopeBaseOf(double rotary_base) { return rotary_base > 0 ? rotary_base : kRopeBase; }

// cos and sin of angle(t, i) = t * base^(-2i/d), for t < max_t and i < d/2.
template <typename S>
struct RopeTable {
  int64_t max_t = 0;
  int64_t half = 0;    // d / 2
  std::vector<S> cos;  // (max_t, d/2)
  std::vector<S> sin;  // (max_t, d/2)
};

template <typename S>
RopeTable<S> MakeRopeTable(int64_t max_t, int64_t head_dim, double base = kRopeBase);

// x (B, T, heads, d), rotated in place: within each head, the pair (x_i, x_{i+d/2}) becomes
//   (x_i cos - x_{i+d/2} sin,  x_i sin + x_{i+d/2} cos)     with angle(pos0 + t, i),
// the "rotate half" arrangement of GPT-NeoX and Hugging Face Llama (eq. 34 up to a fixed
// permutation of the coordinates). pos0: the position of each sequence's first row (a context-
// parallel chunk of the sequence starts past 0); the table must cover pos0 + T positions.
template <typename S>
void RopeForward(S* x, const RopeTable<S>& table, int64_t b, int64_t t, int64_t heads, int64_t pos0 = 0);

// dx (B, T, heads, d), in place: the gradient w.r.t. the unrotated input. The rotation is
// orthogonal, so this applies its transpose, the rotation by -angle(t, i).
// (The one backward that overwrites rather than adds: it maps a gradient onto itself.)
template <typename S>
void RopeBackward(S* dx, const RopeTable<S>& table, int64_t b, int64_t t, int64_t heads, int64_t pos0 = 0);

}  // namespace shardsim::runtime
