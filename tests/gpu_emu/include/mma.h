// CUDA emulator (tests/gpu_emu): stands in for the real mma.h (nvcuda::wmma, conveyor_emu/wmma.hpp).
#pragma once
#include "conveyor_emu/cuda_emu.hpp"
#include "conveyor_emu/wmma.hpp"
