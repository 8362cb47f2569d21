// RoPE on Q and K (adjacent pairs, ggml's "NORM" layout of GGUF Llama weights; model-format.md
// §3) fused with the write of K and V into their paged cache slots. The (cos, sin) table is
// computed once on the host with model/cpu_ops.cpp's rope_angles, so angles match the CPU bit
// for bit.
#include "gpu/check.hpp"
#include "gpu/kernels.hpp"
#include "gpu/launch.hpp"

namespace conveyor::gpu {
namespace {

// One CTA per token; threads stride over the (n_head + 2 n_kv) * head_dim/2 pairs of its row.
__global__ void rope_kv_write_kernel(step_meta m, const float* __restrict__ qkv, const float2* __restrict__ rope,
                                     bf16* __restrict__ q_out, bf16* __restrict__ k_cache, bf16* __restrict__ v_cache,
                                     kv_shape s, int32_t n_rot) {
  const int64_t t = blockIdx.x;
  const int32_t pos = m.positions[t], seq = m.token_seq[t];
  const int64_t block = m.blocks[m.seq_block_off[seq] + pos / s.block_size];
  const int32_t slot = pos % s.block_size, half = s.head_dim / 2, n_pairs = (s.n_head + 2 * s.n_kv) * half;
  const float* row = qkv + t * static_cast<int64_t>(s.n_head + 2 * s.n_kv) * s.head_dim;
  const float2* cs = rope + static_cast<int64_t>(pos) * (n_rot / 2);
  for (int32_t j = threadIdx.x; j < n_pairs; j += blockDim.x) {
    const int32_t head = j / half, i = j % half;
    float2 v = *reinterpret_cast<const float2*>(row + static_cast<int64_t>(head) * s.head_dim + 2 * i);
    if (head < s.n_head + s.n_kv && i < n_rot / 2) {
      const float2 c = cs[i];
      v = make_float2(v.x * c.x - v.y * c.y, v.x * c.y + v.y * c.x);
    }
    const __nv_bfloat162 b = __floats2bfloat162_rn(v.x, v.y);
    if (head < s.n_head) {
      *reinterpret_cast<__nv_bfloat162*>(q_out + (t * s.n_head + head) * s.head_dim + 2 * i) = b;
    } else {
      const bool is_k = head < s.n_head + s.n_kv;
      const int32_t g = is_k ? head - s.n_head : head - s.n_head - s.n_kv;
      bf16* cache = is_k ? k_cache : v_cache;
      const int64_t off = ((block * s.n_kv + g) * s.block_size + slot) * s.head_dim + 2 * i;
      *reinterpret_cast<__nv_bfloat162*>(cache + off) = b;
    }
  }
}

} // namespace

// Napkin math per token: read (n_head + 2 n_kv) * hd f32, write the same count in bf16: 6 B per
// value. Llama-3-8B: 6144 values -> 37 KB per token per layer; 2048-token prefill: 75 MB, ~25 us
// at 3 TB/s per layer. Decode at batch 256: ~3 us, launch-latency-bound.
void launch_rope_kv_write(const step_meta& m, const float* qkv, const float2* rope, bf16* q_out, bf16* k_cache,
                          bf16* v_cache, int32_t T, const kv_shape& s, int32_t n_rot, cudaStream_t stream) {
  if (T <= 0) return;
  CONVEYOR_LAUNCH(rope_kv_write_kernel, T, 256, 0, stream, m, qkv, rope, q_out, k_cache, v_cache, s, n_rot);
  CUDA_CHECK_LAUNCH();
}

} // namespace conveyor::gpu
