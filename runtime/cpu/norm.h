// The model's norm, LayerNorm or RMSNorm, chosen by ModelSpec::norm.
// Lets the block and the final norm be written once for both model families.
#pragma once

#include <cstdint>

#include "runtime/cpu/layer_norm.h"
#include "runtime/cpu/rms_norm.h"
#include "src/model/model_spec.h"

namespace shardsim::runtime {

// x, y (N, C); gain, bias (C) (bias ignored, may be nullptr, for RMSNorm); mean, rstd (N)
// saved (mean unused for RMSNorm).
template <typename S>
void NormForward(Norm kind, const S* x, const S* gain, const S* bias, S* y, S* mean, S* rstd,
                 int64_t n, int64_t c) {
  if (kind == Norm::kLayerNorm) {
    LayerNormForward(x, gain, bias, y, mean, rstd, n, c);
  } else {
    RmsNormForward(x, gain, y, rstd, n, c);
  }
}

// Adds dx, dgain, dbias (dbias unused for RMSNorm).
template <typename S>
void NormBackward(Norm kind, const S* dy, const S* x, const S* gain, const S* mean, const S* rstd,
                  S* dx, S* dgain, S* dbias, int64_t n, int64_t c) {
  if (kind == Norm::kLayerNorm) {
    LayerNormBackward(dy, x, gain, mean, rstd, dx, dgain, dbias, n, c);
  } else {
    RmsNormBackward(dy, x, gain, rstd, dx, dgain, n, c);
  }
}

}  // namespace shardsim::runtime
