// Paged attention for any mix of prompt chunks and decode tokens in one launch: a CTA takes one
// query tile (up to QT consecutive tokens of one sequence) x one KV head, i.e. R = QT * G query
// rows (G = n_head / n_kv, the GQA group, shares every K/V load), and walks the sequence's paged
// K/V in tiles of 32 positions with an online softmax (FlashAttention's running max and sum).
// Long decodes split the context (grid z, flash-decoding): each split writes an unnormalized
// partial (O, m, l) and a combine kernel merges them. Arithmetic is on CUDA cores in f32 from
// bf16 K/V; prompt chunks' tiles go to attention_wmma.cu's tensor-core kernel where it applies.
// K/V loads are pipelined: tile i+1's global loads go into registers before tile i's arithmetic
// and are stored into the other of two shared-memory stages after it (register prefetch, every
// arch), so a tile costs two barriers and its loads overlap the previous tile's arithmetic.
//
//   grid (n_tiles, n_kv, n_splits), 128 threads; shared memory:
//     v_s (2, 32, hd) bf16 | k_s (2, 32, hd + 2) bf16 (two stages; K padded: conflict-free column reads)
//     q_s (R, hd) bf16 | o_s (R, hd) f32 | s_s (R, 32) f32 | m_s, l_s, a_s (R) f32
#include <algorithm>
#include <map>
#include <mutex>

#include "gpu/check.hpp"
#include "gpu/kernels.hpp"
#include "gpu/launch.hpp"

