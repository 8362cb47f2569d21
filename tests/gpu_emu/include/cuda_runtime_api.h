// CUDA emulator (tests/gpu_emu): stands in for the real cuda_runtime_api.h.
#pragma once
#include "conveyor_emu/cuda_emu.hpp"
