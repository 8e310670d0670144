// The scale benchmarks' case (estimate_bench.cc, sim_bench.cc): Llama 3 405B, tp 8, pp 2,
// dp = GPUs / 16, 2 sequences per GPU, SP, ZeRO-1, selective recompute, on GPUs / 8 dgx-h100
// nodes.
#pragma once

#include <cstdint>
#include <string>

#include "src/hardware/hardware_spec.h"
#include "src/layout/validate.h"
#include "src/model/model_spec.h"

namespace shardsim {

struct Llama405bCase {
  ModelSpec model;
  HardwareSpec hardware;
  Layout layout;
};

inline Llama405bCase Llama405bOn(int64_t gpus) {
  Llama405bCase c{*LoadModel("llama3-405b"), *LoadHardware("dgx-h100"), {}};
  c.hardware.nodes = gpus / c.hardware.node.gpus;
  c.layout = *ResolveLayoutFor(*ParseLayout("tp=8,pp=2,mbs=1,gbs=" + std::to_string(2 * gpus) +
                                            ",sp=on,zero=1,recompute=selective"),
                               gpus, c.hardware);
  return c;
}

}  // namespace shardsim
