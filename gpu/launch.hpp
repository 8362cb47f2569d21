// The three spellings gpu/'s kernels use for CUDA-only syntax, so that the same sources also
// build as host C++ under the CPU emulator (tests/gpu_emu, docs/gpu-emulator.md), which defines
// CONVEYOR_CUDA_EMU and these macros itself:
//   CONVEYOR_LAUNCH(kernel, grid, block, smem, stream, args...)  kernel<<<grid, block, smem, stream>>>(args...)
//   CONVEYOR_SHARED(T, name)            a block-wide __shared__ variable (T may be an array type)
//   CONVEYOR_DYNAMIC_SHARED(T, name)    the launch's dynamic shared memory as T name[]
//   CONVEYOR_UNROLL                     #pragma unroll under nvcc (loops over register arrays), nothing
//                                       in host C++ (gcc warns about the unknown pragma)
// Macro arguments containing commas need parentheses: CONVEYOR_LAUNCH(k, g, (std::min(a, b)), ...).
#pragma once

#if !defined(CONVEYOR_CUDA_EMU)
#include <type_traits>

#define CONVEYOR_LAUNCH(kernel, grid, block, smem, stream, ...) kernel<<<grid, block, smem, stream>>>(__VA_ARGS__)
#define CONVEYOR_SHARED(T, name) __shared__ std::type_identity_t<T> name
#define CONVEYOR_DYNAMIC_SHARED(T, name) extern __shared__ __align__(16) T name[]
#endif

#if defined(__CUDACC__)
#define CONVEYOR_UNROLL _Pragma("unroll")
#else
#define CONVEYOR_UNROLL
#endif
