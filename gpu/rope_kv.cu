// Everything between the QKV projection and attention, in one kernel: the QKV bias (qwen2), an
// RMSNorm over each head of Q and K (qwen3), RoPE in either pairing (adjacent pairs "NORM", the
// GGUF layout of Llama weights; halves "NEOX", Qwen's; model-format.md §3), and the write of K and
// V into their paged cache slots. The (cos, sin) table is computed once on the host with
// model/cpu/cpu_ops.cpp's rope_angles (rope_freqs divisors and linear scaling included), so angles
// match the CPU bit for bit; the head norm sums squares in double, as the CPU's rms_norm does.
#include <algorithm>

#include "gpu/check.hpp"
#include "gpu/kernels.hpp"
#include "gpu/launch.hpp"

namespace conveyor::gpu {
namespace {

constexpr int kMaxWarps = 8;
constexpr int kMaxPairs = 4;  // pairs per lane: head_dim <= 256 = 32 lanes x 4 pairs x 2 dims

// The dims of pair i of a head. Rotated pairs (i < n_rot/2) are (2i, 2i+1), or (i, i + n_rot/2)
// in NEOX; the unrotated tail [n_rot, head_dim) is paired (2i, 2i+1) in both layouts.
__device__ inline int2 pair_dims(int32_t i, int32_t rot_half, bool neox) {
  return neox && i < rot_half ? make_int2(i, i + rot_half) : make_int2(2 * i, 2 * i + 1);
}

// One CTA per token, one warp per head (heads strided over the CTA's warps): lane l holds pairs
// l, l + 32, ... of its head in registers, so a head norm is one warp reduction and no barrier.
__global__ void rope_kv_write_kernel(step_meta m, const float* __restrict__ qkv, const float2* __restrict__ rope,
                                     bf16* __restrict__ q_out, bf16* __restrict__ k_cache, bf16* __restrict__ v_cache,
                                     kv_shape s, rope_kv_args a) {
  const int64_t t = blockIdx.x;
  const int32_t pos = m.positions[t], seq = m.token_seq[t];
  const int64_t block = m.blocks[m.seq_block_off[seq] + pos / s.block_size];
  const int32_t slot = pos % s.block_size, half = s.head_dim / 2, rot_half = a.n_rot / 2;
  const int32_t n_heads = s.n_head + 2 * s.n_kv, lane = threadIdx.x % 32;
  const float* row = qkv + t * n_heads * static_cast<int64_t>(s.head_dim);
  const float2* cs = rope + static_cast<int64_t>(pos) * rot_half;
  for (int32_t head = threadIdx.x / 32; head < n_heads; head += blockDim.x / 32) {  // warp-uniform
    const bool is_q = head < s.n_head, is_k = !is_q && head < s.n_head + s.n_kv;
    if (!is_q && block == s.pad_block) continue;  // a padding row: no real row reads its K/V (kernels.hpp)
    const int64_t h0 = static_cast<int64_t>(head) * s.head_dim;
    float2 v[kMaxPairs] = {};
    double sum = 0.0;
    for (int k = 0; k < kMaxPairs; ++k) {
      const int32_t i = lane + 32 * k;
      if (i >= half) break;
      const int2 e = pair_dims(i, rot_half, a.neox);
      v[k] = make_float2(row[h0 + e.x], row[h0 + e.y]);
      if (a.bias) {
        v[k].x += a.bias[h0 + e.x];
        v[k].y += a.bias[h0 + e.y];
      }
      sum += static_cast<double>(v[k].x * v[k].x) + static_cast<double>(v[k].y * v[k].y);
    }
    const float* nw = is_q ? a.q_norm : is_k ? a.k_norm : nullptr;
    float scale = 1.0f;
    if (nw) {
      for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
      scale = 1.0f / sqrtf(static_cast<float>(sum / s.head_dim) + a.eps);
    }
    bf16* dst;
    if (is_q) {
      dst = q_out + (t * s.n_head + head) * s.head_dim;
    } else {
      const int32_t g = is_k ? head - s.n_head : head - s.n_head - s.n_kv;
      dst = (is_k ? k_cache : v_cache) + ((block * s.n_kv + g) * s.block_size + slot) * s.head_dim;
    }
    for (int k = 0; k < kMaxPairs; ++k) {
      const int32_t i = lane + 32 * k;
      if (i >= half) break;
      const int2 e = pair_dims(i, rot_half, a.neox);
      float2 x = v[k];
      if (nw) x = make_float2((x.x * scale) * nw[e.x], (x.y * scale) * nw[e.y]);
      if (head < s.n_head + s.n_kv && i < rot_half) {
        const float2 c = cs[i];
        x = make_float2(x.x * c.x - x.y * c.y, x.x * c.y + x.y * c.x);
      }
      dst[e.x] = __float2bfloat16(x.x);
      dst[e.y] = __float2bfloat16(x.y);
    }
  }
}

} // namespace

// Napkin math per token: read (n_head + 2 n_kv) * hd f32 (and the bias, from L2), write the same
// count in bf16: 6 B per value. Llama-3-8B: 6144 values -> 37 KB per token per layer; 2048-token
// prefill: 75 MB, ~25 us at 3 TB/s per layer. Decode at batch 256: ~3 us, launch-latency-bound.
void launch_rope_kv_write(const step_meta& m, const float* qkv, const float2* rope, bf16* q_out, bf16* k_cache,
                          bf16* v_cache, int32_t T, const kv_shape& s, const rope_kv_args& a, cudaStream_t stream) {
  if (T <= 0) return;
  const int32_t threads = 32 * std::min(kMaxWarps, s.n_head + 2 * s.n_kv);
  CONVEYOR_LAUNCH(rope_kv_write_kernel, T, threads, 0, stream, m, qkv, rope, q_out, k_cache, v_cache, s, a);
  CUDA_CHECK_LAUNCH();
}

} // namespace conveyor::gpu
