// OpenAI-compatible request bodies (/v1/completions, /v1/chat/completions) read into the
// protocol's submit_request, with every field checked: a wrong type, a value out of range, an
// unknown field or one conveyor does not support is refused with the field's name. Pure: JSON in,
// struct or error out (nlohmann::json inside the .cpp only). The same rules serve the HTTP
// intake and the Batch file format.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "schemas/chat_turn.hpp"
#include "schemas/requests.hpp"

namespace conveyor::transport {

/// Which endpoint a body was sent to. tokenize and detokenize are vLLM's (/tokenize, /detokenize).
enum class openai_endpoint { completions, chat_completions, tokenize, detokenize };

/// A refused request, as OpenAI's error object: {"error":{"message","type","param","code"}}.
struct openai_error {
  int status = 400;                             ///< the HTTP status
  std::string message;
  std::string type = "invalid_request_error";   ///< OpenAI's error type
  std::string param;                            ///< the offending field ("" when none)
  std::string code;                             ///< conveyor's error code ("bad_request", ...)
};

/// The error object's JSON text.
std::string to_json(const openai_error& e);

/// One request read from its body: the job (its id left empty for the caller) and how to answer.
struct openai_request {
  openai_endpoint endpoint = openai_endpoint::chat_completions;
  schemas::submit_request job;
  std::string model;           ///< as the request named it (echoed in responses)
  bool stream = false;         ///< server-sent events
  bool include_usage = false;  ///< stream_options.include_usage: a last chunk with the usage
  bool logprobs = false;       ///< chat: logprobs; completions: logprobs given (an int)
  int32_t top_logprobs = 0;    ///< chat: top_logprobs; completions: logprobs's value
  /// Completions: the prompt comes back before the answer (and with logprobs, its tokens with
  /// theirs: job.prompt_logprobs); `echo_text` is the prompt as text, set by the intake.
  bool echo = false;
  std::string echo_text;
  /// tokenize: also each token's text (token_strs). (tokenize reads job.input: a prompt, token
  /// ids or messages; detokenize reads its `tokens` into job.input as token ids.)
  bool return_token_strs = false;
  /// Choices (jobs) to answer with, in [1, max_choices].
  int32_t n = 1;
  /// Chat with tools, or with tool calls in its history: the server renders it (job.input is
  /// left empty) and parses the answer into tool calls.
  std::optional<schemas::tool_chat_request> tools;
  /// Set by the intake for a tool chat: a parser for one choice's answer.
  std::function<std::unique_ptr<schemas::turn_parser>()> new_turn_parser;
};

/// The most tools one request may offer (OpenAI's limit).
inline constexpr size_t max_tools = 128;

/// The most choices one request may ask for (`n`).
inline constexpr int32_t max_choices = 16;

/// Reads one body. `served_model` is the model this server runs: a request naming another one is
/// refused (404, as OpenAI does); an absent or empty model means it. Never throws.
std::variant<openai_request, openai_error> parse_openai_request(std::string_view body, openai_endpoint endpoint,
                                                                const std::string& served_model,
                                                                const schemas::decode_limits& limits = {});

} // namespace conveyor::transport
