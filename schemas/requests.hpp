// The requests a producer sends (ROUTER ops, and `submit` over PULL), as plain structs with the
// protocol's defaults, and decode_request(): one frame in, one validated request or one
// decode_error out. Pure: no sockets; msgpack only inside decode.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "engine/request.hpp"
#include "engine/sampling_params.hpp"
#include "engine/types.hpp"
#include "schemas/protocol.hpp"

namespace conveyor::schemas {

/// One chat message of a `messages` prompt. `role` is system, user or assistant.
struct chat_message {
  std::string role;
  std::string content;
};

/// A job's input: exactly one of a text prompt, chat messages (rendered with the model's chat
/// template by the server) or prompt token ids. Never empty once decoded.
using prompt_input = std::variant<std::string, std::vector<chat_message>, std::vector<token_id>>;

/// A constraint on the output (structured outputs): the text must follow it. `spec` is the JSON
/// schema's text (json_schema), the regular expression (regex) or the EBNF grammar (grammar);
/// empty for json_object (any JSON object).
struct response_format {
  enum class kind { json_object, json_schema, regex, grammar };
  kind type = kind::json_object;
  std::string spec;
};
const char* to_string(response_format::kind k);

/// logit_bias as every front end reads it (ZeroMQ submits, HTTP bodies): a key as JSON writes it
/// ("50256") is a token id, or -1 when it is not one; a bias is clamped to +-1e9; the entries end
/// sorted by id and checked by the engine's rule (distinct ids, biases in range). Returns "" or
/// the refusal's message.
int64_t logit_bias_key(std::string_view key);
float logit_bias_value(double bias);
std::string finish_logit_bias(std::vector<std::pair<token_id, float>>& entries);

/// {"op":"submit", ...}: run one generation job. Defaults are the protocol's.
struct submit_request {
  /// The producer's job id (valid_id()); also names the topic "job/<id>/".
  std::string id;
  /// "prompt" (string), "messages" (array of maps) or "prompt_tokens" (array of ints).
  prompt_input input;
  /// Most output tokens, >= 1. Generation also stops at the server's max_model_len.
  int32_t max_tokens = 256;
  /// Sampling: 0 = greedy; see sampling_params for the ranges.
  float temperature = 1.0f;
  float top_p = 1.0f;
  int32_t top_k = 0;
  float min_p = 0.0f;
  /// Penalties on tokens already in the text (sampling_params has the formula and ranges).
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  float repetition_penalty = 1.0f;
  /// Token id -> bias added to its logit, in [-100, 100]; distinct ids, ascending.
  std::vector<std::pair<token_id, float>> logit_bias;
  /// The job's seed; absent means the server picks one.
  std::optional<uint64_t> seed;
  /// Strings that end generation (not included in the output text).
  std::vector<std::string> stop;
  /// Token ids that end generation (besides the model's EOS ids).
  std::vector<token_id> stop_token_ids;
  /// Keep generating past EOS.
  bool ignore_eos = false;
  /// EOS and stop_token_ids are ignored until this many output tokens exist; in [0, max_tokens].
  int32_t min_tokens = 0;
  /// Lower runs first under the `priority` scheduling policy; any int32, negative allowed.
  int32_t priority = 0;
  /// Milliseconds after the server received the submit by which the job must finish (> 0);
  /// past it the job ends with finish_reason "deadline".
  std::optional<int64_t> deadline_ms;
  /// Send each output token's log-probability in `tokens` events.
  bool logprobs = false;
  /// With each token also its `top_logprobs` most likely alternatives, in [0, 20] (> 0 sets
  /// logprobs).
  int32_t top_logprobs = 0;
  /// Prompt logprobs (vLLM's prompt_logprobs), in [0, 20]: each prompt token's logprob given the
  /// ones before it, with this many alternatives, in the first tokens event (needs stream).
  std::optional<int32_t> prompt_logprobs;
  /// `tokens` events also carry each token's bytes (and with top_logprobs, each alternative's):
  /// for clients without the model's tokenizer that write token strings (Batch files' logprobs).
  bool token_bytes = false;
  /// false opts the job out of speculative decoding (which changes no output, only the speed).
  bool speculate = true;
  /// Variables for the chat template (`messages` only), e.g. {"enable_thinking": false}: string
  /// keys, scalar values (bool, integer, float, string); not "messages". In key order as sent.
  std::vector<std::pair<std::string, std::variant<bool, int64_t, double, std::string>>> chat_template_kwargs;
  /// The output must follow this (absent: free text).
  std::optional<response_format> format;
  /// false: only the `accepted` and the terminal event are published (no `tokens` events).
  bool stream = true;

  /// The engine's sampling parameters; `fallback_seed` is used when the job gave none.
  sampling_params to_sampling_params(uint64_t fallback_seed) const;
  /// The engine's stop parameters, with the model's EOS ids.
  stop_params to_stop_params(std::vector<token_id> eos_token_ids) const;
};

/// {"op":"cancel","id":S}: stop a job; it ends with a `done` event, finish_reason "cancelled".
struct cancel_request {
  std::string id;
};

/// {"op":"status","id":S}: where a job is.
struct status_request {
  std::string id;
};

/// {"op":"fetch","id":S,"from_seq":I=0,"max_events":I=1024}: replay a job's events from seq
/// `from_seq` on, at most `max_events` of them (1..decode_limits::max_fetch_events).
struct fetch_request {
  std::string id;
  uint64_t from_seq = 0;
  int32_t max_events = 1024;
};

/// {"op":"stats"}: queue, running, KV usage and token counters.
struct stats_request {};

/// {"op":"health"}: serving or draining, protocol version, model name.
struct health_request {};

/// What decode_request() returns: one request, or why the frame was refused.
using decode_result = std::variant<submit_request, cancel_request, status_request, fetch_request,
                                   stats_request, health_request, decode_error>;

/// Decodes and validates one inbound frame (a msgpack map). Refuses, with a decode_error naming
/// the field: a frame over max_message_bytes (too_long); bytes that are not msgpack, exceed the
/// unpack limits, or leave trailing bytes after the first object; a top level that is not a map;
/// non-string or repeated keys; a missing or unknown "op"; a field of the wrong type or out of
/// range; a missing or invalid id; an empty prompt or none/more than one of
/// prompt/messages/prompt_tokens. Unknown keys are ignored; a nil value counts as absent.
/// Never throws.
decode_result decode_request(std::span<const uint8_t> frame, const decode_limits& limits = {});

} // namespace conveyor::schemas
