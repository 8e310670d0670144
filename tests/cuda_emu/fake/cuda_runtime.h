// Shadows CUDA's <cuda_runtime.h> in the CPU emulator's builds (tests/cuda_emu): the host definitions of
// the device types, intrinsics and launches (emu_device.h, emu_launch.h) and of the runtime API
// (emu_runtime.h) that runtime/cuda uses.
#pragma once

#include "tests/cuda_emu/emu_device.h"
#include "tests/cuda_emu/emu_launch.h"
#include "tests/cuda_emu/emu_runtime.h"
