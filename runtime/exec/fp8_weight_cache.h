// Transformer Engine's fp8 weight workspaces under dtype=fp8 (te_gemm.h): each TE module's
// weights quantized at its first use in a step (Megatron-LM passes TE is_first_microbatch, so
// the later micro-batches reuse the codes) into codes (m, k) and their transpose (k, m), held
// from then on (TE keeps a module's workspace for the next step: the memory model's
// Fp8CachedWeightBytes, 1 + 1 bytes per GEMM parameter in `other`). A module is named by its
// layer and its place in it (TeModule), not by where its bf16 weights are: ZeRO-3 gathers
// those into buffers that other layers reuse.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "runtime/backend/backend.h"

namespace shardsim::runtime {

struct Fp8CachedModule {
  std::vector<DeviceBuffer> codes, transposed;  // one per projection
  float scale_inv = 1;
  int64_t step = -1;  // the step its codes are of (-1: none yet)
};

class Fp8WeightCache {
 public:
  Fp8CachedModule& At(int32_t layer, int32_t module) { return modules_[{layer, module}]; }
  // The weights changed (an optimizer step): every module's codes are stale.
  void NewStep() { ++step_; }
  int64_t step() const { return step_; }

 private:
  std::map<std::pair<int32_t, int32_t>, Fp8CachedModule> modules_;
  int64_t step_ = 0;
};

}  // namespace shardsim::runtime
