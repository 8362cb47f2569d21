// The events the server publishes on its PUB socket, frames [topic, event map], as plain structs
// and their msgpack encoders. Job events go to topic_for(id) and carry id, seq and kind; seq is
// per job, from 0, without gaps; exactly one terminal event (done or error) ends a job.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "engine/request.hpp"
#include "engine/step.hpp"
#include "engine/types.hpp"
#include "schemas/protocol.hpp"

namespace conveyor::schemas {

/// kind "accepted": the job was admitted (always seq 0).
struct accepted_event {
  std::string id;
  uint64_t seq = 0;
};

/// A job's prompt logprobs (its prompt_logprobs >= 0), sent in its first tokens event: the
/// prompt's token ids and, for each one after the first, its logprob given the tokens before it
/// and (prompt_logprobs > 0) its most likely alternatives. On the wire "prompt_token_ids",
/// "prompt_logprobs" and "prompt_top_logprobs" (the last only with alternatives), the two lists
/// as long as the ids with nil first, as vLLM's prompt_logprobs.
struct prompt_scores {
  std::vector<token_id> token_ids;
  /// token_ids.size() - 1 entries (or none for an empty prompt): entry i is token i + 1's.
  std::vector<float> logprobs;
  std::optional<std::vector<std::vector<token_logprob>>> top;
};

/// kind "tokens": output tokens since the previous event; `text` is their detokenized delta
/// (whole UTF-8 characters only; bytes of a split character wait for the next event).
/// `logprobs` (one per token id, natural log) is present only when the job asked for it.
struct tokens_event {
  std::string id;
  uint64_t seq = 0;
  std::vector<token_id> token_ids;
  std::string text;
  std::optional<std::vector<float>> logprobs;
  /// Per token, its most likely alternatives [[id, logprob], ...] (the job's top_logprobs > 0).
  std::optional<std::vector<std::vector<token_logprob>>> top_logprobs;
  /// The job's first tokens event, when it asked for prompt logprobs.
  std::optional<prompt_scores> prompt;
  /// The job's token_bytes: each token's bytes ("token_bytes", binary) and, with top_logprobs,
  /// each alternative's ("top_logprobs_bytes"), as the tokenizer decodes the token alone.
  std::optional<std::vector<std::string>> token_bytes;
  std::optional<std::vector<std::vector<std::string>>> top_bytes;
};

/// The `usage` map of a done event.
struct usage_info {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  /// Prompt tokens served from the prefix cache.
  int64_t cached_tokens = 0;
};

/// The `timing` map of a done event, milliseconds since the server received the submit.
struct timing_info {
  /// Until first scheduled.
  double queue_ms = 0.0;
  /// Until the first output token; nil when there was none.
  std::optional<double> ttft_ms;
  /// Until the done event.
  double e2e_ms = 0.0;
};

/// kind "done" (terminal): finish_reason stop|length|cancelled|deadline, the full output text.
struct done_event {
  std::string id;
  uint64_t seq = 0;
  finish_reason reason = finish_reason::stop;
  std::string text;
  usage_info usage;
  timing_info timing;
};

/// kind "error" (terminal): the job failed or (PULL intake) was rejected.
struct error_event {
  std::string id;
  uint64_t seq = 0;
  error_code code = error_code::internal;
  std::string message;
};

/// kind "heartbeat" on topic "sys/", once a second: {"kind","seq","ts","status","protocol",
/// "running","waiting","kv_usage","tokens_per_s"}. seq counts heartbeats from 0 at start-up.
struct heartbeat_event {
  uint64_t seq = 0;
  /// Unix time in seconds.
  double ts = 0.0;
  server_status status = server_status::serving;
  int64_t running = 0;
  int64_t waiting = 0;
  /// Fraction of KV blocks in use, [0, 1].
  double kv_usage = 0.0;
  /// Output tokens per second over the last interval.
  double tokens_per_s = 0.0;
};

/// One job event, typed: what request actors make, the publisher fans out to its sinks, and the
/// HTTP intake renders. Encoded once, on its way out (published_event).
using job_event = std::variant<accepted_event, tokens_event, done_event, error_event>;

/// The job an event belongs to, its seq, and whether it ends the job (done or error).
const std::string& job_id_of(const job_event& event);
uint64_t seq_of(const job_event& event);
bool is_terminal(const job_event& event);

/// The event's map (any kind: `encode(tokens_event{...})` converts), and the heartbeat's.
wire_bytes encode(const job_event& event);
wire_bytes encode(const heartbeat_event& event);

/// The wire codec's reader: one encoded job event, or nullopt when the bytes are not one
/// (corrupt, or another kind). The journal's and JetStream's stored events and fetched ones come
/// back through it; an unknown error code reads as internal.
std::optional<job_event> decode_event(std::span<const uint8_t> bytes);

/// A job event on its way out: typed for in-process readers (the HTTP intake) and encoded once
/// for the wire (PUB, the journal, the NATS events stream, `fetch`).
struct published_event {
  job_event event;
  wire_bytes wire;

  published_event() = default;
  explicit published_event(job_event e) : event(std::move(e)), wire(encode(event)) {}
  const std::string& job_id() const { return job_id_of(event); }
  uint64_t seq() const { return seq_of(event); }
  bool terminal() const { return is_terminal(event); }
  /// Frees the typed event's payload (token ids, text, logprobs), keeping its id, seq and kind:
  /// when every sink reads only the wire bytes, the payload is not carried to (and freed on) the
  /// publisher's thread, the busiest of the event path.
  void drop_typed_payload();
};

} // namespace conveyor::schemas