namespace conveyor::gpu {
namespace {

constexpr int kKeys = 32;  // keys per tile: one per lane in the softmax step
constexpr int kThreads = 128;
constexpr int kMaxHeadDim = 256;                                // cuda_executor's limit
constexpr int kPrefetch = kKeys * (kMaxHeadDim / 8) / kThreads;  // 16-byte K and V pieces per thread

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__global__ void __launch_bounds__(kThreads)
paged_attention_tiled_kernel(step_meta m, const bf16* __restrict__ q, const bf16* __restrict__ k_cache,
                             const bf16* __restrict__ v_cache, bf16* __restrict__ out, kv_shape s, float scale,
                             attn_split sp, int max_tile_tokens, int tile_from) {
  CONVEYOR_DYNAMIC_SHARED(unsigned char, smem);
  const int tid = threadIdx.x, hd = s.head_dim, G = s.n_head / s.n_kv;
  const int tile = blockIdx.x, g = blockIdx.y, split = blockIdx.z;
  const int first = m.tile_first[tile], count = m.tile_count[tile], R = count * G;
  if (count > max_tile_tokens || tile < tile_from) return;  // another launch's tile (launch_attention); CTA-uniform
  const int* table = m.blocks + m.seq_block_off[m.token_seq[first]];
  const int p0 = m.positions[first];  // tile rows are consecutive positions p0 .. p0 + count - 1
  const int ctx = p0 + count;
  int begin = 0, end = ctx;
  if (gridDim.z > 1) {
    const int split_len = sp.split_len_dev ? *sp.split_len_dev : sp.split_len;
    begin = split * split_len;
    end = min(ctx, begin + split_len);
  }
  auto row_out = [&](int r) { return (static_cast<int64_t>(first + r / G) * s.n_head + g * G + r % G); };
  const int64_t part_base = static_cast<int64_t>(sp.row0) * s.n_head;  // partials are indexed from token row sp.row0
  if (begin >= end) {  // nothing of this split is in the context: an empty partial
    for (int r = tid; r < R; r += kThreads) {
      float* ml = sp.part_ml + ((row_out(r) - part_base) * gridDim.z + split) * 2;
      ml[0] = -INFINITY;
      ml[1] = 0.0f;
    }
    return;
  }

  const int k_stride = hd + 2;
  bf16* v_s = reinterpret_cast<bf16*>(smem);  // stage st at v_s + st * kKeys * hd
  bf16* k_s = v_s + 2 * kKeys * hd;           // stage st at k_s + st * kKeys * k_stride
  bf16* q_s = k_s + 2 * kKeys * k_stride;     // bf16 as in global memory: widening it is exact
  float* o_s = reinterpret_cast<float*>(q_s + R * hd);
  float* s_s = o_s + R * hd;
  float* m_s = s_s + R * kKeys;
  float* l_s = m_s + R;
  float* a_s = l_s + R;

  for (int i = tid; i < R * hd; i += kThreads) {
    const int r = i / hd, d = i % hd;
    q_s[i] = q[row_out(r) * hd + d];
    o_s[i] = 0.0f;
  }
  for (int r = tid; r < R; r += kThreads) {
    m_s[r] = -INFINITY;
    l_s[r] = 0.0f;
  }
  // One K/V tile is kKeys x chunks 16-byte pieces; thread tid holds pieces tid + u * kThreads.
  const int chunks = hd / 8;
  uint4 k_reg[kPrefetch], v_reg[kPrefetch];
  auto load_tile = [&](int k0) {  // global -> registers; positions past `end` read as zeros
    for (int u = 0; u < kPrefetch; ++u) {
      const int c = tid + u * kThreads, j = c / chunks, part = c % chunks, p = k0 + j;
      k_reg[u] = make_uint4(0, 0, 0, 0), v_reg[u] = k_reg[u];
      if (j < kKeys && p < end) {
        const int64_t blk = table[p / s.block_size];
        const int64_t off = ((blk * s.n_kv + g) * s.block_size + p % s.block_size) * hd + part * 8;
        k_reg[u] = *reinterpret_cast<const uint4*>(k_cache + off);
        v_reg[u] = *reinterpret_cast<const uint4*>(v_cache + off);
      }
    }
  };
  auto store_tile = [&](int stage) {  // registers -> shared-memory stage
    for (int u = 0; u < kPrefetch; ++u) {
      const int c = tid + u * kThreads, j = c / chunks, part = c % chunks;
      if (j < kKeys) {
        uint32_t* kd = reinterpret_cast<uint32_t*>(k_s + (stage * kKeys + j) * k_stride + part * 8);
        kd[0] = k_reg[u].x, kd[1] = k_reg[u].y, kd[2] = k_reg[u].z, kd[3] = k_reg[u].w;
        *reinterpret_cast<uint4*>(v_s + (stage * kKeys + j) * hd + part * 8) = v_reg[u];
      }
    }
  };
  load_tile(begin);
  store_tile(0);
  int stage = 0;
  for (int k0 = begin; k0 < end; k0 += kKeys, stage ^= 1) {
    const bool more = k0 + kKeys < end;
    if (more) load_tile(k0 + kKeys);  // in flight during this tile's arithmetic
    // Stage `stage` is stored, and the previous tile's P.V is done with s_s and a_s (and with
    // the other stage, which is refilled below after this tile's P.V: two barriers later).
    __syncthreads();
    const bf16* kt = k_s + stage * kKeys * k_stride;
    const bf16* vt = v_s + stage * kKeys * hd;
    for (int i = tid; i < R * kKeys; i += kThreads) {
      const int r = i / kKeys, j = i % kKeys, p = k0 + j;
      float sc = -INFINITY;
      if (p < end && p <= p0 + r / G) {
        const __nv_bfloat162* qr = reinterpret_cast<const __nv_bfloat162*>(q_s + r * hd);
        const __nv_bfloat162* kr = reinterpret_cast<const __nv_bfloat162*>(kt + j * k_stride);
        float acc = 0.0f;
        for (int d2 = 0; d2 < hd / 2; ++d2) {
          const float2 kf = __bfloat1622float2(kr[d2]), qf = __bfloat1622float2(qr[d2]);
          acc += qf.x * kf.x + qf.y * kf.y;
        }
        sc = acc * scale;
      }
      s_s[i] = sc;
    }
    // No barrier: thread (warp, lane) scored exactly the s_s entries it reads below (rows warp +
    // 4k, key lane: kKeys is the warp size and kThreads a multiple of it).
    const int warp = tid / 32, lane = tid % 32;
    for (int r = warp; r < R; r += kThreads / 32) {
      const float sc = s_s[r * kKeys + lane];
      const float m_old = m_s[r], m_new = fmaxf(m_old, warp_max(sc));
      const float p = m_new == -INFINITY ? 0.0f : __expf(sc - m_new);
      const float sum = warp_sum(p);
      s_s[r * kKeys + lane] = p;
      __syncwarp();  // every lane read m_s[r] above: shuffles order no memory (racecheck on an H200)
      if (lane == 0) {
        const float alpha = m_old == -INFINITY ? 0.0f : __expf(m_old - m_new);
        a_s[r] = alpha;
        l_s[r] = l_s[r] * alpha + sum;
        m_s[r] = m_new;
      }
    }
    __syncthreads();
    for (int i = tid; i < R * (hd / 2); i += kThreads) {
      const int r = i / (hd / 2), d2 = i % (hd / 2);
      const float alpha = a_s[r];
      float2 acc = make_float2(o_s[r * hd + 2 * d2] * alpha, o_s[r * hd + 2 * d2 + 1] * alpha);
      const float* pr = s_s + r * kKeys;
      for (int j = 0; j < kKeys; ++j) {
        const float2 vf = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(vt + j * hd + 2 * d2));
        acc.x += pr[j] * vf.x;
        acc.y += pr[j] * vf.y;
      }
      o_s[r * hd + 2 * d2] = acc.x;
      o_s[r * hd + 2 * d2 + 1] = acc.y;
    }
    if (more) store_tile(stage ^ 1);
  }
  __syncthreads();
  for (int i = tid; i < R * hd; i += kThreads) {
    const int r = i / hd, d = i % hd;
    const int64_t row = row_out(r);
    if (gridDim.z == 1) {
      out[row * hd + d] = __float2bfloat16(o_s[i] / l_s[r]);
    } else {
      sp.part_o[((row - part_base) * gridDim.z + split) * hd + d] = o_s[i];
      if (d == 0) {
        sp.part_ml[((row - part_base) * gridDim.z + split) * 2] = m_s[r];
        sp.part_ml[((row - part_base) * gridDim.z + split) * 2 + 1] = l_s[r];
      }
    }
  }
}

// One CTA per (token, head) of token rows row0 ..: merges the splits' partials (indexed from
// row0), weighting each by exp(m_s - M).
__global__ void paged_attention_combine_kernel(const float* __restrict__ part_o, const float* __restrict__ part_ml,
                                               bf16* __restrict__ out, int n_head, int hd, int n_splits, int row0) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * n_head + blockIdx.y;
  const int64_t out_row = static_cast<int64_t>(blockIdx.x + row0) * n_head + blockIdx.y;
  const float* ml = part_ml + row * n_splits * 2;
  float mx = -INFINITY;
  for (int k = 0; k < n_splits; ++k)
    if (ml[2 * k + 1] > 0.0f) mx = fmaxf(mx, ml[2 * k]);
  float total = 0.0f;
  for (int k = 0; k < n_splits; ++k)
    if (ml[2 * k + 1] > 0.0f) total += ml[2 * k + 1] * __expf(ml[2 * k] - mx);
  for (int d = threadIdx.x; d < hd; d += blockDim.x) {
    float acc = 0.0f;
    for (int k = 0; k < n_splits; ++k)
      if (ml[2 * k + 1] > 0.0f) acc += part_o[(row * n_splits + k) * hd + d] * __expf(ml[2 * k] - mx);
    out[out_row * hd + d] = __float2bfloat16(acc / total);
  }
}

