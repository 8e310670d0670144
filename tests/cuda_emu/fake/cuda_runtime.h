// Shadows CUDA's <cuda_runtime.h> in the CPU emulator's builds (tests/cuda_emu): the host definitions of
// the device types, intrinsics and runtime calls the fused attention kernels use.
#pragma once

#include "tests/cuda_emu/emu_device.h"
#include "tests/cuda_emu/emu_launch.h"
