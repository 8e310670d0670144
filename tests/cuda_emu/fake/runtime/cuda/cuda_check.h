// Shadows runtime/cuda/cuda_check.h in the CPU emulator's builds (tests/cuda_emu): the real one
// needs cuBLAS's headers. A failed (emulated) runtime call is a broken invariant, as there.
#pragma once

#include "src/util/check.h"
#include "tests/cuda_emu/emu_device.h"

#define SHARDSIM_CUDA_CHECK(call)                                             \
  do {                                                                        \
    const cudaError_t _e = (call);                                            \
    CHECK(_e == cudaSuccess) << #call << ": " << cudaGetErrorName(_e) << " (" \
                             << cudaGetErrorString(_e) << ")";                \
  } while (0)
