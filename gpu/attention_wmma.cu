// Prefill attention on tensor cores (nvcuda::wmma, sm_80+, bf16 in, f32 accumulate) for the
// query tiles of prompt chunks; decode tiles (one token) stay on attention.cu's CUDA-core kernel,
// and launch_attention below decides which kernel takes which tiles.
//
// A CTA takes one query tile (count consecutive tokens of one sequence, count >= 2) x one KV
// head: R = count * G <= 64 query rows (the G heads sharing the KV head share every K/V load),
// row r = (token r / G, head r % G) as in attention.cu. Each of the 4 warps owns 16 rows; padding
// rows past R are zero queries whose scores are masked. Keys are walked in tiles of 32 positions,
// read through the block table into shared memory (positions past the context read as zeros, so
// masked products are 0 * finite). Per warp and key tile:
//   S (16 x 32) = Q K^T           wmma, Q's fragments loaded once and kept in registers
//   scores -> shared memory -> online softmax in f32 (lanes 2r, 2r+1: row r, 16 keys each),
//                                  causal mask and scale there; P rounded to bf16
//   O (16 x hd) = O * alpha + P V  wmma, O in accumulator fragments (registers)
// A fragment's element-to-lane mapping is unspecified, so nothing here indexes x[] by row: the
// per-row rescale of O goes through shared memory (store, scale rows, reload), and only when some
// row's running max grew in this tile; the epilogue divides by l the same way.
//
//   grid (n_tiles, n_kv), 128 threads; shared memory (dynamic, every piece 32-byte aligned):
//     k_s, v_s (32, hd + 8) bf16 | per warp: o_w (16, hd + 4) f32 (Q's staging at first)
//     s_w (16, 36) f32 | p_w (16, 40) bf16 | a_w, l_w (16) f32
#include <mma.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#include "gpu/check.hpp"
#include "gpu/kernels.hpp"
#include "gpu/launch.hpp"

