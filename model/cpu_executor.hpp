// The CPU executor: one fused forward step over the flattened tokens of every scheduled
// sequence (OpenBLAS GEMMs over all tokens for every projection), attention per sequence over
// the paged KV cache, sampling per sequence. Owns the weights and the KV pool.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/executor.hpp"
#include "model/llama_config.hpp"
#include "model/llama_weights.hpp"
#include "model/paged_kv.hpp"
#include "model/sampler.hpp"
#include "model/thread_pool.hpp"

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

  llama_config cfg_;
  llama_weights w_;
  executor_info info_;
  std::unique_ptr<paged_kv> kv_;
  bool match_llama_cpp_ = true;

  // Per-step flattened batch (T tokens) and activations, reused across steps.
  std::vector<token_id> tok_;
  std::vector<int32_t> pos_;
  std::vector<const block_id*> table_;  // per token: its sequence's block table
  std::vector<float> rope_cos_, rope_sin_;  // (T, n_rot/2)
  std::vector<float> x_, h_, qkv_, attn_, gu_, act_, scores_, logits_;
  sampler_scratch scratch_;
  thread_pool pool_;
};

} // namespace conveyor::model