// The current device's opt-in shared-memory limit, set as the attention kernel's limit there on
// first use. Function attributes are per device: each device gets its own.
int max_optin_smem() {
  static std::mutex mu;
  static std::map<int, int> per_device;
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = per_device.find(dev); it != per_device.end()) return it->second;
  int bytes = 48 * 1024;
  CUDA_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  CUDA_CHECK(cudaFuncSetAttribute(paged_attention_tiled_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  per_device[dev] = bytes;
  return bytes;
}

} // namespace

// Llama-3-8B (hd 128, 64 rows): 33,024 B of K/V stages + 58,112 B of rows = 91,136 B; hd 256,
// 32 rows: 65,792 + 53,632 = 119,424 B (docs/gpu.md §4).
size_t paged_attention_smem_bytes(int32_t rows, int32_t head_dim) {
  const size_t r = static_cast<size_t>(rows), hd = static_cast<size_t>(head_dim);
  return 2 * (kKeys * hd * 2 + kKeys * (hd + 2) * 2) + r * hd * 2 + (r * hd + r * kKeys + 3 * r) * 4;
}

// Napkin math. Decode (Llama-3-8B, context L per sequence): every step reads all cached K/V,
// 2 * 8 heads * 128 * 2 B = 4 KB per position per layer, so batch 64 x L 1024 reads 268 MB per
// layer (~90 us at 3 TB/s); the arithmetic (4 * G = 16 FLOP per K/V byte pair) stays far under
// the CUDA cores' rate, so decode attention is memory-bound and splits keep >= 2 CTAs per SM busy.
// Prefill (2048-token prompt): 4 * T^2/2 * hd * n_head = 1.1e12 FLOP over 32 layers on CUDA cores
// (~25 TFLOP/s reachable from shared memory): ~45 ms, about the GEMMs' time; hence prompt
// chunks on tensor cores (attention_wmma.cu, docs/gpu.md §4).
void launch_paged_attention(const step_meta& m, const bf16* q, const bf16* k_cache, const bf16* v_cache, bf16* out,
                            int32_t T, int32_t n_tiles, int32_t max_tile_rows, const kv_shape& s, float scale,
                            const attn_split& split, cudaStream_t stream, int32_t max_tile_tokens, int32_t tile_from) {
  if (T <= 0 || n_tiles <= 0) return;
  if (s.head_dim % 8 != 0 || s.head_dim > kMaxHeadDim)  // the kernel's 16-byte pieces and prefetch registers
    throw std::runtime_error("paged attention: head_dim " + std::to_string(s.head_dim) +
                             " is not a multiple of 8 up to " + std::to_string(kMaxHeadDim));
  const size_t smem = paged_attention_smem_bytes(max_tile_rows, s.head_dim);
  if (smem > static_cast<size_t>(max_optin_smem()))
    throw std::runtime_error("paged attention: " + std::to_string(max_tile_rows) + " rows of head_dim " +
                             std::to_string(s.head_dim) + " need " + std::to_string(smem) +
                             " B of shared memory, more than the device allows ---> HINT: smaller query tiles");
  const dim3 grid(static_cast<unsigned>(n_tiles), static_cast<unsigned>(s.n_kv), static_cast<unsigned>(std::max(1, split.n_splits)));
  CONVEYOR_LAUNCH(paged_attention_tiled_kernel, grid, kThreads, smem, stream, m, q, k_cache, v_cache, out, s, scale, split,
                  max_tile_tokens, tile_from);
  CUDA_CHECK_LAUNCH();
  if (split.n_splits > 1) {
    const dim3 cgrid(static_cast<unsigned>(T - split.row0), static_cast<unsigned>(s.n_head));
    CONVEYOR_LAUNCH(paged_attention_combine_kernel, cgrid, (std::min(128, s.head_dim)), 0, stream, split.part_o, split.part_ml,
                    out, s.n_head, s.head_dim, split.n_splits, split.row0);
    CUDA_CHECK_LAUNCH();
  }
}

} // namespace conveyor::gpu
