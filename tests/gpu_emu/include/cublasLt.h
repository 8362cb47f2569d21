// CUDA emulator (tests/gpu_emu): stands in for the real cublasLt.h.
#pragma once
#include "conveyor_emu/cuda_emu.hpp"
#include "conveyor_emu/cublaslt_api.hpp"
