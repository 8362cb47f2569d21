// Pure. The job-level vocabulary that crosses every layer: a job's state, why a job was
// refused, and the serving numbers (stats op, heartbeat, /metrics). The wire protocol uses these names as they are (schemas/protocol.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>
#include <string_view>

namespace conveyor {

enum class job_state {
  /// Accepted, not scheduled yet (or preempted and waiting to be recomputed).
  queued,
  /// Scheduled at least once, not finished.
  running,
  /// Ended with finish reason stop, length or deadline.
  finished,
  /// Ended with finish reason cancelled.
  cancelled,
  /// Ended with an error (the executor failed).
  failed,
};
const char* to_string(job_state state);

/// Why a request was refused or a job failed: one code from the scheduler's admission to the
/// wire (schemas/protocol.md documents each, with what a producer should do about it).
enum class error_code {
  /// The message is malformed or a field is invalid. Do not retry unchanged.
  bad_request,
  /// The message or the prompt is too long (frame over max_message_bytes, prompt tokens over
  /// max_model_len). Do not retry unchanged.
  too_long,
  /// The server's queue is full. Retry later, with backoff.
  overloaded,
  /// A job with this id is active or finished recently; it was not run again.
  duplicate,
  /// No job with this id is known (never submitted, or forgotten after its retention time).
  not_found,
  /// The server is draining and accepts no new jobs. Submit elsewhere or later.
  shutting_down,
  /// A bug or an unexpected failure in the server. The job (if any) failed; retrying may work.
  internal,
};
/// The code's wire name: "bad_request", "too_long", ...
const char* to_string(error_code code);
/// The code of a wire name; nullopt for a name that is none.
std::optional<error_code> parse_error_code(std::string_view name);

/// Why a job was not accepted, with a readable message.
struct refusal {
  error_code code = error_code::bad_request;
  std::string message;
};

/// Whether a refused fire-and-forget (PUSHed) job may be told on its topic "job/<id>/": never for
/// `duplicate` (the topic belongs to the job that has the id) nor without an id.
inline bool refusal_may_be_published(const refusal& r, const std::string& job_id) {
  return r.code != error_code::duplicate && !job_id.empty();
}

/// The serving numbers, one set of names for the stats op, the heartbeat and /metrics.
struct serving_stats {
  int32_t queued = 0, running = 0;
  int32_t kv_blocks_total = 0, kv_blocks_used = 0;
  double kv_usage = 0.0;  ///< kv_blocks_used / kv_blocks_total, [0, 1]
  int64_t prompt_tokens_total = 0;      ///< prompt tokens of accepted jobs
  int64_t completion_tokens_total = 0;  ///< output tokens generated
  int64_t cached_tokens_total = 0;      ///< prompt tokens of finished jobs served from the prefix cache
  int64_t preemptions_total = 0, steps_total = 0;
  /// Speculative decoding: verifications of one sequence's drafts, tokens drafted, tokens
  /// accepted, and accepted at each draft position (0-based).
  int64_t spec_drafts_total = 0, spec_draft_tokens_total = 0, spec_accepted_tokens_total = 0;
  std::vector<int64_t> spec_accepted_per_pos;
  int64_t jobs_accepted = 0, jobs_finished = 0;
  double tokens_per_s = 0.0;  ///< output tokens per second over the last interval of >= 1 s
  bool draining = false;
};

} // namespace conveyor
