// Decode GEMVs with their neighbours fused in (docs/gpu.md §3, §4), for steps of at most
// kFusedMaxRows token rows, where launches, not bytes, are what a small model's step costs:
//   norm + QKV + RoPE:   h = bf16(rmsnorm(x) * attn_norm) in shared memory, then rows of Wqkv,
//                        then bias, RoPE and the writes of q and K/V (rope_kv_write's epilogue);
//   norm + gate/up + SwiGLU: h = bf16(rmsnorm(x) * ffn_norm), rows j and ff + j of w_gate_up,
//                        act = bf16(silu(gate) * up) (no gu buffer, no swiglu launch).
// Every CTA normalizes the T input rows itself (the prologue: T * d * 4 B from L2), so no
// separate norm launch and no grid-wide barrier are needed. A warp owns a *pair* of output rows:
// a RoPE pair (2i, 2i+1) or (i, i + n_rot/2), or gate row j with up row ff + j, so the epilogue
// has both values in registers. Weights stream in 16-byte loads, f32 accumulation.
#include <algorithm>
#include <map>
#include <mutex>
#include <string>

#include "gpu/check.hpp"
#include "gpu/kernels.hpp"
#include "gpu/launch.hpp"

namespace conveyor::gpu {
namespace {

constexpr int kWarps = 8, kThreads = 32 * kWarps;
constexpr int kRows = kFusedMaxRows;
// Dynamic shared memory: the warps' partial sums of squares, then the normalized rows. No static
// shared memory, so the kernels' limit can be the device's whole opt-in size.
constexpr size_t kPartBytes = kWarps * kRows * sizeof(double);
constexpr int kCtasPerSm = 4;  // grid cap: enough loads in flight; more CTAs would only repeat the prologue

__device__ __forceinline__ float silu_mul(float g, float u) { return g / (1.0f + __expf(-g)) * u; }

// The dims of pair i of a head, as rope_kv.cu pairs them: rotated pairs (i < n_rot/2) are
// (2i, 2i+1), or (i, i + n_rot/2) in NEOX; the unrotated tail (and V) is paired (2i, 2i+1).
__device__ inline int2 pair_dims(int32_t i, int32_t rot_half, bool neox) {
  return neox && i < rot_half ? make_int2(i, i + rot_half) : make_int2(2 * i, 2 * i + 1);
}

// The prologue: the T rows of x, RMS-normalized with w and rounded to bf16 exactly as
// rmsnorm_residual_kernel writes h for the cuBLASLt path (sum of f32 squares in double,
// (x * scale) * w), into h_s (T, d). Ends with a barrier: every warp reads every column.
__device__ void norm_rows_to_shared(const float* __restrict__ x, const float* __restrict__ w, int32_t T, int32_t d,
                                    float eps, bf16* h_s, double* part) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  double sum[kRows];
CONVEYOR_UNROLL
  for (int t = 0; t < kRows; ++t) sum[t] = 0.0;
  for (int32_t j = threadIdx.x; j < d; j += kThreads)
CONVEYOR_UNROLL
    for (int t = 0; t < kRows; ++t)
      if (t < T) {
        const float v = x[static_cast<int64_t>(t) * d + j];
        sum[t] += static_cast<double>(v * v);
      }
CONVEYOR_UNROLL
  for (int t = 0; t < kRows; ++t) {
    if (t >= T) break;  // T is uniform: every lane takes part in the shuffles
    for (int o = 16; o > 0; o >>= 1) sum[t] += __shfl_xor_sync(0xffffffffu, sum[t], o);
    if (lane == 0) part[warp * kRows + t] = sum[t];
  }
  __syncthreads();
  float scale[kRows];
CONVEYOR_UNROLL
  for (int t = 0; t < kRows; ++t) {
    double total = 0.0;
    for (int wi = 0; wi < kWarps; ++wi) total += t < T ? part[wi * kRows + t] : 0.0;  // same order everywhere
    scale[t] = 1.0f / sqrtf(static_cast<float>(total / d) + eps);
  }
  for (int32_t j = threadIdx.x; j < d; j += kThreads)
CONVEYOR_UNROLL
    for (int t = 0; t < kRows; ++t)
      if (t < T) h_s[t * d + j] = __float2bfloat16((x[static_cast<int64_t>(t) * d + j] * scale[t]) * w[j]);
  __syncthreads();
}

// a0[t] = w0 . h_s[t], a1[t] = w1 . h_s[t] for t < T, complete in every lane (xor reduction).
// d % 8 == 0: each lane takes 8 columns (16 bytes of each row) per 256-column stride; h_s reads
// are 16 consecutive bytes per lane, conflict-free. Otherwise scalar loads (odd widths: tests).
__device__ void dot_pair(const bf16* __restrict__ w0, const bf16* __restrict__ w1, const bf16* h_s, int32_t T,
                         int32_t d, float (&a0)[kRows], float (&a1)[kRows]) {
  const int lane = threadIdx.x % 32;
CONVEYOR_UNROLL
  for (int t = 0; t < kRows; ++t) a0[t] = a1[t] = 0.0f;
  if (d % 8 == 0) {
    for (int32_t k = lane * 8; k < d; k += 256) {
      const bf16x8 u0 = *reinterpret_cast<const bf16x8*>(w0 + k), u1 = *reinterpret_cast<const bf16x8*>(w1 + k);
CONVEYOR_UNROLL
      for (int t = 0; t < kRows; ++t) {
        if (t >= T) break;
        const bf16x8 hv = *reinterpret_cast<const bf16x8*>(h_s + t * d + k);
CONVEYOR_UNROLL
        for (int q = 0; q < 4; ++q) {
          const float2 h = __bfloat1622float2(hv.p[q]), f0 = __bfloat1622float2(u0.p[q]), f1 = __bfloat1622float2(u1.p[q]);
          a0[t] = fmaf(f0.x, h.x, fmaf(f0.y, h.y, a0[t]));
          a1[t] = fmaf(f1.x, h.x, fmaf(f1.y, h.y, a1[t]));
        }
      }
    }
  } else {
    for (int32_t k = lane; k < d; k += 32) {
      const float f0 = __bfloat162float(w0[k]), f1 = __bfloat162float(w1[k]);
CONVEYOR_UNROLL
      for (int t = 0; t < kRows; ++t) {
        if (t >= T) break;
        const float h = __bfloat162float(h_s[t * d + k]);
        a0[t] = fmaf(f0, h, a0[t]);
        a1[t] = fmaf(f1, h, a1[t]);
      }
    }
  }
CONVEYOR_UNROLL
  for (int t = 0; t < kRows; ++t) {
    if (t >= T) break;
    for (int o = 16; o > 0; o >>= 1) {
      a0[t] += __shfl_xor_sync(0xffffffffu, a0[t], o);
      a1[t] += __shfl_xor_sync(0xffffffffu, a1[t], o);
    }
  }
}

// Warp u of the grid (grid-strided) owns pair unit u: pair i of head u / (hd/2) over Q, K and V
// heads. Lane t < T finishes token t: raw f32 out (qkv_raw set: qwen3, whose head norms need
// whole heads and run in rope_kv_write), or bias, rotation, and q / the cache slot in bf16.
__global__ void __launch_bounds__(kThreads)
fused_norm_qkv_kernel(step_meta m, const float* __restrict__ x, const float* __restrict__ norm_w, float norm_eps,
                      int32_t T, int32_t d, const bf16* __restrict__ wqkv, const float2* __restrict__ rope, kv_shape s,
                      rope_kv_args a, float* __restrict__ qkv_raw, bf16* __restrict__ q_out, bf16* __restrict__ k_cache,
                      bf16* __restrict__ v_cache) {
  CONVEYOR_DYNAMIC_SHARED(unsigned char, smem);
  double* part = reinterpret_cast<double*>(smem);
  bf16* h_s = reinterpret_cast<bf16*>(smem + kPartBytes);
  norm_rows_to_shared(x, norm_w, T, d, norm_eps, h_s, part);
  const int32_t half = s.head_dim / 2, rot_half = a.n_rot / 2, n_heads = s.n_head + 2 * s.n_kv, lane = threadIdx.x % 32;
  const int64_t width = static_cast<int64_t>(n_heads) * s.head_dim;
  for (int32_t u = blockIdx.x * kWarps + threadIdx.x / 32; u < n_heads * half; u += gridDim.x * kWarps) {  // warp-uniform
    const int32_t head = u / half, i = u % half;
    const int2 e = pair_dims(i, rot_half, a.neox);
    const int64_t r0 = static_cast<int64_t>(head) * s.head_dim + e.x, r1 = static_cast<int64_t>(head) * s.head_dim + e.y;
    float a0[kRows], a1[kRows];
    dot_pair(wqkv + r0 * d, wqkv + r1 * d, h_s, T, d, a0, a1);
CONVEYOR_UNROLL
    for (int t = 0; t < kRows; ++t) {
      if (t >= T || lane != t) continue;
      float2 v = make_float2(a0[t], a1[t]);
      if (qkv_raw) {
        qkv_raw[t * width + r0] = v.x;
        qkv_raw[t * width + r1] = v.y;
        continue;
      }
      if (a.bias) {
        v.x += a.bias[r0];
        v.y += a.bias[r1];
      }
      const int32_t pos = m.positions[t];
      if (head < s.n_head + s.n_kv && i < rot_half) {
        const float2 c = rope[static_cast<int64_t>(pos) * rot_half + i];
        v = make_float2(v.x * c.x - v.y * c.y, v.x * c.y + v.y * c.x);
      }
      bf16* dst;
      if (head < s.n_head) {
        dst = q_out + (static_cast<int64_t>(t) * s.n_head + head) * s.head_dim;
      } else {
        const bool is_k = head < s.n_head + s.n_kv;
        const int32_t g = is_k ? head - s.n_head : head - s.n_head - s.n_kv;
        const int64_t block = m.blocks[m.seq_block_off[m.token_seq[t]] + pos / s.block_size];
        dst = (is_k ? k_cache : v_cache) + ((block * s.n_kv + g) * s.block_size + pos % s.block_size) * s.head_dim;
      }
      dst[e.x] = __float2bfloat16(v.x);
      dst[e.y] = __float2bfloat16(v.y);
    }
  }
}

// Warp u owns gate row u and up row ff + u; lane t writes act[t][u].
__global__ void __launch_bounds__(kThreads)
fused_norm_gate_up_kernel(const float* __restrict__ x, const float* __restrict__ norm_w, float norm_eps, int32_t T,
                          int32_t d, const bf16* __restrict__ w_gate_up, int32_t ff, bf16* __restrict__ act) {
  CONVEYOR_DYNAMIC_SHARED(unsigned char, smem);
  double* part = reinterpret_cast<double*>(smem);
  bf16* h_s = reinterpret_cast<bf16*>(smem + kPartBytes);
  norm_rows_to_shared(x, norm_w, T, d, norm_eps, h_s, part);
  const int32_t lane = threadIdx.x % 32;
  for (int32_t u = blockIdx.x * kWarps + threadIdx.x / 32; u < ff; u += gridDim.x * kWarps) {  // warp-uniform
    float g[kRows], up[kRows];
    dot_pair(w_gate_up + static_cast<int64_t>(u) * d, w_gate_up + static_cast<int64_t>(ff + u) * d, h_s, T, d, g, up);
CONVEYOR_UNROLL
    for (int t = 0; t < kRows; ++t)
      if (t < T && lane == t) act[static_cast<int64_t>(t) * ff + u] = __float2bfloat16(silu_mul(g[t], up[t]));
  }
}

size_t prologue_bytes(int32_t T, int32_t d) { return kPartBytes + static_cast<size_t>(T) * d * sizeof(bf16); }

// The current device's opt-in shared-memory limit, set as both kernels' limit there on first use
// (function attributes are per device; attention.cu does the same for its kernel).
int fused_smem_limit() {
  static std::mutex mu;
  static std::map<int, int> per_device;
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = per_device.find(dev); it != per_device.end()) return it->second;
  int bytes = 48 * 1024;
  CUDA_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  CUDA_CHECK(cudaFuncSetAttribute(fused_norm_qkv_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  CUDA_CHECK(cudaFuncSetAttribute(fused_norm_gate_up_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  per_device[dev] = bytes;
  return bytes;
}

// One CTA per 8 pair units, at most kCtasPerSm per SM (each further CTA would only repeat the
// prologue's L2 reads); the warps then stride over the rest.
int grid_for(int32_t units, int32_t sm_count) {
  return std::max(1, std::min((units + kWarps - 1) / kWarps, kCtasPerSm * std::max(1, sm_count)));
}

void check_rows(const char* what, const norm_input& in) {
  if (in.T > kFusedMaxRows || prologue_bytes(in.T, in.d) > static_cast<size_t>(fused_smem_limit()))
    throw std::runtime_error(std::string(what) + ": " + std::to_string(in.T) + " rows of width " + std::to_string(in.d) +
                             " are past the fused decode kernels' bound ---> HINT: check fused_gemv_max_rows first");
}

} // namespace

int32_t fused_gemv_max_rows(int32_t d) {
  const size_t limit = static_cast<size_t>(fused_smem_limit());
  int32_t rows = kFusedMaxRows;
  while (rows > 0 && prologue_bytes(rows, d) > limit) --rows;
  return rows;
}

// Napkin math, Llama-3-8B at T = 1 (docs/gpu.md §4): Wqkv is 6144 x 4096 bf16 = 50 MB per layer,
// ~17 us at 3 TB/s; 3072 pair units -> 384 CTAs, under one wave of 4 per SM on 132 SMs. Each
// warp keeps 2 rows x 2 x 16 B = 64 B per lane (2 KB per warp, 16 KB per CTA) of loads in
// flight; 3 TB/s x ~1 us of latency is ~3 MB in flight, ~23 KB per SM: reached with >= 2 CTAs
// per SM. The prologue adds T * 16 KB of L2 reads per CTA (384 x 16 KB = 6 MB at T = 1).
void launch_fused_norm_qkv(const step_meta& m, const norm_input& in, const bf16* wqkv, const float2* rope,
                           const kv_shape& s, const rope_kv_args& a, float* qkv_raw, bf16* q_out, bf16* k_cache,
                           bf16* v_cache, int32_t sm_count, cudaStream_t stream) {
  if (in.T <= 0) return;
  check_rows("fused norm + QKV", in);
  if (!qkv_raw && (a.q_norm || a.k_norm))  // head norms need whole heads: rope_kv_write does them
    throw std::runtime_error("fused norm + QKV: q/k head norms need the raw output (qkv_raw) and launch_rope_kv_write");
  const int grid = grid_for((s.n_head + 2 * s.n_kv) * (s.head_dim / 2), sm_count);
  CONVEYOR_LAUNCH(fused_norm_qkv_kernel, grid, kThreads, prologue_bytes(in.T, in.d), stream, m, in.x, in.w, in.eps,
                  in.T, in.d, wqkv, rope, s, a, qkv_raw, q_out, k_cache, v_cache);
  CUDA_CHECK_LAUNCH();
}

// Llama-3-8B: w_gate_up is 28672 x 4096 bf16 = 235 MB per layer, ~78 us at 3 TB/s; 14336 units
// over 528 CTAs (4 per SM) = 3.4 units per warp: the last round runs 40% full, ~85% of the
// streaming rate overall (estimate). The act write (T * ff * 2 B) is noise.
void launch_fused_norm_gate_up(const norm_input& in, const bf16* w_gate_up, int32_t ff, bf16* act, int32_t sm_count,
                               cudaStream_t stream) {
  if (in.T <= 0) return;
  check_rows("fused norm + gate/up", in);
  CONVEYOR_LAUNCH(fused_norm_gate_up_kernel, grid_for(ff, sm_count), kThreads, prologue_bytes(in.T, in.d), stream,
                  in.x, in.w, in.eps, in.T, in.d, w_gate_up, ff, act);
  CUDA_CHECK_LAUNCH();
}

} // namespace conveyor::gpu
