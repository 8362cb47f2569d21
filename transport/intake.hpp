// The intake interface: every way a request comes in (ZeroMQ ROUTER and PULL, HTTP, NATS)
// decodes and validates it on its own thread and hands the result to the runtime's
// request_sink without waiting for anything. The answer comes back through the intake's
// reply_channel, and the intake sends it from the thread that owns its socket.
//
//   intake thread: recv ─ decode ─▶ sink.deliver(reply_to, request)      (never blocks)
//   actors:        ... ─▶ reply_to.send(typed reply) ─▶ channel queue + wake-up (any thread)
//   intake thread: wake-up ─ drain queue ─ send on its own socket
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "schemas/chat_turn.hpp"
#include "schemas/protocol.hpp"
#include "transport/event_sink.hpp"
#include "schemas/replay.hpp"
#include "schemas/replies.hpp"
#include "schemas/requests.hpp"

namespace conveyor::transport {

/// The way back to the senders of an intake's requests. Thread-safe: any thread may reply.
/// An intake that was stopped drops replies.
class reply_channel {
public:
  virtual ~reply_channel() = default;
  /// The reply to the request the intake tagged `tag` (typed: the intake encodes it for its wire).
  virtual void reply(uint64_t tag, schemas::reply r) = 0;
};

/// Where one request's answer goes. A null channel is a fire-and-forget intake (PULL): nobody
/// waits for a reply, so a submit's outcome goes out as the job's first event instead.
struct reply_to {
  reply_channel* channel = nullptr;
  uint64_t tag = 0;

  bool fire_and_forget() const { return channel == nullptr; }
  void send(schemas::reply r) const {
    if (channel) channel->reply(tag, std::move(r));
  }
};

using schemas::resume_point;

/// What intakes hand requests to (the runtime's front door). Thread-safe; never blocks.
class request_sink {
public:
  virtual ~request_sink() = default;
  /// One decoded request, or the decode_error that refuses it (the sink answers both). With
  /// `resume`, a job to continue from there (its events so far are stored elsewhere: NATS
  /// failover); it gets no reply and no `accepted`.
  virtual void deliver(reply_to to, schemas::decode_result request, std::optional<resume_point> resume = std::nullopt) = 0;
};

/// A tool chat made ready to run (intake_context::plan_chat): its prompt's tokens, the format its
/// output must follow (`required` and named tool choices), the stop strings its format adds, and
/// a parser for one choice's answer.
struct chat_plan {
  std::vector<token_id> prompt;
  std::optional<schemas::response_format> format;
  std::vector<std::string> stops;
  std::function<std::unique_ptr<schemas::turn_parser>()> parser;
};

/// Why a tool chat cannot be rendered: the request field it is about (the error's `param`), and
/// the message.
struct chat_refusal {
  std::string param;
  std::string message;
};

/// What the runtime hands every intake when it starts; each takes what it needs.
struct intake_context {
  request_sink* sink = nullptr;
  /// A token's text (special tokens shown), for logprobs.
  std::function<std::string(token_id)> piece;
  /// Why the server does not serve new jobs now (draining, stopping), or nullopt.
  std::function<std::optional<std::string>()> unhealthy;
  /// How many more jobs the runtime can admit right now (every intake's jobs counted).
  std::function<int64_t()> free_slots;
  /// The prompt tokens a job with this input (and chat_template_kwargs) would get (its text, its
  /// token ids checked against the vocabulary, or its messages through the chat template), or why
  /// it cannot (HTTP /tokenize).
  std::function<std::variant<std::vector<token_id>, std::string>(const schemas::submit_request&)> tokenize;
  /// The text of token ids, special tokens shown; std::nullopt when an id is outside the
  /// vocabulary (HTTP /detokenize).
  std::function<std::optional<std::string>(const std::vector<token_id>&)> detokenize;
  /// A tool chat rendered with the model's template (HTTP tools), or why it cannot be.
  /// Thread-safe; runs on the caller's thread.
  std::function<std::variant<chat_plan, chat_refusal>(const schemas::tool_chat_request&)> plan_chat;
  /// The server's longest sequence, prompt and output (/v1/models, /tokenize).
  int32_t max_model_len = 0;
};

/// One way in. The constructor binds or connects (a taken endpoint throws bind_error, an
/// unreachable server its own error, before anything else has started); start() begins serving
/// on the intake's own threads; stop_accepting() takes no new jobs from where they queue (the
/// drain: intakes that answer each request keep answering, the job table refuses new jobs);
/// stop() joins the threads. An intake that also carries events out (NATS stores them; HTTP
/// streams them) is an event_sink too: events() returns it.
class intake {
public:
  virtual ~intake() = default;
  virtual void start(const intake_context& ctx) = 0;
  virtual void stop_accepting() {}
  virtual void stop() = 0;
  /// Its name in logs and errors ("router", "pull", "http", "nats").
  virtual const char* name() const = 0;
  /// The bound endpoint (a "*" port resolved).
  virtual const std::string& endpoint() const = 0;
  virtual event_sink* events() { return nullptr; }
};

} // namespace conveyor::transport
