// The CPU executor: one fused forward step over the flattened tokens of every scheduled
// sequence (OpenBLAS GEMMs over all tokens for every projection, or for steps of a few tokens
// the fused dequantize-and-dot kernels of qgemv.hpp), attention per sequence over the paged KV
// cache, sampling per sequence. Owns the weights and the KV pool.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/executor.hpp"
#include "model/llama_config.hpp"
#include "model/llama_weights.hpp"
#include "model/paged_kv.hpp"
#include "model/qgemv.hpp"
#include "model/qgemv_pool.hpp"
#include "model/sampler.hpp"

namespace conveyor::model {

class gguf_file;

struct cpu_executor_options {
  /// Token slots per KV block.
  int32_t block_size = 16;
  /// Memory for the KV pool; the number of blocks is derived from it.
  int64_t kv_cache_bytes = int64_t{1} << 30;
  /// When > 0, overrides kv_cache_bytes.
  int32_t num_kv_blocks = 0;
  /// Longest sequence served; 0 = the model's training context.
  int32_t max_model_len = 0;
  /// Round attention inputs as llama.cpp's CPU backend does by default (F16 KV cache, flash
  /// attention off): keys and values cached in fp16, queries and attention probabilities
  /// converted to fp16 before their products. Off: plain f32 throughout.
  /// (llama.cpp also converts activations to 8 bits before quantized-weight products; conveyor
  /// does not: that rounding is chaotic, see docs/benchmarks.md "Parity with llama.cpp".)
  bool match_llama_cpp = true;
  /// Steps of at most this many tokens run every projection and the LM head through the
  /// quantized-weight kernels (qgemv.hpp) instead of OpenBLAS over the f32 matrices; the raw
  /// blocks are kept alongside them (+~100 MB for SmolLM2-135M Q4_1). 0: OpenBLAS always, no
  /// blocks kept. Either way the logits differ only by float summation order.
  int32_t small_step_tokens = qgemv_max_tokens;
};

class cpu_executor final : public executor {
public:
  /// Reads the config and weights from `f`. Throws model_error for a model conveyor cannot run.
  cpu_executor(const gguf_file& f, const cpu_executor_options& o);

  const executor_info& info() const override { return info_; }
  /// Throws std::invalid_argument when the plan is malformed (a scheduler bug): token ids out
  /// of range, positions past max_model_len or the block table, unknown block ids.
  step_result step(const step_plan& plan) override;

  const llama_config& config() const { return cfg_; }
  /// Logits of each sampled row of the last step, in plan order: (num sampled, vocab).
  const std::vector<float>& last_logits() const { return logits_; }

private:
  void check_plan(const step_plan& plan) const;
  void flatten(const step_plan& plan);
  void attention_block(int32_t layer);
  void ffn_block(int32_t layer);
  /// C(m, n) = A(m, k) · W(n, k)^T (+ C when accumulate): qgemv over `wq` for small steps
  /// (when it was kept), else OpenBLAS over `wf`.
  void project(const float* a, const float* wf, const qmatrix& wq, float* c, int32_t m, int32_t n, int32_t k,
               bool accumulate);

  llama_config cfg_;
  llama_weights w_;
  executor_info info_;
  std::unique_ptr<paged_kv> kv_;
  bool match_llama_cpp_ = true;
  int32_t small_step_tokens_ = 0;

  // Per-step flattened batch (T tokens) and activations, reused across steps.
  std::vector<token_id> tok_;
  std::vector<int32_t> pos_;
  std::vector<const block_id*> table_;  // per token: its sequence's block table
  std::vector<float> rope_cos_, rope_sin_;  // (T, n_rot/2)
  std::vector<float> x_, h_, qkv_, attn_, gu_, act_, scores_, logits_;
  sampler_scratch scratch_;
  spinning_pool pool_;
};

} // namespace conveyor::model
