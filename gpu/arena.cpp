#include "gpu/arena.hpp"

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <utility>

#include "gpu/check.hpp"

namespace conveyor::gpu {

constexpr size_t kAlign = 256;

device_arena::device_arena(size_t bytes, const std::string& what) : capacity_(bytes), what_(what) {
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw std::runtime_error("cudaMalloc of " + std::to_string(bytes >> 20) + " MiB for " + what + " failed: " +
                             cudaGetErrorString(e) +
                             " ---> HINT: lower --gpu-memory-utilization or --max-num-batched-tokens, or free the GPU");
  }
  base_ = static_cast<char*>(p);
}

device_arena::~device_arena() {
  if (base_) cudaFree(base_);
}

device_arena::device_arena(device_arena&& o) noexcept
    : base_(std::exchange(o.base_, nullptr)), used_(o.used_), capacity_(o.capacity_), what_(std::move(o.what_)) {}

device_arena& device_arena::operator=(device_arena&& o) noexcept {
  if (this != &o) {
    if (base_) cudaFree(base_);
    base_ = std::exchange(o.base_, nullptr);
    used_ = o.used_;
    capacity_ = o.capacity_;
    what_ = std::move(o.what_);
  }
  return *this;
}

void* device_arena::take_bytes(size_t bytes) {
  const size_t at = (used_ + kAlign - 1) / kAlign * kAlign;
  used_ = at + bytes;
  if (!base_) return nullptr;
  if (used_ > capacity_)
    throw std::logic_error("device arena '" + what_ + "' overflow: " + std::to_string(used_) + " > " +
                           std::to_string(capacity_) + " bytes (sizing and carving disagree)");
  return base_ + at;
}

} // namespace conveyor::gpu