namespace conveyor::gpu {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int kThreads = 128, kWarps = kThreads / 32, kMaxRows = 16 * kWarps;
constexpr int kKeys = 32;          // keys per tile: two 16-wide score fragments
constexpr int kLdS = kKeys + 4;    // f32 scores: ldm a multiple of 4, rows off the same banks
constexpr int kLdP = kKeys + 8;    // bf16 probabilities: ldm a multiple of 8

template <int HD>
struct smem_layout {
  static constexpr int ld_kv = HD + 8;  // bf16 K/V (and Q staging) rows: multiple of 8, padded
  static constexpr int ld_o = HD + 4;   // f32 O rows: multiple of 4, padded
  static constexpr size_t kv_bytes = size_t{kKeys} * ld_kv * 2;
  static constexpr size_t warp_bytes = 16 * ld_o * 4 + 16 * kLdS * 4 + 16 * kLdP * 2 + 2 * 16 * 4;
  static constexpr size_t bytes = 2 * kv_bytes + kWarps * warp_bytes;
  static_assert(kv_bytes % 32 == 0 && warp_bytes % 32 == 0, "wmma tiles need 256-bit aligned pointers");
};

template <int HD>
__global__ void __launch_bounds__(kThreads)
paged_attention_wmma_kernel(step_meta m, const bf16* __restrict__ q, const bf16* __restrict__ k_cache,
                            const bf16* __restrict__ v_cache, bf16* __restrict__ out, kv_shape s, float scale,
                            int all_from) {
  using L = smem_layout<HD>;
  // Dynamic shared memory starts the block's shared window (no static __shared__ here): aligned.
  CONVEYOR_DYNAMIC_SHARED(unsigned char, smem);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, G = s.n_head / s.n_kv;
  const int tile = blockIdx.x, g = blockIdx.y;
  const int first = m.tile_first[tile], count = m.tile_count[tile];
  if (count < 2 && tile < all_from) return;  // a decode tile: the CUDA-core kernel's (launch_attention)
  const int R = count * G;
  const int* table = m.blocks + m.seq_block_off[m.token_seq[first]];
  const int p0 = m.positions[first], ctx = p0 + count;  // rows are positions p0 .. ctx - 1
  auto row_out = [&](int r) { return static_cast<int64_t>(first + r / G) * s.n_head + g * G + r % G; };

  bf16* k_s = reinterpret_cast<bf16*>(smem);
  bf16* v_s = k_s + kKeys * L::ld_kv;
  float* o_w = reinterpret_cast<float*>(smem + 2 * L::kv_bytes + warp * L::warp_bytes);
  float* s_w = o_w + 16 * L::ld_o;
  bf16* p_w = reinterpret_cast<bf16*>(s_w + 16 * kLdS);
  float* a_w = reinterpret_cast<float*>(p_w + 16 * kLdP);
  float* l_w = a_w + 16;

  const int row0 = warp * 16;
  const bool active = row0 < R;                          // warp-uniform
  const int last_pos = p0 + (min(row0 + 16, R) - 1) / G;  // keys past it are masked for all the warp's rows
  const int my_r = lane / 2, half = lane % 2;            // this lane's row and half of the keys in the softmax
  const bool my_valid = row0 + my_r < R;
  const int my_pos = p0 + (row0 + my_r) / G;
  float m_run = -INFINITY, l_run = 0.0f;

  wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> q_f[HD / 16];
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> o_f[HD / 16];
  if (active) {
    bf16* q_w = reinterpret_cast<bf16*>(o_w);  // staging for Q's fragments
    for (int i = lane; i < 16 * (HD / 8); i += 32) {
      const int r = i / (HD / 8), part = i % (HD / 8);
      uint4 v = make_uint4(0, 0, 0, 0);
      if (row0 + r < R) v = *reinterpret_cast<const uint4*>(q + row_out(row0 + r) * HD + part * 8);
      *reinterpret_cast<uint4*>(q_w + r * L::ld_kv + part * 8) = v;
    }
    __syncwarp();  // the fragments take rows other lanes staged
    for (int f = 0; f < HD / 16; ++f) {
      wmma::load_matrix_sync(q_f[f], q_w + f * 16, L::ld_kv);
      wmma::fill_fragment(o_f[f], 0.0f);
    }
  }

  for (int k0 = 0; k0 < ctx; k0 += kKeys) {
    __syncthreads();  // every warp is done with the previous tile's K and V
    for (int c = tid; c < kKeys * (HD / 8); c += kThreads) {
      const int j = c / (HD / 8), part = c % (HD / 8), p = k0 + j;
      uint4 kv = make_uint4(0, 0, 0, 0), vv = kv;
      if (p < ctx) {
        const int64_t blk = table[p / s.block_size];
        const int64_t off = ((blk * s.n_kv + g) * s.block_size + p % s.block_size) * HD + part * 8;
        kv = *reinterpret_cast<const uint4*>(k_cache + off);
        vv = *reinterpret_cast<const uint4*>(v_cache + off);
      }
      *reinterpret_cast<uint4*>(k_s + j * L::ld_kv + part * 8) = kv;
      *reinterpret_cast<uint4*>(v_s + j * L::ld_kv + part * 8) = vv;
    }
    __syncthreads();  // the tile is in shared memory
    if (!active || k0 > last_pos) continue;  // warp-uniform; the barriers above are the whole CTA's

    for (int n = 0; n < kKeys / 16; ++n) {  // S = Q K^T; K's rows are B's columns (col_major)
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> s_f;
      wmma::fill_fragment(s_f, 0.0f);
      for (int f = 0; f < HD / 16; ++f) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> k_f;
        wmma::load_matrix_sync(k_f, k_s + n * 16 * L::ld_kv + f * 16, L::ld_kv);
        wmma::mma_sync(s_f, q_f[f], k_f, s_f);
      }
      wmma::store_matrix_sync(s_w + n * 16, s_f, kLdS, wmma::mem_row_major);
    }
    __syncwarp();  // the softmax reads scores other lanes stored

    float sc[16], mx = -INFINITY;
    for (int jj = 0; jj < 16; ++jj) {
      const int j = half * 16 + jj;
      sc[jj] = my_valid && k0 + j <= my_pos ? s_w[my_r * kLdS + j] * scale : -INFINITY;
      mx = fmaxf(mx, sc[jj]);
    }
    const float m_new = fmaxf(m_run, fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1)));
    float sum = 0.0f;
    for (int jj = 0; jj < 16; ++jj) {
      const bf16 pb = __float2bfloat16(m_new == -INFINITY ? 0.0f : __expf(sc[jj] - m_new));
      p_w[my_r * kLdP + half * 16 + jj] = pb;
      sum += __bfloat162float(pb);  // l sums the weights P.V uses: the output is their exact average
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    const float alpha = m_run == -INFINITY ? 1.0f : __expf(m_run - m_new);  // O and l are 0 while m is -inf
    l_run = l_run * alpha + sum;
    m_run = m_new;
    if (half == 0) a_w[my_r] = alpha;
    __syncwarp();  // P and alpha, written by other lanes, are read below

    if (__any_sync(0xffffffffu, alpha != 1.0f)) {  // O's rows * alpha, through memory (layout unknown)
      for (int f = 0; f < HD / 16; ++f) wmma::store_matrix_sync(o_w + f * 16, o_f[f], L::ld_o, wmma::mem_row_major);
      __syncwarp();
      for (int i = lane; i < 16 * HD; i += 32) o_w[(i / HD) * L::ld_o + i % HD] *= a_w[i / HD];
      __syncwarp();
      for (int f = 0; f < HD / 16; ++f) wmma::load_matrix_sync(o_f[f], o_w + f * 16, L::ld_o, wmma::mem_row_major);
    }
    for (int kk = 0; kk < kKeys / 16; ++kk) {  // O += P V
      wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> p_f;
      wmma::load_matrix_sync(p_f, p_w + kk * 16, kLdP);
      for (int f = 0; f < HD / 16; ++f) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> v_f;
        wmma::load_matrix_sync(v_f, v_s + kk * 16 * L::ld_kv + f * 16, L::ld_kv);
        wmma::mma_sync(o_f[f], p_f, v_f, o_f[f]);
      }
    }
  }

  if (!active) return;
  if (half == 0) l_w[my_r] = l_run;
  for (int f = 0; f < HD / 16; ++f) wmma::store_matrix_sync(o_w + f * 16, o_f[f], L::ld_o, wmma::mem_row_major);
  __syncwarp();  // rows (and their l) come from other lanes
  for (int i = lane; i < 16 * (HD / 2); i += 32) {
    const int r = i / (HD / 2), d = 2 * (i % (HD / 2));
    if (row0 + r >= R) continue;
    const float inv = 1.0f / l_w[r];
    *reinterpret_cast<__nv_bfloat162*>(out + row_out(row0 + r) * HD + d) =
        __floats2bfloat162_rn(o_w[r * L::ld_o + d] * inv, o_w[r * L::ld_o + d + 1] * inv);
  }
}

