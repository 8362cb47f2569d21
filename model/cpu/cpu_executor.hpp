// The CPU executor: one fused forward step over the flattened tokens of every scheduled
// sequence: each projection one product over all the step's tokens with the weights read in
// their GGUF block types from the file's mapping (cpu_matmul.hpp: 8-bit activations and integer
// dot products by default, or exact f32), attention per token over the paged KV cache, sampling
// per sequence. Owns the KV pool and the thread pool; views the weights.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/executor.hpp"
#include "model/cpu/cpu_matmul.hpp"
#include "model/cpu/llama_weights.hpp"
#include "model/cpu/paged_kv.hpp"
#include "model/cpu/qgemv_pool.hpp"
#include "model/cpu/sampler.hpp"
#include "model/formats/llama_config.hpp"

namespace conveyor::model {

class gguf_file;

struct cpu_executor_options {
  /// Token slots per KV block.
  int32_t block_size = 16;
  /// Memory for the KV pool; the number of blocks is derived from it. 0: sized from the model
  /// and the machine (auto_kv_cache_bytes() in engine/config.hpp; kv_sizing() says how).
  int64_t kv_cache_bytes = 0;
  /// When > 0, overrides kv_cache_bytes.
  int32_t num_kv_blocks = 0;
  /// Longest sequence served; 0 = the model's training context.
  int32_t max_model_len = 0;
  /// Round attention inputs as llama.cpp's CPU backend does by default (F16 KV cache, flash
  /// attention off): keys and values cached in fp16, queries and attention probabilities
  /// converted to fp16 before their products. Off: plain f32 throughout (an f32 KV cache).
  bool match_llama_cpp = true;
  /// fast: activations quantized to 8 bits per block before each product, as llama.cpp's CPU
  /// backend does (integer dot products). exact: f32 activations times the exact f32 weight
  /// values (the parity tests' mode). Both batch-invariant.
  cpu_math math = cpu_math::fast;
  /// The fast mode's kernels: the best this CPU runs (cpu_best_isa(), CONVEYOR_ISA caps it), or
  /// a lower one (tests of the portable fallback). Throws model_error when the CPU lacks it.
  cpu_isa isa = cpu_best_isa();
  /// Threads of the step (0: every core).
  int32_t threads = 0;
  /// Fast mode: repack the weights the ISA has a packed layout for at load (qmatrix::pack; the
  /// same bits, faster loads) and let the file's pages of them go. Off: read the mapping.
  /// Default on; CONVEYOR_PACK_WEIGHTS=0 in the environment turns it off (A/B benchmarks).
  bool pack_weights = qmm_pack_by_default();
  /// Attention work items: a run of rows with all its kv heads where the cost model allows (the
  /// default), or never (one kv head's query heads an item, the earlier shape: A/B benchmarks,
  /// step-bench --against kv-head-items). The same bits either way.
  bool attention_whole_runs = true;
  /// Runs of rows reaching this many positions, where their kv heads make fewer items than two a
  /// thread, score ranges of keys on every thread before their softmax and P · V
  /// (cpu_attention_split.cpp; 2-thread decodes 3-8% faster at 3000-4000 positions). 0: never (A/B runs:
  /// step-bench --against split-keys=0). The same bits either way.
  int32_t attention_split_keys = 2048;
};

class cpu_executor final : public executor {
public:
  /// Maps the config and weights of `f`, which must outlive the executor. Throws model_error
  /// for a model conveyor cannot run or a setting that does not fit.
  cpu_executor(const gguf_file& f, const cpu_executor_options& o);

  const executor_info& info() const override { return info_; }
  /// Throws std::invalid_argument when the plan is malformed (a scheduler bug): token ids out
  /// of range, positions past max_model_len or the block table, unknown block ids.
  step_result step(const step_plan& plan) override;

  const llama_config& config() const { return cfg_; }
  const llama_weights& weights() const { return w_; }
  /// One line on the KV pool: blocks, tokens, bytes, storage and why that size.
  const std::string& kv_sizing() const { return kv_sizing_; }
  /// One line on the numerics: math, kernels' ISA, threads.
  std::string compute_summary() const;
  /// Logits of each sampled row of the last step, in plan order: (num sampled, vocab).
  const std::vector<float>& last_logits() const { return logits_; }

private:
  void check_plan(const step_plan& plan) const;
  void flatten(const step_plan& plan);
  void attention_block(int32_t layer);
  void ffn_block(int32_t layer);
  /// The prompt targets of the plan (scheduled_seq::prompt_targets), scored in plan order.
  std::vector<sampled_token> score_prompts(const step_plan& plan);
  void fill_masks(std::span<const scheduled_seq* const> row_seqs);
  /// C(m, w.rows()) = A(m, w.k()) · W^T (+ C when accumulate).
  void project(const float* a, const qmatrix& w, float* c, int32_t m, bool accumulate);
  /// Layer l's attention of runs_ in two rounds (cpu_attention_split.cpp) where that spreads it
  /// over more threads; false (nothing done) where whole items do, or where the cost model took
  /// query heads as items (`by_kv_head` false: many threads).
  bool attention_split(int32_t l, int32_t width, float scale, bool by_kv_head);

  llama_config cfg_;
  llama_weights w_;
  size_t packed_bytes_ = 0;  // weights repacked at load (pack_weights)
  executor_info info_;
  std::string kv_sizing_;
  std::unique_ptr<paged_kv> kv_;
  bool match_llama_cpp_ = true;
  bool whole_runs_ = true;
  int32_t split_keys_ = 2048;
  spinning_pool pool_;
  cpu_matmul mm_;

  // Per-step flattened batch (T tokens) and activations, reused across steps.
  std::vector<token_id> tok_;
  std::vector<int32_t> pos_;
  std::vector<const block_id*> table_;  // per token: its sequence's block table
  std::vector<float> rope_cos_, rope_sin_;  // (T, n_rot/2)
  std::vector<float> x_, h_, qkv_, attn_, gu_, act_, logits_;
  std::vector<float> score_logits_;  // prompt rows' logits, kScoreRows at a time
  std::vector<sampler_scratch> scratch_;  // one per pool thread
  std::vector<const scheduled_seq*> row_seqs_;    // the sequence of each sampled row
  std::vector<std::pair<int32_t, int32_t>> runs_;  // attention: (first row, rows) of one sequence
  std::vector<float> split_scores_;                // attention_split: the runs' scores
  std::vector<int64_t> split_at_;                  // where each run's scores start in split_scores_
  std::vector<std::vector<uint32_t>> masks_;      // each sampled row's grammar mask
};

} // namespace conveyor::model
