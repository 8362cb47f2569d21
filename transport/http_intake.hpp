// The OpenAI-compatible HTTP intake (cpp-httplib): POST /v1/completions and
// /v1/chat/completions (whole answers, or server-sent events with stream: true), GET /v1/models
// and /health. Each HTTP request is one job: its handler thread (from the intake's own pool)
// reads and checks the body, watches the job id, hands the job to the request_sink like every
// other intake, waits for the reply, then for the job's events (fed by the publisher's tap) and
// writes them out on its own connection. A request id header (X-Request-Id or Idempotency-Key)
// becomes the job id: a retried request finds the job already there (duplicate) and is answered
// from its events (fetch, then live), so it never runs twice.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "transport/api_keys.hpp"
#include "transport/intake.hpp"
#include "transport/job_watch.hpp"
#include "transport/openai_response.hpp"

namespace httplib {
class Server;
struct Request;
struct Response;
}

namespace conveyor::transport {

struct http_config {
  std::string host = "127.0.0.1";
  /// -1: off (the runtime makes no intake), 0: any free port.
  int port = -1;
  /// Handler threads: open connections served at once (each streaming or waiting request holds one).
  int threads = 64;
  /// Largest request body; a longer one is refused with 400 before it is read.
  size_t max_body_bytes = 8u << 20;
  /// API keys (null or none set: open). /v1 routes need `Authorization: Bearer <key>`; /health
  /// stays open.
  std::shared_ptr<const api_keys> keys;
  /// The served model's name (/v1/models; a request naming another gets 404).
  std::string model_name;
  schemas::decode_limits limits;
};

class http_intake final : public intake, public reply_channel {
public:
  /// Why the server cannot take jobs now (draining, executor failed), or nullopt when serving.
  using health_fn = std::function<std::optional<std::string>()>;

  /// Binds at once (throws bind_error naming the port and the fix). The token-piece and health
  /// functions may be given later, before start() (the socket is bound before the model loads).
  http_intake(http_config cfg, piece_fn piece = {}, health_fn health = {});
  void set_piece(piece_fn piece) { piece_ = std::move(piece); }
  void set_health(health_fn health) { health_ = std::move(health); }
  ~http_intake() override;
  void start(request_sink& sink) override;
  /// Wakes every waiting handler (they answer 503), closes the listener, joins the threads.
  void stop() override;
  const std::string& endpoint() const override { return endpoint_; }
  int port() const { return port_; }
  void reply(uint64_t tag, schemas::wire_bytes bytes) override { watches_.reply(tag, std::move(bytes)); }
  /// The publisher's tap: every job event as it goes out (any thread).
  void on_event(const std::string& job_id, const schemas::wire_bytes& event) { watches_.event(job_id, event); }

private:
  void generate(const httplib::Request& req, httplib::Response& res, openai_endpoint ep);

  http_config cfg_;
  piece_fn piece_;
  health_fn health_;
  std::unique_ptr<httplib::Server> server_;
  std::string endpoint_;
  int port_ = 0;
  std::thread thread_;
  request_sink* sink_ = nullptr;
  watch_registry watches_;
  std::atomic<uint64_t> id_counter_{0};
  std::atomic<int64_t> active_{0};  // requests with a job: handlers and streams not yet released
  uint64_t id_salt_ = 0;
  bool started_ = false;
};

} // namespace conveyor::transport
