// CUDA emulator (tests/gpu_emu): stands in for the real cuda_bf16.h.
#pragma once
#include "conveyor_emu/cuda_emu.hpp"
