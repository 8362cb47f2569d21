// Dummy weights: seeded uniform values generated on the device (a counter-based hash of the
// element index), so an 8B-parameter model appears in seconds without touching the host.
#include <algorithm>

#include "gpu/check.hpp"
#include "gpu/kernels.hpp"
#include "gpu/launch.hpp"

namespace conveyor::gpu {
namespace {

__device__ __forceinline__ uint64_t mix64(uint64_t x) {  // splitmix64's finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// u in [-1, 1) with 24 random bits.
__device__ __forceinline__ float uniform_pm1(uint64_t seed, int64_t i) {
  return static_cast<float>(mix64(seed ^ mix64(static_cast<uint64_t>(i))) >> 40) * 0x1.0p-23f - 1.0f;
}

__global__ void fill_random_bf16_kernel(bf16* p, int64_t n, uint64_t seed, float scale, float offset) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    p[i] = __float2bfloat16(offset + scale * uniform_pm1(seed, i));
}

__global__ void fill_random_f32_kernel(float* p, int64_t n, uint64_t seed, float scale, float offset) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    p[i] = offset + scale * uniform_pm1(seed, i);
}

int grid_for(int64_t n) { return static_cast<int>(std::min<int64_t>((n + 255) / 256, 8 * 1024)); }

} // namespace

// Napkin math: 2 bytes written per bf16 element; Llama-3-8B's 8.0e9 parameters = 16 GB, ~6 ms of
// writes at 3 TB/s (the hash's ~20 integer ops per element keep it near that).
void launch_fill_random_bf16(bf16* p, int64_t n, uint64_t seed, float scale, float offset, cudaStream_t stream) {
  if (n <= 0) return;
  CONVEYOR_LAUNCH(fill_random_bf16_kernel, grid_for(n), 256, 0, stream, p, n, seed, scale, offset);
  CUDA_CHECK_LAUNCH();
}

void launch_fill_random_f32(float* p, int64_t n, uint64_t seed, float scale, float offset, cudaStream_t stream) {
  if (n <= 0) return;
  CONVEYOR_LAUNCH(fill_random_f32_kernel, grid_for(n), 256, 0, stream, p, n, seed, scale, offset);
  CUDA_CHECK_LAUNCH();
}

} // namespace conveyor::gpu