// The device's opt-in shared-memory limit, set as this instantiation's limit on first use there
// (function attributes are per device and per function).
template <int HD>
int optin_smem() {
  static std::mutex mu;
  static std::map<int, int> per_device;
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = per_device.find(dev); it != per_device.end()) return it->second;
  int bytes = 48 * 1024;
  CUDA_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  CUDA_CHECK(cudaFuncSetAttribute(paged_attention_wmma_kernel<HD>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  per_device[dev] = bytes;
  return bytes;
}

template <int HD>
bool launch_wmma(const step_meta& m, const bf16* q, const bf16* k_cache, const bf16* v_cache, bf16* out, int32_t n_tiles,
                 const kv_shape& s, float scale, cudaStream_t stream, int32_t all_from) {
  const size_t smem = smem_layout<HD>::bytes;
  if (smem > static_cast<size_t>(optin_smem<HD>())) return false;
  const dim3 grid(static_cast<unsigned>(n_tiles), static_cast<unsigned>(s.n_kv));
  CONVEYOR_LAUNCH(paged_attention_wmma_kernel<HD>, grid, kThreads, smem, stream, m, q, k_cache, v_cache, out, s, scale,
                  all_from);
  CUDA_CHECK_LAUNCH();
  return true;
}

} // namespace

size_t paged_attention_wmma_smem_bytes(int32_t head_dim) {
  switch (head_dim) {
    case 32: return smem_layout<32>::bytes;
    case 64: return smem_layout<64>::bytes;  // 41,472 B
    case 128: return smem_layout<128>::bytes;  // 66,048 B
    default: return 0;
  }
}

