// The /metrics endpoint: a cpp-httplib server with its own listening thread (and a 2-thread
// pool for connections). It knows nothing about actors: the runtime hands it a function that
// produces the exposition text. GET /metrics -> 200 with that text (503 when it cannot be had
// now); anything else -> 404.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

namespace httplib {
class Server;
}

namespace conveyor::transport {

class api_keys;

class metrics_http {
public:
  /// The body of /metrics, or nullopt when the numbers cannot be had now (answered with 503).
  /// Runs on the server's pool threads; may block briefly.
  using render_fn = std::function<std::optional<std::string>()>;

  /// Binds host:port at once (port 0: any free port). Throws bind_error naming the port and the
  /// fix. Serving starts with start().
  /// With `keys` enabled, a scrape must carry `Authorization: Bearer <key>` (else 401).
  metrics_http(const std::string& host, int port, render_fn render = {}, std::shared_ptr<const api_keys> keys = nullptr);
  ~metrics_http();
  metrics_http(const metrics_http&) = delete;
  metrics_http& operator=(const metrics_http&) = delete;

  /// Sets the body's function (before start(): the socket is bound before the model loads).
  void set_render(render_fn render);
  /// Serves from now on (once; after stop() it stays stopped).
  void start();
  /// Closes the listening socket, finishes open connections and joins the threads. Idempotent.
  void stop();

  int port() const { return port_; }
  /// "http://host:port/metrics".
  std::string url() const;

private:
  std::unique_ptr<httplib::Server> server_;
  std::shared_ptr<render_fn> render_;  // the handler reads it; set before start()
  std::string host_;
  int port_ = 0;
  std::thread thread_;
  bool started_ = false;  // start() runs once: a stopped server does not listen again
};

} // namespace conveyor::transport
