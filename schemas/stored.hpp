// What the job journal keeps, in the protocol's own encoding: a submit map that decode_request()
// reads back (the resolved seed filled in), and a summary read out of a stored event (its kind,
// its token ids, how a terminal event ended the job). Pure: msgpack only inside stored.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/request.hpp"
#include "engine/step.hpp"
#include "schemas/requests.hpp"

namespace conveyor::schemas {

/// The protocol's submit map ("op":"submit") for `job`: decode_request() of it gives `job` back.
wire_bytes encode(const submit_request& job);

/// What a stored job event says, for restart: kind "accepted", "tokens", "done" or "error".
struct event_summary {
  std::string kind;
  uint64_t seq = 0;
  std::vector<token_id> token_ids;        ///< tokens events
  std::string text;                       ///< tokens events' delta; done events' whole text
  std::vector<float> logprobs;            ///< tokens events, when the job asked for them
  std::vector<std::vector<token_logprob>> top_logprobs;
  std::optional<finish_reason> reason;    ///< done events
  int64_t prompt_tokens = 0;              ///< done events' usage
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;
  std::string error_code;                 ///< error events: the wire code
  std::string message;                    ///< error events
  bool terminal() const { return kind == "done" || kind == "error"; }
};

/// Reads one encoded job event; nullopt when it is not one (corrupt bytes).
std::optional<event_summary> summarize_event(std::span<const uint8_t> event);

/// What a fetch reply holds: the events (in seq order) and whether the last one is terminal.
struct fetch_summary {
  std::vector<event_summary> events;
  bool complete = false;
};

/// Reads one encoded fetch reply; nullopt when it is not one (an error reply, corrupt bytes).
std::optional<fetch_summary> summarize_fetch_reply(std::span<const uint8_t> reply);

/// What a reply says: ok, or the error's code and message (for intakes that act on refusals).
struct reply_summary {
  bool ok = false;
  std::string code;  ///< error replies: the wire code ("overloaded", ...)
  std::string message;
  std::string state;  ///< ok replies of status and cancel: the job's state ("running", ...)
};

/// Reads one encoded reply; nullopt when it is not one.
std::optional<reply_summary> summarize_reply(std::span<const uint8_t> reply);

/// A dead letter: {"id":S,"error":{"code":S,"message":S},"deliveries":I,"request":bin} (the
/// job's submit map as it arrived).
wire_bytes encode_dead_letter(const std::string& job_id, error_code code, const std::string& message, uint64_t deliveries,
                              std::span<const uint8_t> request);

} // namespace conveyor::schemas
