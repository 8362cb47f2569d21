// The CUDA executor: one fused forward step over the flattened tokens of every scheduled
// sequence, with the CPU executor's semantics (model/cpu/cpu_executor.hpp) and bf16 weights. Per
// layer: RMSNorm -> QKV GEMM -> QKV bias, q/k head norms, RoPE + KV write (one kernel; the bias
// and norms as the arch asks: llama, qwen2, qwen3) -> paged attention -> O GEMM added into the
// residual stream -> RMSNorm -> gate/up GEMM -> SwiGLU -> down GEMM added into the residual
// stream; then the final norm and LM head on the sampled rows only, and sampling on the device.
// Only the sampled ids and their log-probabilities come back to the host. Decode-only steps
// replay CUDA graphs captured per bucketed batch size. Steps of up to 8 token rows fuse each
// norm into the GEMV after it (gpu/fused_gemv.cu). Steps are pipelined (submit() returns at once,
// collect() waits), so the host plans and uploads step N+1 while the GPU runs step N.
// docs/gpu.md has the memory layout and the napkin math.
#pragma once

#include <cuda_runtime_api.h>

#include <deque>
#include <map>
#include <unordered_map>
#include <memory>
#include <string>
#include <vector>

#include "engine/executor.hpp"
#include "gpu/arena.hpp"
#include "gpu/factory.hpp"
#include "gpu/gemm.hpp"
#include "gpu/step_meta.hpp"
#include "gpu/weights.hpp"
#include "model/cpu/sampler.hpp"
#include "model/formats/llama_config.hpp"

namespace conveyor::gpu {

class cuda_executor final : public executor {
public:
  /// Loads the GGUF's weights (bf16). Throws model_error for a model conveyor cannot run and
  /// std::runtime_error for a CUDA failure or too little GPU memory.
  cuda_executor(const model::gguf_file& f, const cuda_executor_options& o);
  /// Random weights of shape `c`, generated on the device.
  cuda_executor(const model::llama_config& c, const cuda_executor_options& o);
  ~cuda_executor() override;

  const executor_info& info() const override { return info_; }
  /// submit() then collect(). Throws std::invalid_argument for a malformed plan (as the CPU
  /// executor does) or one past this executor's capacities (max_num_batched_tokens,
  /// max_num_seqs); std::runtime_error on a CUDA failure.
  step_result step(const step_plan& plan) override;
  /// Queues the step on the stream and returns without waiting (docs/gpu.md §3, "Pipelined
  /// steps"): metadata from one of two pinned buffers, sampled ids and log-probabilities copied
  /// into one of two pinned result slots, an event recorded behind them. k_previous_sample tokens
  /// read the previous step's sampled ids on the device. A step with a grammar or top logprobs
  /// samples those rows on the host and so waits here. At most two steps may be outstanding
  /// (std::logic_error past that).
  void submit(const step_plan& plan) override;
  /// Waits for the oldest outstanding step's event (blocking, not spinning) and returns its result.
  step_result collect() override;
  int32_t num_outstanding() const override { return static_cast<int32_t>(outstanding_.size()); }

  const model::llama_config& config() const { return cfg_; }
  /// Logits of each sampled row of the last step, in plan order: (num sampled, vocab). Copies
  /// them from the device (tests and debugging only).
  std::vector<float> last_logits() const;
  /// One line: weights, activations and KV pool sizes, graph buckets.
  std::string memory_summary() const;
  /// How the last step ran attention (tests and debugging): through a graph or eagerly, the
  /// context split (splits launched, positions per split) and the longest context.
  struct split_info {
    bool graph = false;
    int32_t n_splits = 1, split_len = 0, max_ctx = 0;
    /// Splits that hold part of the longest context (the CTAs that do work per query tile).
    int32_t active() const { return split_len > 0 ? (max_ctx + split_len - 1) / split_len : 1; }
  };
  const split_info& last_split() const { return last_split_; }
  /// Whether the last step ran the fused decode GEMVs (gpu/fused_gemv.cu) instead of cuBLASLt.
  bool last_step_fused() const { return last_fused_; }

private:
  void init(const model::gguf_file* f, const cuda_executor_options& o);
  void check_plan(const step_plan& plan) const;
  void read_slot(int32_t slot, step_result& r) const;
  /// The host draws of a sampling sequence whose rows need the host (grammar, logit edits, top
  /// logprobs): its 1 + num_drafts sampled rows from `row` on, into out[0 .. num_drafts].
  void resample_on_host(const scheduled_seq& s, int32_t row, sampled_token* out);
  /// c = a w^T (+ c) over the step's T rows; batch-invariant: the first decode_rows rows and the
  /// rest as two products, each with its row class's one algorithm.
  void rows_product(const bf16* a, const bf16* w, void* c, bool c_f32, int32_t T, int32_t decode_rows, int32_t n,
                    int32_t k, float beta);
  /// The plan's prompt targets (scheduled_seq::prompt_targets), scored in plan order.
  std::vector<sampled_token> score_prompts(const step_plan& plan);
  /// Launches the whole forward and the sampling for the filled metadata on stream_.
  void forward(const step_shape& sh, const attn_split& split);
  attn_split eager_split(const step_shape& sh) const;
  /// Positions per context split for a step of `tiles` query tiles whose longest context is
  /// max_ctx (0: do not split).
  int32_t split_len_for(int32_t max_ctx, int32_t tiles) const;
  static constexpr int32_t kMinSplitLen = 64;  ///< two 32-key tiles
  int32_t bucket_for(int32_t batch) const;
  void run_graph(int32_t bucket, const step_shape& sh, bool split);

