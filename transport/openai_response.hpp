// OpenAI-compatible response bodies built from a job's events: the whole completion (chat or
// text), or the server-sent-event chunks of a streamed one. Pure: strings in, JSON text out.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "schemas/events.hpp"
#include "transport/openai_request.hpp"

namespace conveyor::transport {

/// A token id's text (its bytes; may be part of a UTF-8 character).
using piece_fn = std::function<std::string(token_id)>;

/// What every response of one request shares.
struct openai_context {
  const openai_request* req = nullptr;
  std::string job_id;
  int64_t created = 0;  ///< unix seconds
  piece_fn piece;
};

/// The non-streamed answer: the job's tokens events and its done event, in seq order.
std::string render_completion(const openai_context& c, const std::vector<schemas::tokens_event>& tokens,
                              const schemas::done_event& done);

/// Streaming, one "data: {...}\n\n" line per call. The first chunk of a chat (role only).
std::string render_chunk_start(const openai_context& c);
/// A tokens event's delta (empty string when it carries nothing to show).
std::string render_chunk_tokens(const openai_context& c, const schemas::tokens_event& tokens);
/// The done event's chunk (finish_reason), then, when stream_options.include_usage, the usage
/// chunk, then "data: [DONE]".
std::string render_chunk_done(const openai_context& c, const schemas::done_event& done);
/// An error in the middle of a stream: a chunk holding the error object, then "data: [DONE]".
std::string render_chunk_error(const openai_error& e);

} // namespace conveyor::transport
