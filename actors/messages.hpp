// The values actors exchange besides the engine's step_plan / step_result. Plain structs;
// every one crosses threads by value (local only: conveyor's actors never go remote).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/request.hpp"
#include "engine/step.hpp"

namespace conveyor::actors {

/// Seconds on the runtime's steady clock (the scheduler's `now_s`).
double now_s();

/// request actor -> scheduler: a tokenized, validated job.
struct submission {
  std::string job_id;
  request req;  // req.id is assigned by the scheduler actor
};

/// scheduler -> request actor: the answer to a submission.
struct submit_answer {
  bool accepted = false;
  seq_id id = 0;
  /// When rejected: "overloaded", "duplicate", "too_long", "bad_request", "shutting_down".
  std::string code;
  std::string message;
};

/// scheduler -> request actor: tokens appended to its sequence by one step.
struct token_batch {
  std::vector<token_id> tokens;
  std::vector<float> logprobs;
  /// When the sequence was first scheduled (set with its first tokens; else < 0).
  double first_scheduled_s = -1.0;
};

/// scheduler -> request actor: the sequence ended (exactly once).
struct finish_info {
  finish_reason reason = finish_reason::stop;
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  int32_t cached_tokens = 0;
  /// Set when the executor failed: the job ends with an `internal` error instead of `done`.
  std::string error;
};

/// publisher -> intake: a slice of one job's event log.
struct fetch_result {
  bool found = false;
  std::vector<std::string> events;  // encoded event maps, seq from_seq, from_seq+1, ...
  bool complete = false;            // the terminal event is among those returned
  uint64_t next_seq = 0;            // events logged so far (the seq the next one gets)
};

/// scheduler -> intake: where a job is (for `status` and `cancel` replies).
struct job_status {
  /// "queued" | "running" | "finished" | "cancelled" | "failed"; "" when the id is unknown.
  std::string state;
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  /// Set once the job ended with a `done` event.
  std::optional<finish_reason> reason;
};

/// scheduler -> whoever asks: numbers for the `stats` op, the heartbeat and /metrics.
struct runtime_stats {
  int32_t waiting = 0, running = 0;
  int32_t kv_blocks = 0, kv_blocks_used = 0;
  double kv_usage = 0.0;
  int64_t prompt_tokens = 0, generation_tokens = 0;
  /// Prompt tokens of finished jobs that were served from the prefix cache.
  int64_t cached_tokens = 0;
  /// Output tokens per second over the last interval of >= 1 s between stats requests (the
  /// heartbeat asks every second).
  double tokens_per_s = 0.0;
  int64_t preemptions = 0, steps = 0;
  int64_t jobs_accepted = 0, jobs_finished = 0, jobs_rejected = 0;
  bool draining = false;
};

} // namespace conveyor::actors
