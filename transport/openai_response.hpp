// OpenAI-compatible response bodies built from a job's events: the whole completion (chat or
// text), or the server-sent-event chunks of a streamed one. Pure: strings in, JSON text out.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "schemas/chat_turn.hpp"
#include "schemas/events.hpp"
#include "transport/openai_request.hpp"
#include "transport/reasoning.hpp"

namespace conveyor::transport {

/// A token id's text (its bytes; may be part of a UTF-8 character).
using piece_fn = std::function<std::string(token_id)>;

/// What every response of one request shares.
struct openai_context {
  const openai_request* req = nullptr;
  std::string job_id;
  int64_t created = 0;  ///< unix seconds
  piece_fn piece;
  int32_t index = 0;  ///< the choice this job answers (n > 1: one job per choice)
  /// Chat: how the thinking is told from the answer (reasoning_content); none: all content.
  reasoning_parser reasoning = reasoning_parser::none;
};

/// One choice's job: its tokens events and its done event, in seq order; a tool chat's answer
/// parsed (message.content, reasoning_content and tool_calls are written from it).
struct choice_events {
  std::vector<schemas::tokens_event> tokens;
  schemas::done_event done;
  std::optional<schemas::chat_turn> turn;
};

/// The non-streamed answer: every choice in index order. The usage counts the prompt once and
/// every choice's completion tokens.
std::string render_completion(const openai_context& c, const std::vector<choice_events>& choices);

/// Streaming, one "data: {...}\n\n" line per call. The first chunk of a chat (role only).
std::string render_chunk_start(const openai_context& c);
/// A tokens event's delta (empty string when it carries nothing to show). With `split` (chat with
/// a reasoning parser: the exchange's reasoning_stream fed the event's text), the delta carries
/// its reasoning_content and content instead of the text.
std::string render_chunk_tokens(const openai_context& c, const schemas::tokens_event& tokens, const reasoning_split* split = nullptr);
/// A tool chat's delta for one tokens event: what its turn_parser made of the event's text
/// (content, reasoning_content, tool_calls parts); empty string when it carries nothing to show.
std::string render_chunk_turn(const openai_context& c, const schemas::tokens_event& tokens,
                              const std::vector<schemas::chat_turn_delta>& deltas);
/// The done event's chunk (finish_reason; "tool_calls" when the answer called tools) of choice c.index.
std::string render_chunk_finish(const openai_context& c, const schemas::done_event& done, bool called_tools = false);
/// The stream's end, once every choice has finished: when stream_options.include_usage the usage
/// chunk (as render_completion counts it), then "data: [DONE]".
std::string render_stream_end(const openai_context& c, const std::vector<schemas::done_event>& done);
/// An error in the middle of a stream: a chunk holding the error object, then "data: [DONE]".
std::string render_chunk_error(const openai_error& e);

} // namespace conveyor::transport
