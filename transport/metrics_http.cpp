#include "transport/metrics_http.hpp"

#include <chrono>
#include <httplib.h>

#include "transport/api_keys.hpp"
#include "transport/sockets.hpp"

namespace conveyor::transport {

metrics_http::metrics_http(const std::string& host, int port, render_fn render, std::shared_ptr<const api_keys> keys)
    : server_(std::make_unique<httplib::Server>()), render_(std::make_shared<render_fn>(std::move(render))), host_(host) {
  // Scrapes are rare and small: two pool threads, one request per connection (an idle
  // keep-alive connection would hold stop() for its timeout).
  server_->new_task_queue = [] { return new httplib::ThreadPool(2); };
  server_->set_keep_alive_max_count(1);
  server_->set_keep_alive_timeout(1);
  // NOTE: httplib's default sets SO_REUSEPORT, which lets a second server bind a port already in
  // use and share its scrapes. SO_REUSEADDR alone allows a restart past TIME_WAIT, nothing more.
  server_->set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  server_->set_read_timeout(5, 0);
  server_->set_write_timeout(5, 0);
  server_->Get("/metrics", [render = render_, keys](const httplib::Request& req, httplib::Response& res) {
    if (keys && keys->enabled() && !keys->allows(req.get_header_value("Authorization"))) {
      res.status = 401;
      res.set_header("WWW-Authenticate", "Bearer");
      res.set_content("a valid API key is required: Authorization: Bearer <key> (--api-key)\n", "text/plain");
      return;
    }
    std::optional<std::string> body;
    try {
      if (*render) body = (*render)();
    } catch (const std::exception& e) {
      res.status = 500;
      res.set_content(std::string("internal error: ") + e.what() + "\n", "text/plain");
      return;
    }
    if (!body) {
      res.status = 503;
      res.set_content("the scheduler did not answer in time; retry\n", "text/plain");
      return;
    }
    res.set_content(*body, "text/plain; version=0.0.4; charset=utf-8");
  });
  if (port < 0 || port > 65535)
    throw bind_error("--metrics-port " + std::to_string(port) + " is not a TCP port; HINT: use 1..65535, or 0 for any free port");
  const bool bound = port == 0 ? (port_ = server_->bind_to_any_port(host)) > 0 : server_->bind_to_port(host, port);
  if (!bound)
    throw bind_error("cannot bind the metrics endpoint http://" + host + ":" + std::to_string(port) +
                     " (port in use, or not an address of this machine); HINT: pick another --metrics-port (0: any free port) "
                     "or --metrics-host, or stop what holds that port");
  if (port > 0) port_ = port;
}

metrics_http::~metrics_http() {
  if (!started_) start();  // httplib closes a bound socket only from its running loop
  stop();
}

void metrics_http::set_render(render_fn render) { *render_ = std::move(render); }

void metrics_http::start() {
  if (started_) return;
  started_ = true;
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  // NOTE: httplib 0.11's stop() does nothing until the loop runs; wait for it so that a stop()
  // right after start() cannot leave listen_after_bind() blocked forever.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!server_->is_running() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void metrics_http::stop() {
  if (!thread_.joinable()) return;
  server_->stop();
  thread_.join();
}

std::string metrics_http::url() const { return "http://" + host_ + ":" + std::to_string(port_) + "/metrics"; }

} // namespace conveyor::transport
