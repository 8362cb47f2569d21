// Pure interface. An executor owns a model and a KV-cache pool on one device and runs one
// fused forward step per plan. The scheduler owns the block ids; the executor owns the memory.
//
// Two ways to drive it:
//   result = ex.step(plan)                       // synchronous: returns when the step is done
//   ex.submit(A); ex.submit(B); ex.collect() -> A; ex.submit(C); ex.collect() -> B; ...
// The second is the pipelined loop (async scheduling): B may be planned and submitted before A's
// tokens are known, its decodes carrying k_previous_sample; collect() returns results in submit
// order. An executor with info().async_steps queues the work and returns from submit() at once
// (the CUDA executor: the GPU runs A while the host plans and uploads B); the others run the step
// inside submit() (this class's default), which is correct but overlaps nothing.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>

#include "engine/step.hpp"

namespace conveyor {

/// What an executor tells the engine about itself, fixed at construction.
struct executor_info {
  /// Blocks in the KV-cache pool; block ids are 0 .. num_kv_blocks-1.
  int32_t num_kv_blocks = 0;
  /// Token slots per block.
  int32_t block_size = 16;
  int32_t vocab_size = 0;
  /// The longest sequence (prompt + output) the model supports.
  int32_t max_model_len = 0;
  /// "cpu" or "cuda".
  std::string device;
  /// submit() returns before the step has run: pipelining steps pays off.
  bool async_steps = false;
  /// It scores prompt tokens (scheduled_seq::prompt_targets); the engine refuses jobs asking for
  /// prompt logprobs otherwise.
  bool scores_prompts = false;
  /// It samples every row of a drafted sequence (scheduled_seq::num_drafts) with kernels whose
  /// rows do not depend on each other, so speculative decoding changes no token; the engine
  /// drafts for no one otherwise.
  bool verifies_drafts = false;
  /// Its step cost model (speculative_config::fixed_cost_tokens): a step of T tokens costs about
  /// as much as (this + T) token rows. 0: unknown.
  double step_fixed_cost_tokens = 0.0;
};

class executor {
public:
  virtual ~executor() = default;
  virtual const executor_info& info() const = 0;
  /// Runs one fused step over every token of the plan and samples where asked. The plan holds no
  /// k_previous_sample tokens. Throws std::invalid_argument for a malformed plan and
  /// std::runtime_error on a device failure (engine-fatal: the caller fails every job).
  virtual step_result step(const step_plan& plan) = 0;
  /// Starts a step. A k_previous_sample token takes the token sampled for the same sequence by
  /// the step submitted just before (std::invalid_argument when that step sampled none for it).
  /// Throws as step() does; an asynchronous executor may report a device failure at collect().
  /// Default: resolves the placeholders, runs step() and keeps the result for collect().
  virtual void submit(const step_plan& plan);
  /// The result of the oldest submitted step not yet collected, waiting for it if need be.
  /// std::logic_error when none is outstanding.
  virtual step_result collect();
  /// Submitted steps not yet collected.
  virtual int32_t num_outstanding() const { return static_cast<int32_t>(done_.size()); }

private:
  std::deque<step_result> done_;
  std::unordered_map<seq_id, token_id> last_sampled_;
};

} // namespace conveyor