  model::llama_config cfg_;
  executor_info info_;
  cuda_executor_options opt_;
  int32_t device_ = 0, sm_count_ = 0;
  /// Owns the stream, so that a constructor that throws after creating it releases it too.
  struct stream_holder {
    cudaStream_t s = nullptr;
    stream_holder() = default;
    stream_holder(const stream_holder&) = delete;
    stream_holder& operator=(const stream_holder&) = delete;
    ~stream_holder();
    operator cudaStream_t() const { return s; }
  };
  stream_holder stream_;
  std::unique_ptr<gemm_runner> gemm_;
  device_arena weight_arena_, act_arena_, kv_arena_;
  device_weights w_;
  std::unique_ptr<step_meta_buffer> meta_;
  int32_t tile_tokens_ = 1, group_ = 1, max_splits_ = 1, split_tokens_cap_ = 0;
  int32_t graph_splits_ = 1;
  /// Batch-invariant mode (cuda_executor_options::batch_invariant or max_drafts > 0): decode rows
  /// always split their context at inv_split_len_ positions (docs/gpu.md §3).
  bool invariant_ = false;
  int32_t inv_split_len_ = 0, max_drafts_ = 0;
  /// Steps of at most this many token rows take the fused decode GEMVs (0: never).
  int32_t fused_rows_ = 0;
  bool last_fused_ = false;
  std::vector<int32_t> buckets_;
  std::map<int32_t, cudaGraphExec_t> graphs_;
  int32_t last_samples_ = 0;
  split_info last_split_;

  // Activations (capacity: step_caps.tokens rows; sampled rows: step_caps.sample_cap()).
  float* x_ = nullptr;       // (T, d) residual stream
  bf16* h_ = nullptr;        // (T, d) normalized (cuBLASLt path)
  float* qkv_ = nullptr;     // (T, nq + 2 nkv)
  bf16* q_ = nullptr;        // (T, nq) rotated queries
  bf16* attn_ = nullptr;     // (T, nq)
  bf16* gu_ = nullptr;       // (T, 2 ff) (cuBLASLt path)
  bf16* act_ = nullptr;      // (T, ff)
  bf16* hs_ = nullptr;       // (S, d) normed sampled rows
  float* logits_ = nullptr;  // (S, vocab)
  float* part_o_ = nullptr;  // split-context partials (split_tokens_cap, n_head, max_splits, hd)
  float* part_ml_ = nullptr;
  float2* rope_ = nullptr;   // (max_model_len, n_rot/2) (cos, sin)
  int32_t* out_ids_ = nullptr;  // (S)
  int32_t* prev_ids_ = nullptr; // (S) the previous step's out_ids_, read by k_previous_sample tokens
  float* out_lp_ = nullptr;     // (S)
  int32_t* score_rows_ = nullptr;  // (S) prompt logprobs: the token rows scored in one pass
  // Pipelined steps: two pinned result slots (ids, log-probabilities, the event behind their
  // copies), used in turn; the steps submitted and not yet collected; each sampled sequence's row
  // in the last submitted step (for k_previous_sample).
  struct result_slots {
    int32_t* ids[2] = {nullptr, nullptr};
    float* lp[2] = {nullptr, nullptr};
    cudaEvent_t done[2] = {nullptr, nullptr};
    result_slots() = default;
    result_slots(const result_slots&) = delete;
    result_slots& operator=(const result_slots&) = delete;
    ~result_slots();
  };
  struct outstanding_step {
    int32_t slot = 0;
    bool ready = false;  // sampled on the host already (grammar, top logprobs)
    step_result result;
  };
  result_slots slots_;
  std::deque<outstanding_step> outstanding_;
  std::unordered_map<seq_id, int32_t> prev_row_;
  int32_t next_slot_ = 0;
  std::vector<float> host_row_;             // resample_on_host: one row of logits; score_prompts: S rows
  model::sampler_scratch host_scratch_;
  std::vector<std::vector<uint32_t>> host_masks_;  // one per row of a drafted sequence
  std::vector<logit_edit> host_edits_;
  // KV pool: k then v, each (n_layer, num_blocks + 1, n_kv, block_size, hd) bf16; the last block
  // of each layer is the padding rows' sink, never handed to the scheduler.
  bf16* k_cache_ = nullptr;
  bf16* v_cache_ = nullptr;
  int64_t layer_kv_elems_ = 0;
};

} // namespace conveyor::gpu
