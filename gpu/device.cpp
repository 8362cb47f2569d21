#include "gpu/device.hpp"

#include <cuda_runtime_api.h>

#include <cstdio>

namespace conveyor::gpu {

bool cuda_device_available(std::string* why, int ordinal) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    if (why)
      *why = e == cudaErrorInsufficientDriver
                 ? std::string("no NVIDIA driver (or one too old for CUDA 13) on this machine")
                 : e != cudaSuccess ? std::string("no usable CUDA device (") + cudaGetErrorString(e) + ")"
                                    : std::string("no CUDA device found");
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return false;
  }
  if (ordinal < 0 || ordinal >= n) {
    if (why) *why = "device " + std::to_string(ordinal) + " does not exist (" + std::to_string(n) + " CUDA device(s) found)";
    return false;
  }
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, ordinal) != cudaSuccess) {
    if (why) *why = "cudaGetDeviceProperties failed on device " + std::to_string(ordinal);
    cudaGetLastError();
    return false;
  }
  if (p.major < 8) {
    if (why)
      *why = "device " + std::to_string(ordinal) + ", " + std::string(p.name) + ", has compute capability " + std::to_string(p.major) + "." + std::to_string(p.minor) +
             "; the CUDA executor needs 8.0 or newer (bf16)";
    return false;
  }
  return true;
}

std::string cuda_device_description(int ordinal) {
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, ordinal) != cudaSuccess) {
    cudaGetLastError();
    return {};
  }
  char buf[512];
  std::snprintf(buf, sizeof buf, "%s (sm_%d%d, %d SMs, %.1f GiB)", p.name, p.major, p.minor, p.multiProcessorCount,
                static_cast<double>(p.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

} // namespace conveyor::gpu
