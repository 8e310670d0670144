// Deterministic parameter initialization: an element's initial value is a pure function of
// (seed, tensor name, the element's index in the whole, unsharded tensor).
// So any sharded layout can initialise its own slice and start bitwise identical to the
// single-process run, without communication.
#pragma once

#include <cstdint>
#include <span>

#include "runtime/cpu/param_layout.h"

namespace shardsim::runtime {

// The initial value of element `index` (row-major, 0 <= index < t.size()) of tensor `t`:
// kOnes -> 1, kZeros -> 0, kNormal -> t.init_std * z with z ~ N(0, 1) from Box-Muller over
// two SplitMix64 draws keyed by (seed, FNV-1a(name), index). Computed in double.
double InitialValue(uint64_t seed, const ParamTensor& t, int64_t index);

// out[j] = float(InitialValue(seed, t, index + j)) for j < n, bitwise, with the tensor's key
// computed once (the per-element cost is then two SplitMix64 draws and one Box-Muller).
void InitialValues(uint64_t seed, const ParamTensor& t, int64_t index, int64_t n, float* out);

// Fills every tensor of `layout` in `params` (size layout.total_size()).
template <typename S>
void InitParams(const ParamLayout& layout, uint64_t seed, std::span<S> params);

}  // namespace shardsim::runtime
