// Shadows CUDA's <cublas_v2.h> in the CPU emulator's builds (tests/cuda_emu): the calls
// runtime/cuda/cuda_gemm.cc makes, as host GEMMs (emu_blas.h).
#pragma once

#include "tests/cuda_emu/emu_blas.h"
