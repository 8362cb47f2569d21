// Pure. The scheduler's and the KV cache's settings: plain structs, one field per knob, names
// as in vLLM. Derived values (the number of KV blocks) are not stored here: they are computed
// once at start-up and passed to the constructors beside these structs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "engine/speculation.hpp"

namespace conveyor {

/// Order of the waiting queue and choice of preemption victims.
enum class scheduling_policy {
  /// First come, first served; the victim is the newest running sequence.
  fcfs,
  /// Lower `priority` value first, ties by arrival; the victim is the lowest-priority
  /// (largest value) running sequence, ties to the newest.
  priority,
};

/// How batches are formed.
enum class batching_mode {
  /// Iteration-level: every step admits waiting jobs while the budgets allow.
  continuous,
  /// A batch is formed from the queue, runs until every member finishes, and only then is the
  /// next one admitted; members reserve KV for prompt + max_tokens up front, as static
  /// batchers do. Exists to measure what continuous batching buys.
  static_batch,
};

/// Returns "fcfs" / "priority".
const char* to_string(scheduling_policy policy);
/// Returns "continuous" / "static".
const char* to_string(batching_mode mode);
/// Parses "fcfs" / "priority"; nullopt for anything else.
std::optional<scheduling_policy> parse_scheduling_policy(const std::string& text);
/// Parses "continuous" / "static"; nullopt for anything else.
std::optional<batching_mode> parse_batching_mode(const std::string& text);

struct scheduler_config {
  /// Most sequences in one step (running set size). Unit: sequences. Default 256, >= 1.
  int32_t max_num_seqs = 256;
  /// Most tokens computed in one step, over all sequences (the token budget; prompts longer
  /// than what is left are chunked). Unit: tokens. Default 2048, >= 1.
  int32_t max_num_batched_tokens = 2048;
  /// Longest sequence, prompt + output. Unit: tokens. Default 2048, >= 1, and at most what the
  /// KV pool holds (num_kv_blocks * block_size).
  int32_t max_model_len = 2048;
  /// Waiting-queue order and preemption victims. Default fcfs.
  scheduling_policy policy = scheduling_policy::fcfs;
  /// continuous | static. Default continuous.
  batching_mode batching = batching_mode::continuous;
  /// Most jobs waiting (queued or preempted) before submit answers `overloaded`.
  /// Unit: jobs. Default unset (unbounded); when set, >= 1.
  std::optional<int32_t> max_num_queued_reqs;
  /// Most prompt tokens waiting before submit answers `overloaded`. Unit: tokens.
  /// Default unset (unbounded); when set, >= 1.
  std::optional<int64_t> max_num_queued_tokens;
  /// Plan step N+1 while the executor runs step N (scheduler.hpp, "Pipelined"), where the
  /// executor's submit() does not wait for the device (CUDA). vLLM's async_scheduling. Default on.
  bool async_scheduling = true;
  /// What the executor can do, set from its executor_info (not a setting): "" when it scores
  /// prompts (request::prompt_logprobs), else the device name, and such jobs are refused.
  std::string no_prompt_logprobs_on;
  /// Speculative decoding (engine/speculation.hpp). Default off here; the server's default is
  /// decided at start-up from what the executor verifies.
  speculative_config speculative;

  /// Returns an empty string when valid, else a message naming the field, its value and the fix.
  std::string validate() const;
};

struct cache_config {
  /// Token slots per KV block. Unit: tokens. Default 16, in [1, 1024].
  int32_t block_size = 16;
  /// Reuse full prompt blocks across jobs (hash chain over token ids, LRU eviction). Default on.
  bool enable_prefix_caching = true;
  /// Fraction of all blocks kept free when admitting a waiting job while others run, so that
  /// running jobs can grow without preemption. Unit: fraction. Default 0.01 (vLLM's), in [0, 1).
  /// On the Anyscale workload it removes ~100 recompute preemptions per 1000 jobs (docs/benchmarks.md).
  double kv_watermark = 0.01;

  /// Returns an empty string when valid, else a message naming the field, its value and the fix.
  std::string validate() const;
};

/// The fairness rule for the KV pool: unless the operator sets max_model_len, one sequence may
/// grow to at most a quarter of the pool, so that a single job (say max_tokens 2^31-1) can never
/// hold the pool while others queue; at least four sequences of max_model_len fit at once.
inline constexpr int32_t min_seqs_in_pool = 4;
/// max_model_len when the operator gave none (0): the model's context, capped at
/// pool_tokens / min_seqs_in_pool (and at least 1).
int32_t default_max_model_len(int32_t model_context, int32_t pool_tokens);

/// The KV pool when the operator sizes none (kv_cache_bytes and num_kv_blocks both 0): room
/// for min_seqs_in_pool sequences of the longest length served (`max_len`: max_model_len, else
/// the model's context), capped at kv_auto_memory_fraction of the machine's memory, and at
/// least kv_auto_min_tokens tokens. `reason` says which rule decided, for the start-up log.
inline constexpr double kv_auto_memory_fraction = 0.10;
inline constexpr int64_t kv_auto_min_tokens = 1024;
struct kv_auto_size {
  int64_t bytes = 0;
  std::string reason;
};
kv_auto_size auto_kv_cache_bytes(int64_t bytes_per_token, int32_t max_len, int64_t machine_bytes);

/// Cross-field checks for a scheduler over a pool of `num_kv_blocks` blocks: each struct's own
/// validate(), then that the pool holds at least one sequence of max_model_len tokens.
/// Returns an empty string when valid.
std::string validate_engine_config(const scheduler_config& sched, const cache_config& cache,
                                   int32_t num_kv_blocks);

} // namespace conveyor
