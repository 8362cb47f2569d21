// Launchers of the CUDA executor's kernels, one family per .cu (house-style B): plain device
// pointers in, asynchronous on `stream`, every launch checked. Shapes are row-major; T is the
// step's flattened token count, bf16 is __nv_bfloat16.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <climits>
#include <cstdint>

namespace conveyor::gpu {

using bf16 = __nv_bfloat16;

/// 16 bytes of bf16 as one load, typed as what they hold (a uint4 read back as bf16 pairs would
/// break C++'s aliasing rules in the emulator's host build).
struct alignas(16) bf16x8 {
  __nv_bfloat162 p[4];
};

/// How one sampled row draws its token (engine/sampling_params.hpp, plus the position that keys
/// the counter-based coin of model/cpu/sampler.cpp).
struct sample_param {
  float temperature = 0.0f;  ///< 0: greedy
  float top_p = 1.0f;
  float min_p = 0.0f;
  int32_t top_k = 0;
  uint64_t seed = 0;
  int64_t position = 0;
};

/// One step's metadata on the device (uploaded in one copy per step, gpu/step_meta.hpp).
struct step_meta {
  const int32_t* tokens = nullptr;         ///< [T]
  const int32_t* positions = nullptr;      ///< [T]
  const int32_t* token_seq = nullptr;      ///< [T] the token's sequence, an index into seq_block_off
  const int32_t* seq_block_off = nullptr;  ///< [S+1] sequence s's blocks are blocks[off[s] .. off[s+1])
  const int32_t* blocks = nullptr;         ///< block ids, sequence after sequence
  const int32_t* tile_first = nullptr;     ///< [n_tiles] attention query tiles: first token row
  const int32_t* tile_count = nullptr;     ///< [n_tiles] rows in the tile: one sequence, consecutive positions
  const int32_t* sample_rows = nullptr;    ///< [n_sample] token rows whose logits are sampled
  const sample_param* sampling = nullptr;  ///< [n_sample]
  const int32_t* split_len = nullptr;      ///< [1] attention's positions per context split (graphs)
};

/// Paged KV cache geometry. One layer's K (and V) is
///   (num_blocks, n_kv, block_size, head_dim) bf16
/// so one (block, kv head) is a contiguous block_size x head_dim tile.
struct kv_shape {
  int32_t n_head = 0, n_kv = 0, head_dim = 0, block_size = 0;
  /// The block a graph bucket's padding rows own (step_meta.cpp), whose K/V nobody reads but
  /// them: rope_kv_write_kernel stores nothing there, so the padding rows' CTAs do not all store
  /// the same words (a race by CUDA's rules, found by gpu_emu_tsan's blocks mode). -1: none.
  int32_t pad_block = -1;
};

// embedding.cu: x[t, :] = float(table[tokens[t], :]). A negative token is the id the previous
// step sampled in row -1 - tokens[t] of `prev_ids` (a pipelined decode's k_previous_sample,
// resolved on the device so the host never waits for it); prev_ids may be null when none is.
void launch_embedding(const int32_t* tokens, const int32_t* prev_ids, const bf16* table, float* x, int32_t T, int32_t d,
                      cudaStream_t stream);

// rmsnorm.cu: for each output row i < n_rows, r = rows ? rows[i] : i; when delta is given,
// x[r] += delta[r] first (written back: a fused residual add; the executor passes none, its O and
// down GEMMs add into x with beta = 1); then
// out[i] = bf16(x[r] / sqrt(mean(x[r]^2) + eps) * w).
void launch_rmsnorm(float* x, const float* delta, const int32_t* rows, const float* w, bf16* out, int32_t n_rows,
                    int32_t d, float eps, cudaStream_t stream);

/// What rope_kv_write does to one layer's Q and K besides writing them (the per-arch switches of
/// model/formats/llama_config.hpp), in this order: bias, per-head RMSNorm, rotation.
struct rope_kv_args {
  int32_t n_rot = 0;              ///< dims rotated at the start of each head (even)
  bool neox = false;              ///< pairs (i, i + n_rot/2) (qwen2/3) instead of (2i, 2i+1) (llama)
  const float* bias = nullptr;    ///< ((n_head + 2 n_kv) * head_dim) added to Q, K and V (qwen2), or null
  const float* q_norm = nullptr;  ///< (head_dim) RMSNorm weight over each query head (qwen3), or null
  const float* k_norm = nullptr;  ///< (head_dim) the same over each key head; set with q_norm
  float eps = 1e-6f;              ///< of the head norms
};

// rope_kv.cu: qkv (T, (n_head + 2 n_kv) * head_dim) f32 -> q_out (T, n_head * head_dim) bf16 with
// RoPE on the first n_rot dims of each head; K (rotated) and V written to their cache slots, all
// after the bias and head norms of `a`. rope (max_pos, n_rot/2) holds (cos, sin) per position and
// pair (the frequency scaling is in the table).
void launch_rope_kv_write(const step_meta& m, const float* qkv, const float2* rope, bf16* q_out, bf16* k_cache,
                          bf16* v_cache, int32_t T, const kv_shape& s, const rope_kv_args& a, cudaStream_t stream);

// fused_gemv.cu: decode GEMVs with the RMSNorm in front and the next element-wise step behind
// (docs/gpu.md §3), for steps of T <= kFusedMaxRows rows: each CTA normalizes the T rows of x
// into shared memory itself. The cuBLASLt path takes larger steps.
constexpr int32_t kFusedMaxRows = 8;

/// The fused kernels' input: rows 0..T-1 of the residual stream x (T, d) f32 and the RMSNorm
/// weight w (d) f32, normalized as launch_rmsnorm does (bf16-rounded, the GEMM input's type).
struct norm_input {
  const float* x = nullptr;
  const float* w = nullptr;
  int32_t T = 0, d = 0;
  float eps = 1e-6f;
};

/// The most rows (<= kFusedMaxRows) whose normalized copy (T * d bf16, + 512 B) fits the current
/// device's shared memory: 0 when not even one does. Also sets the kernels' shared-memory limit.
int32_t fused_gemv_max_rows(int32_t d);

/// norm + QKV (+ bias + RoPE + q and K/V writes, as launch_rope_kv_write with a.q_norm unset).
/// With qkv_raw set, writes the f32 product (T, (n_head + 2 n_kv) * head_dim) there instead and
/// nothing else (qwen3: launch_rope_kv_write then adds the bias and head norms).
/// sm_count sizes the grid (CUDA-graph capturable: no allocation, no host sync).
void launch_fused_norm_qkv(const step_meta& m, const norm_input& in, const bf16* wqkv, const float2* rope,
                           const kv_shape& s, const rope_kv_args& a, float* qkv_raw, bf16* q_out, bf16* k_cache,
                           bf16* v_cache, int32_t sm_count, cudaStream_t stream);

/// norm + gate/up + SwiGLU: act (T, ff) bf16 = silu(h Wgate^T) * (h Wup^T), w_gate_up (2 ff, d)
/// holding the gate rows then the up rows.
void launch_fused_norm_gate_up(const norm_input& in, const bf16* w_gate_up, int32_t ff, bf16* act, int32_t sm_count,
                               cudaStream_t stream);

/// Split along the context (flash-decoding): n_splits > 1 needs part_o (T, n_head, n_splits,
/// head_dim) f32 and part_ml (T, n_head, n_splits, 2) f32.
struct attn_split {
  int32_t n_splits = 1;
  int32_t split_len = 0;  ///< positions per split, a multiple of 32
  /// When set, the positions per split are read from here at run time (a graph replays with each
  /// step's own split; splits past the context return at once).
  const int32_t* split_len_dev = nullptr;
  float* part_o = nullptr;
  float* part_ml = nullptr;
  /// The partials hold token rows row0 .. row0 + max_rows - 1 (0: every row of the launch); a
  /// launch with row0 > 0 starts at tile row0 (one-row tiles: launch_attention_invariant).
  int32_t row0 = 0, max_rows = 0;
};

// attention.cu: causal attention of every token row over its sequence's paged K/V, positions
// 0..positions[t]; q and out are (T, n_head * head_dim) bf16. max_tile_rows bounds
// tile_count * n_head / n_kv over the tiles it takes (it sizes shared memory); tiles of more than
// max_tile_tokens tokens, and those before tile_from, are left to another launch (attention_wmma.cu's).
// A split launch combines rows split.row0 .. T - 1.
void launch_paged_attention(const step_meta& m, const bf16* q, const bf16* k_cache, const bf16* v_cache, bf16* out,
                            int32_t T, int32_t n_tiles, int32_t max_tile_rows, const kv_shape& s, float scale,
                            const attn_split& split, cudaStream_t stream, int32_t max_tile_tokens = INT32_MAX,
                            int32_t tile_from = 0);
/// Shared memory one attention CTA needs for `rows` query rows (for the launcher's limit check).
size_t paged_attention_smem_bytes(int32_t rows, int32_t head_dim);

// attention_wmma.cu: the same attention on tensor cores for the tiles of two tokens or more
// (prompt chunks), one-token tiles before tile `all_from` skipped (from it on, every tile is this
// kernel's). Returns false, launching nothing, where it does not apply: head_dim other than 32,
// 64, 128, more than 64 rows per tile, shared memory past the device's opt-in limit.
bool launch_paged_attention_wmma(const step_meta& m, const bf16* q, const bf16* k_cache, const bf16* v_cache, bf16* out,
                                 int32_t n_tiles, int32_t max_tile_rows, const kv_shape& s, float scale, cudaStream_t stream,
                                 int32_t all_from = INT32_MAX);
/// Its shared memory per CTA (0: head_dim not supported).
size_t paged_attention_wmma_smem_bytes(int32_t head_dim);
/// One step's attention: with prefill tiles (prefill_tiles = tiles of two tokens or more) and no
/// context split, those on tensor cores and the decode tiles on the CUDA-core kernel; otherwise
/// (and wherever the wmma kernel does not apply) every tile on the CUDA-core kernel.
void launch_attention(const step_meta& m, const bf16* q, const bf16* k_cache, const bf16* v_cache, bf16* out, int32_t T,
                      int32_t n_tiles, int32_t prefill_tiles, int32_t max_tile_rows, const kv_shape& s, float scale,
                      const attn_split& split, cudaStream_t stream);
/// The batch-invariant layout (step_meta_buffer with decode rows first): the first decode_rows
/// rows are one-row tiles (the first decode_rows tiles), always on the CUDA-core kernel, split at
/// `split`'s fixed length and combined (n_splits >= 2, so a row's order depends on its own context
/// only); the prompt chunks' tiles after them on tensor cores where that kernel applies, else on
/// the CUDA-core kernel unsplit.
void launch_attention_invariant(const step_meta& m, const bf16* q, const bf16* k_cache, const bf16* v_cache, bf16* out,
                                int32_t T, int32_t decode_rows, int32_t n_tiles, int32_t max_tile_rows, const kv_shape& s,
                                float scale, const attn_split& split, cudaStream_t stream);

// swiglu.cu: gu (T, 2 ff) bf16 = [gate | up] -> out (T, ff) bf16 = silu(gate) * up.
void launch_swiglu(const bf16* gu, bf16* out, int32_t T, int32_t ff, cudaStream_t stream);

// sampling.cu: one token per row of logits (n_rows, vocab) f32, with model/cpu/sampler.cpp's
// semantics and coin; ids and log-probabilities (of the raw softmax) out.
void launch_sample(const float* logits, int32_t n_rows, int32_t vocab, const sample_param* params, int32_t* out_ids,
                   float* out_logprobs, cudaStream_t stream);

// init.cu: p[i] = offset + scale * u(seed, i), u uniform in [-1, 1) from a counter-based hash
// (dummy weights, generated on the device).
void launch_fill_random_bf16(bf16* p, int64_t n, uint64_t seed, float scale, float offset, cudaStream_t stream);
void launch_fill_random_f32(float* p, int64_t n, uint64_t seed, float scale, float offset, cudaStream_t stream);

} // namespace conveyor::gpu
