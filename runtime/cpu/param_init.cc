// Counter-based initialization (see param_init.h). Each element costs two SplitMix64 calls
// and one Box-Muller transform; no state is carried from one element to the next.
#include "runtime/cpu/param_init.h"

#include "runtime/cpu/splitmix64.h"
#include "src/util/check.h"

namespace shardsim::runtime {

namespace {

// One key per tensor, then two consecutive counters per element.
uint64_t TensorKey(uint64_t seed, const ParamTensor& t) { return SplitMix64(seed ^ Fnv1a64(t.name)); }

double NormalValue(uint64_t key, const ParamTensor& t, int64_t index) {
  const uint64_t counter = key + 2 * static_cast<uint64_t>(index);
  return t.init_std * BoxMuller(SplitMix64(counter), SplitMix64(counter + 1));
}

}  // namespace

double InitialValue(uint64_t seed, const ParamTensor& t, int64_t index) {
  CHECK(index >= 0 && index < t.size()) << t.name << " index " << index;
  switch (t.init) {
    case ParamInit::kOnes:
      return 1.0;
    case ParamInit::kZeros:
      return 0.0;
    case ParamInit::kNormal:
      return NormalValue(TensorKey(seed, t), t, index);
  }
  CHECK(false) << "unknown ParamInit";
  return 0.0;
}

void InitialValues(uint64_t seed, const ParamTensor& t, int64_t index, int64_t n, float* out) {
  CHECK(index >= 0 && n >= 0 && index + n <= t.size()) << t.name << " [" << index << ", +" << n << ")";
  if (t.init != ParamInit::kNormal) {
    for (int64_t j = 0; j < n; ++j) out[j] = static_cast<float>(InitialValue(seed, t, index + j));
    return;
  }
  const uint64_t key = TensorKey(seed, t);
  for (int64_t j = 0; j < n; ++j) out[j] = static_cast<float>(NormalValue(key, t, index + j));
}

template <typename S>
void InitParams(const ParamLayout& layout, uint64_t seed, std::span<S> params) {
  CHECK(static_cast<int64_t>(params.size()) == layout.total_size());
  for (const ParamTensor& t : layout.tensors()) {
    for (int64_t i = 0; i < t.size(); ++i) {
      params[t.offset + i] = static_cast<S>(InitialValue(seed, t, i));
    }
  }
}

template void InitParams<float>(const ParamLayout&, uint64_t, std::span<float>);
template void InitParams<double>(const ParamLayout&, uint64_t, std::span<double>);

}  // namespace shardsim::runtime
