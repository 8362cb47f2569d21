// The CUDA emulator's umbrella header: forced into every gpu/*.cu compiled as host C++ and
// included by the shadow cuda_runtime_api.h, cuda_bf16.h, ... of tests/gpu_emu/include, so the
// real CUDA headers are never seen in the emulated build. docs/gpu-emulator.md says what it checks.
#pragma once

#define CONVEYOR_CUDA_EMU 1

#include <cmath>

#include "conveyor_emu/types.hpp"
#include "conveyor_emu/runtime_api.hpp"
#include "conveyor_emu/device_api.hpp"
#include "conveyor_emu/launch.hpp"
#include "conveyor_emu/control.hpp"
