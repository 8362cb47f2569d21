// Embedding: gathers each token's row of the bf16 table into the f32 residual stream.
#include "gpu/check.hpp"
#include "gpu/kernels.hpp"
#include "gpu/launch.hpp"

namespace conveyor::gpu {
namespace {

// One CTA per token; 8 bf16 (16 bytes) per thread per iteration when d % 8 == 0.
__global__ void embedding_gather_kernel(const int32_t* __restrict__ tokens, const int32_t* __restrict__ prev_ids,
                                        const bf16* __restrict__ table, float* __restrict__ x, int32_t d) {
  const int64_t t = blockIdx.x;
  int32_t id = tokens[t];
  if (id < 0) id = prev_ids[-1 - id];  // sampled by the step before, still on the device
  const bf16* src = table + static_cast<int64_t>(id) * d;
  float* dst = x + t * d;
  if ((d & 7) == 0) {
    for (int32_t i = threadIdx.x * 8; i < d; i += blockDim.x * 8) {
      const bf16x8 raw = *reinterpret_cast<const bf16x8*>(src + i);
      const __nv_bfloat162* h = raw.p;
      float4 a, b;
      float2 f0 = __bfloat1622float2(h[0]), f1 = __bfloat1622float2(h[1]);
      float2 f2 = __bfloat1622float2(h[2]), f3 = __bfloat1622float2(h[3]);
      a = make_float4(f0.x, f0.y, f1.x, f1.y);
      b = make_float4(f2.x, f2.y, f3.x, f3.y);
      *reinterpret_cast<float4*>(dst + i) = a;
      *reinterpret_cast<float4*>(dst + i + 4) = b;
    }
  } else {
    for (int32_t i = threadIdx.x; i < d; i += blockDim.x) dst[i] = __bfloat162float(src[i]);
  }
}

} // namespace

// Napkin math: T*d*(2 B read + 4 B written). Llama-3-8B decode at batch 256: 256*4096*6 = 6.3 MB,
// ~2 us at 3 TB/s; negligible next to the layers. Purely memory-bound, no arithmetic.
void launch_embedding(const int32_t* tokens, const int32_t* prev_ids, const bf16* table, float* x, int32_t T, int32_t d,
                      cudaStream_t stream) {
  if (T <= 0) return;
  CONVEYOR_LAUNCH(embedding_gather_kernel, T, 128, 0, stream, tokens, prev_ids, table, x, d);
  CUDA_CHECK_LAUNCH();
}

} // namespace conveyor::gpu
