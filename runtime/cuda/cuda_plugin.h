// The CUDA backend as a plugin: shardsim's binary links none of CUDA's libraries (cuBLASLt
// alone is over 500 MB, and mapping and relocating it cost every command about 0.35 s at
// start-up) and loads libshardsim_cuda.so, built beside it from runtime/cuda/ and
// cuda_plugin.cc, only when `run` or `calibrate` asks for `--backend cuda`
// (runtime/cli/run_backend.cc). The plugin carries its own copy of the core and runtime
// libraries; only this entry point crosses, with types both sides build from the same headers.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "runtime/backend/backend.h"
#include "runtime/cli/run_backend.h"
#include "src/layout/layout.h"

namespace shardsim::runtime {

inline constexpr const char* kCudaPluginFile = "libshardsim_cuda.so";
inline constexpr const char* kCudaPluginSymbol = "shardsim_cuda_run_backend";

// The CUDA backend for this process under `l` (MakeRunBackend's contract): the layout's groups
// over NCCL when the world has several processes, one process's collectives, or
// EmulatedCollectives for `emulate_rank` >= 0. Returns false with *error set when it cannot.
using CudaRunBackendFn = bool (*)(const Layout& l, const RunProcess& p, int64_t emulate_rank, double timeout_s,
                                  std::unique_ptr<Backend>* out, std::string* error);

}  // namespace shardsim::runtime
