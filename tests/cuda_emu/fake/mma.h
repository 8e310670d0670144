// Shadows CUDA's <mma.h> in the CPU emulator's builds (tests/cuda_emu): nvcuda::wmma's tiles.
#pragma once

#include "tests/cuda_emu/emu_wmma.h"
