// Error checks for every CUDA runtime and cuBLAS(Lt) call. A failure throws std::runtime_error
// "<file>:<line>: <call> failed: <error> ---> HINT: <what to do>" (llm.c's cudaCheck, but
// thrown: the executor actor turns it into failed jobs and exit code 1).
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace conveyor::gpu {

[[noreturn]] inline void throw_cuda(cudaError_t e, const char* call, const char* file, int line) {
  std::string hint = "check that the GPU is healthy (nvidia-smi) and that no other process holds its memory";
  if (e == cudaErrorMemoryAllocation) hint = "lower --gpu-memory-utilization, --max-num-batched-tokens or --num-kv-blocks";
  if (e == cudaErrorNoKernelImageForDevice) hint = "rebuild with -DCMAKE_CUDA_ARCHITECTURES=<your GPU's sm, e.g. 90>";
  if (e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice) hint = "run on a machine with an NVIDIA GPU and driver, or use --device cpu";
  throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + call + " failed: " + cudaGetErrorName(e) +
                           " (" + cudaGetErrorString(e) + ") ---> HINT: " + hint);
}

[[noreturn]] inline void throw_cublas(int status, const char* call, const char* file, int line) {
  throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + call + " failed: cuBLAS status " +
                           std::to_string(status) +
                           " ---> HINT: a GEMM shape or type cuBLASLt does not support, or the GPU is out of memory");
}

} // namespace conveyor::gpu

#define CUDA_CHECK(call)                                                                   \
  do {                                                                                     \
    const cudaError_t conveyor_err_ = (call);                                              \
    if (conveyor_err_ != cudaSuccess) ::conveyor::gpu::throw_cuda(conveyor_err_, #call, __FILE__, __LINE__); \
  } while (0)

#define CUBLAS_CHECK(call)                                                                 \
  do {                                                                                     \
    const cublasStatus_t conveyor_st_ = (call);                                            \
    if (conveyor_st_ != CUBLAS_STATUS_SUCCESS)                                             \
      ::conveyor::gpu::throw_cublas(static_cast<int>(conveyor_st_), #call, __FILE__, __LINE__); \
  } while (0)

/// After every kernel launch: launch-configuration errors surface here, at their launcher.
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
