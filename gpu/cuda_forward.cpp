// The CUDA executor's launches: the forward pass over one step's flattened tokens, the
// context-split policy for attention, and CUDA graphs for decode-only steps.
//
// Graphs: a decode-only step of B sequences is padded to the next bucket (1, 2, 4, 8, 16, 24,
// 32, 48, 64, 96, ... 256) and replays that bucket's graph, captured lazily on first use (one
// eager warm-up run first, so cuBLASLt has chosen its algorithms and the attention kernel's
// shared-memory limit is set). Everything a graph reads per step (tokens, positions, block
// tables, sampling parameters) sits at fixed addresses in the metadata buffer, uploaded before
// the launch, the attention split length included: a graph launches the most splits any context
// up to max_model_len could use, each replay splits its own context as an eager step would, and
// CTAs past the real context return at once.
#include <algorithm>
#include <cmath>

#include "gpu/check.hpp"
#include "gpu/cuda_executor.hpp"

namespace conveyor::gpu {

void cuda_executor::rows_product(const bf16* a, const bf16* w, void* c, bool c_f32, int32_t T, int32_t decode_rows, int32_t n,
                                 int32_t k, float beta) {
  if (!invariant_) {
    gemm_->run(a, w, c, c_f32, T, n, k, beta, stream_);
    return;
  }
  gemm_->run(a, w, c, c_f32, decode_rows, n, k, beta, stream_, row_class::decode);
  void* rest = static_cast<char*>(c) + int64_t{decode_rows} * n * (c_f32 ? sizeof(float) : sizeof(bf16));
  gemm_->run(a + int64_t{decode_rows} * k, w, rest, c_f32, T - decode_rows, n, k, beta, stream_, row_class::prompt);
}

void cuda_executor::forward(const step_shape& sh, const attn_split& split) {
  const int32_t T = sh.tokens, S = sh.samples, D = sh.decode_rows, d = cfg_.n_embd, hd = cfg_.head_dim;
  const int32_t nq = cfg_.n_head * hd, nkv = cfg_.n_head_kv * hd, ff = cfg_.n_ff;
  const step_meta& m = meta_->device();
  const kv_shape ks{cfg_.n_head, cfg_.n_head_kv, hd, info_.block_size, info_.num_kv_blocks};
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  cudaStream_t st = stream_;

  launch_embedding(m.tokens, prev_ids_, w_.token_embd, x_, T, d, st);
  // Steps of up to fused_rows_ token rows (decode batches of 1..8, graph buckets included) take
  // the fused GEMVs: norm + QKV + RoPE and norm + gate/up + SwiGLU, 5 launches per layer instead
  // of 9 (6 for qwen3: its head norms need whole heads and stay in rope_kv_write). The O and
  // down projections add into the residual stream x themselves (cuBLASLt beta = 1) on both paths.
  const bool fused = T <= fused_rows_;
  last_fused_ = fused;
  const bool qk_norm = cfg_.qk_norm;
  for (int32_t l = 0; l < cfg_.n_layer; ++l) {
    const device_layer& L = w_.layers[static_cast<size_t>(l)];
    bf16* kc = k_cache_ + l * layer_kv_elems_;
    bf16* vc = v_cache_ + l * layer_kv_elems_;
    const rope_kv_args ra{cfg_.n_rot, cfg_.rope == model::rope_pairs::neox, L.qkv_bias, L.q_norm, L.k_norm, cfg_.rms_eps};
    if (fused) {
      launch_fused_norm_qkv(m, {x_, L.attn_norm, T, d, cfg_.rms_eps}, L.wqkv, rope_, ks, ra, qk_norm ? qkv_ : nullptr, q_,
                            kc, vc, sm_count_, st);
      if (qk_norm) launch_rope_kv_write(m, qkv_, rope_, q_, kc, vc, T, ks, ra, st);
    } else {
      launch_rmsnorm(x_, nullptr, nullptr, L.attn_norm, h_, T, d, cfg_.rms_eps, st);
      rows_product(h_, L.wqkv, qkv_, true, T, D, nq + 2 * nkv, d, 0.0f);
      launch_rope_kv_write(m, qkv_, rope_, q_, kc, vc, T, ks, ra, st);
    }
    if (invariant_)
      launch_attention_invariant(m, q_, kc, vc, attn_, T, D, sh.tiles, sh.max_tile_rows, ks, scale, split, st);
    else
      launch_attention(m, q_, kc, vc, attn_, T, sh.tiles, sh.prefill_tiles, sh.max_tile_rows, ks, scale, split, st);
    rows_product(attn_, L.wo, x_, true, T, D, d, nq, 1.0f);  // x += attn Wo^T
    if (fused) {
      launch_fused_norm_gate_up({x_, L.ffn_norm, T, d, cfg_.rms_eps}, L.w_gate_up, ff, act_, sm_count_, st);
    } else {
      launch_rmsnorm(x_, nullptr, nullptr, L.ffn_norm, h_, T, d, cfg_.rms_eps, st);
      rows_product(h_, L.w_gate_up, gu_, false, T, D, 2 * ff, d, 0.0f);
      launch_swiglu(gu_, act_, T, ff, st);
    }
    rows_product(act_, L.w_down, x_, true, T, D, d, ff, 1.0f);  // x += act Wdown^T
  }
  // Final norm and LM head for the sampled rows only.
  launch_rmsnorm(x_, nullptr, m.sample_rows, w_.output_norm, hs_, S, d, cfg_.rms_eps, st);
  gemm_->run(hs_, w_.lm_head, logits_, true, S, cfg_.vocab_size, d, 0.0f, st, invariant_ ? row_class::head : row_class::any);
  launch_sample(logits_, S, cfg_.vocab_size, m.sampling, out_ids_, out_lp_, st);
}

// Split the context when the step has few tiles (a few decodes would leave most SMs idle): enough
// splits for about 2 CTAs per SM, each at least kMinSplitLen positions (two 32-key tiles, so a
// CTA's prologue and the combine stay a small share), at most max_splits_, only for steps of up
// to split_tokens_cap_ tokens (the partials' workspace). Measured on an H200 before this policy
// (docs/gpu.md §8): at context 1030 it cut 3 splits of 352 positions, 24 CTAs for 132 SMs, 38 µs
// per layer for 4 MB of K/V; now 17 splits of 64, 136 CTAs.
int32_t cuda_executor::split_len_for(int32_t max_ctx, int32_t tiles) const {
  const int32_t ctas = std::max(1, tiles * cfg_.n_head_kv);
  const int32_t want = (2 * sm_count_ + ctas - 1) / ctas;
  const int32_t n = std::min({max_splits_, want, (max_ctx + kMinSplitLen - 1) / kMinSplitLen});
  if (n <= 1) return 0;
  const int32_t len = ((max_ctx + n - 1) / n + 31) / 32 * 32;
  return (max_ctx + len - 1) / len > 1 ? len : 0;
}

attn_split cuda_executor::eager_split(const step_shape& sh) const {
  attn_split sp;
  if (invariant_) {  // decode rows always split, at the executor's one length
    sp.split_len = inv_split_len_;
    sp.n_splits = std::max(2, (sh.max_ctx + inv_split_len_ - 1) / inv_split_len_);
    sp.part_o = part_o_;
    sp.part_ml = part_ml_;
    sp.max_rows = split_tokens_cap_;
    return sp;
  }
  if (sh.tokens > split_tokens_cap_ || sh.tiles * cfg_.n_head_kv >= 2 * sm_count_) return sp;
  sp.split_len = split_len_for(sh.max_ctx, sh.tiles);
  if (sp.split_len == 0) return attn_split{};
  sp.n_splits = (sh.max_ctx + sp.split_len - 1) / sp.split_len;
  sp.part_o = part_o_;
  sp.part_ml = part_ml_;
  return sp;
}

void cuda_executor::run_graph(int32_t bucket, const step_shape& sh, bool split) {
  attn_split sp;
  if (split) {
    sp.n_splits = graph_splits_;
    sp.split_len_dev = meta_->device().split_len;
    sp.part_o = part_o_;
    sp.part_ml = part_ml_;
    sp.max_rows = split_tokens_cap_;
  }
  last_split_ = {true, sp.n_splits, split ? meta_->split_len() : 0, sh.max_ctx};
  auto it = graphs_.find(bucket);
  if (it == graphs_.end()) {
    forward(sh, sp);  // warm-up on this step's own data (the graph recomputes the same values)
    cudaGraph_t graph = nullptr;
    CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    try {
      forward(sh, sp);
    } catch (...) {
      cudaStreamEndCapture(stream_, &graph);
      if (graph) cudaGraphDestroy(graph);
      cudaGetLastError();
      throw;
    }
    CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
    cudaGraphExec_t exec = nullptr;
    const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    CUDA_CHECK(e);
    it = graphs_.emplace(bucket, exec).first;
  }
  CUDA_CHECK(cudaGraphLaunch(it->second, stream_));
}

} // namespace conveyor::gpu
