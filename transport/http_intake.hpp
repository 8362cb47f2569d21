// The OpenAI-compatible HTTP intake (on http_server: Boost.Beast, event-driven): POST
// /v1/completions and /v1/chat/completions (whole answers, or server-sent events with stream:
// true), GET /v1/models and /health, and vLLM's POST /tokenize and /detokenize. Each HTTP request is one job: its exchange (http_intake.cpp)
// checks the body, watches the job id, hands the job to the request_sink like every other intake,
// and is woken by the watch as the reply and the job's events (it is one of the publisher's event
// sinks) come;
// nothing blocks, so an open request costs memory, not a thread. A request id header
// (X-Request-Id or Idempotency-Key) becomes the job id: a retried request finds the job already
// there (duplicate) and is answered from its events (fetch, then live), so it never runs twice.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "transport/api_keys.hpp"
#include "transport/http_server.hpp"
#include "transport/intake.hpp"
#include "transport/job_watch.hpp"
#include "transport/openai_response.hpp"
#include "transport/reasoning.hpp"

namespace conveyor::transport {

struct http_config {
  std::string host = "127.0.0.1";
  /// -1: off (the runtime makes no intake), 0: any free port.
  int port = -1;
  /// I/O threads running every connection (connections are not bound to threads).
  int threads = 2;
  /// A whole (non-streamed) answer waits at most this long for its job, then gets 504 (and a job
  /// without a request id is cancelled).
  double request_timeout_s = 600.0;
  /// Largest request body; a longer one is refused with 400 before it is read.
  size_t max_body_bytes = 8u << 20;
  /// API keys (null or none set: open). /v1 routes need `Authorization: Bearer <key>`; /health
  /// stays open.
  std::shared_ptr<const api_keys> keys;
  /// The served model's name (/v1/models; a request naming another gets 404).
  std::string model_name;
  /// Chat answers: the thinking as reasoning_content (--reasoning-parser).
  reasoning_parser reasoning = reasoning_parser::none;
  schemas::decode_limits limits;
};

class job_exchange;

class http_intake final : public intake, public reply_channel, public event_sink {
public:
  /// Binds at once (throws bind_error naming the port and the fix), before the model loads.
  explicit http_intake(http_config cfg);
  ~http_intake() override;
  /// Serves, with the context's sink, token pieces (logprobs) and health (/health).
  void start(const intake_context& ctx) override;
  /// Lets answers being written finish, wakes every waiting exchange (they answer 503), closes
  /// the listener and every connection, joins the threads.
  void stop() override;
  const char* name() const override { return "http"; }
  const std::string& endpoint() const override { return endpoint_; }
  event_sink* events() override { return this; }
  int port() const { return port_; }
  void reply(uint64_t tag, schemas::reply r) override { watches_.reply(tag, std::move(r)); }
  /// Every job event as it goes out (the publisher's thread): to the exchanges watching its job.
  void on_event(const schemas::published_event& ev) override { watches_.event(ev.event); }

  /// Connections open now (tests, metrics).
  size_t connections() const { return server_->connections(); }

private:
  friend class job_exchange;
  friend class choice_group;
  void route(http_request req, std::shared_ptr<http_exchange> x);
  void generate(http_request req, std::shared_ptr<http_exchange> x, openai_endpoint ep);
  void tokenize(const http_request& req, http_exchange& x, openai_endpoint ep);

  http_config cfg_;
  piece_fn piece_;
  std::function<std::optional<std::string>()> unhealthy_;
  decltype(intake_context::tokenize) tokenize_;
  decltype(intake_context::detokenize) detokenize_;
  decltype(intake_context::plan_chat) plan_chat_;
  int32_t max_model_len_ = 0;
  std::unique_ptr<http_server> server_;
  std::string endpoint_;
  int port_ = 0;
  request_sink* sink_ = nullptr;
  watch_registry watches_;
  std::atomic<uint64_t> id_counter_{0};
  std::atomic<int64_t> active_{0};  // requests with a job: handlers and streams not yet released
  uint64_t id_salt_ = 0;
  bool started_ = false, stopped_ = false;
};

} // namespace conveyor::transport