bool launch_paged_attention_wmma(const step_meta& m, const bf16* q, const bf16* k_cache, const bf16* v_cache, bf16* out,
                                 int32_t n_tiles, int32_t max_tile_rows, const kv_shape& s, float scale, cudaStream_t stream,
                                 int32_t all_from) {
  if (n_tiles <= 0 || max_tile_rows > kMaxRows) return false;
  switch (s.head_dim) {  // fragments are unrolled over head_dim: one instantiation each
    case 32: return launch_wmma<32>(m, q, k_cache, v_cache, out, n_tiles, s, scale, stream, all_from);
    case 64: return launch_wmma<64>(m, q, k_cache, v_cache, out, n_tiles, s, scale, stream, all_from);
    case 128: return launch_wmma<128>(m, q, k_cache, v_cache, out, n_tiles, s, scale, stream, all_from);
    default: return false;
  }
}

void launch_attention(const step_meta& m, const bf16* q, const bf16* k_cache, const bf16* v_cache, bf16* out, int32_t T,
                      int32_t n_tiles, int32_t prefill_tiles, int32_t max_tile_rows, const kv_shape& s, float scale,
                      const attn_split& split, cudaStream_t stream) {
  // Split steps are few-tile steps by construction (docs/gpu.md §4): they stay on one kernel.
  if (prefill_tiles > 0 && split.n_splits <= 1 &&
      launch_paged_attention_wmma(m, q, k_cache, v_cache, out, n_tiles, max_tile_rows, s, scale, stream)) {
    if (n_tiles > prefill_tiles)  // the decode tiles: G rows each
      launch_paged_attention(m, q, k_cache, v_cache, out, T, n_tiles, s.n_head / s.n_kv, s, scale, split, stream, 1);
    return;
  }
  launch_paged_attention(m, q, k_cache, v_cache, out, T, n_tiles, max_tile_rows, s, scale, split, stream);
}

void launch_attention_invariant(const step_meta& m, const bf16* q, const bf16* k_cache, const bf16* v_cache, bf16* out,
                                int32_t T, int32_t decode_rows, int32_t n_tiles, int32_t max_tile_rows, const kv_shape& s,
                                float scale, const attn_split& split, cudaStream_t stream) {
  if (split.n_splits < 2) throw std::logic_error("launch_attention_invariant: decode rows always take the split path");
  // Tiles 0 .. decode_rows - 1, one row each, as many rows at a time as the partials hold (a
  // recompute after a preemption may bring more decode rows than a step samples).
  const int32_t per_launch = split.max_rows > 0 ? split.max_rows : std::max(decode_rows, 1);
  for (int32_t r0 = 0; r0 < decode_rows; r0 += per_launch) {
    attn_split part = split;
    part.row0 = r0;
    const int32_t r1 = std::min(decode_rows, r0 + per_launch);
    launch_paged_attention(m, q, k_cache, v_cache, out, r1, r1, s.n_head / s.n_kv, s, scale, part, stream, 1, r0);
  }
  // Prompt tiles, one-row ones included (a prompt row takes one kernel however it was chunked).
  if (n_tiles > decode_rows &&
      !launch_paged_attention_wmma(m, q, k_cache, v_cache, out, n_tiles, max_tile_rows, s, scale, stream, decode_rows))
    launch_paged_attention(m, q, k_cache, v_cache, out, T, n_tiles, max_tile_rows, s, scale, attn_split{}, stream, INT32_MAX,
                           decode_rows);
}

} // namespace conveyor::gpu
