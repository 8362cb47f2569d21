// An event-driven HTTP/1.1 server (Boost.Beast on Asio): a few I/O threads run every connection,
// so an open connection costs memory (a socket, its buffers, a timer), never a thread. A client
// that sends its headers or body slowly, or stalls, only holds its own socket until its read
// deadline; a request that waits for a job holds nothing but its exchange object. Handlers run
// on the connection's strand and must not block; they answer through the `http_exchange`,
// whole or as a chunked stream, from any thread.
//
// Why Beast: the Debian-packaged, maintained HTTP library on an event loop (libboost-dev,
// header-only); cpp-httplib (the /metrics server) runs a thread per connection from a fixed pool,
// which capped the OpenAI door at 64 requests at once and let 70 stalled clients starve /health.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace conveyor::transport {

struct http_request {
  std::string method;  ///< "GET", "POST", ...
  std::string path;    ///< the target without its query
  std::map<std::string, std::string> headers;  ///< names lower-cased
  std::string body;
  /// The header's value, or "" (name in any case).
  std::string header(const std::string& name) const;
  bool has_header(const std::string& name) const;
};

/// One request's answer. Thread-safe: each call is posted to the connection's strand.
class http_exchange {
public:
  virtual ~http_exchange() = default;
  /// The whole response (status, content type, body, extra headers).
  virtual void respond(int status, std::string content_type, std::string body,
                       std::vector<std::pair<std::string, std::string>> headers = {}) = 0;
  /// Starts a chunked response; write() adds chunks, end() the last one.
  virtual void begin_stream(int status, std::string content_type, std::vector<std::pair<std::string, std::string>> headers = {}) = 0;
  virtual void write(std::string chunk) = 0;
  virtual void end() = 0;
  /// Runs `f` on the connection's strand (where the handler ran).
  virtual void post(std::function<void()> f) = 0;
  /// Calls `f` once (on the strand) when the client goes away before the response is complete.
  virtual void on_disconnect(std::function<void()> f) = 0;
  /// Calls `f` on the strand after `after`, unless the response is complete by then.
  virtual void on_timeout(std::chrono::milliseconds after, std::function<void()> f) = 0;
};

struct http_server_config {
  std::string host = "127.0.0.1";
  int port = 0;                  ///< 0: any free port
  int io_threads = 2;
  size_t max_body_bytes = 8u << 20;  ///< a body over it (up to 4x) is read and refused with 400
  size_t max_connections = 16384;    ///< more are answered 503 and closed
  std::chrono::seconds header_timeout{10};  ///< to receive a request's headers (idle keep-alive included)
  std::chrono::seconds body_timeout{30};    ///< to receive its body
  std::chrono::seconds write_timeout{30};   ///< for any one write to complete
};

/// Decides before the body is read: a response (status, body JSON) refuses the request at once
/// (the connection is closed after it); nullopt lets it through.
using http_precheck = std::function<std::optional<std::pair<int, std::string>>(const http_request& headers_only)>;
using http_handler = std::function<void(http_request, std::shared_ptr<http_exchange>)>;

class http_server {
public:
  /// Binds and listens at once (throws std::system_error with the address).
  explicit http_server(http_server_config cfg);
  ~http_server();
  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;

  int port() const { return port_; }
  /// Starts accepting on the I/O threads.
  void start(http_precheck precheck, http_handler handler);
  /// Stops accepting, gives open connections up to `grace` to finish their writes, then closes
  /// every connection and joins the threads. Idempotent.
  void stop(std::chrono::milliseconds grace);
  /// Connections open now.
  size_t connections() const;

  struct impl;

private:
  std::shared_ptr<impl> impl_;
  int port_ = 0;
  std::vector<std::thread> threads_;
  bool stopped_ = false;
};

} // namespace conveyor::transport
