// The HTTP/1.1 server on Boost.Beast: an acceptor and one `session` per connection, each on its
// own strand, run by the I/O threads. A session reads a request (headers within header_timeout,
// body within body_timeout, at most 4x max_body_bytes), hands it to the handler and, while the
// answer is pending, watches the socket for the client going away; the answer is written whole
// or as chunks; then the next request of a keep-alive connection is read.
#include "transport/http_server.hpp"

#include <utility>  // (before Asio: Boost 1.74's awaitable.hpp uses std::exchange without it)

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <deque>
#include <mutex>
#include <vector>
#include <optional>
#include <unordered_map>

namespace conveyor::transport {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using header_list = std::vector<std::pair<std::string, std::string>>;

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string error_json(const std::string& message, const std::string& code) {
  std::string m;
  for (char c : message) m += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
  return R"({"error":{"message":")" + m + R"(","type":"invalid_request_error","param":null,"code":")" + code + R"("}})";
}

} // namespace

std::string http_request::header(const std::string& name) const {
  auto it = headers.find(lower(name));
  return it == headers.end() ? std::string() : it->second;
}

bool http_request::has_header(const std::string& name) const { return headers.count(lower(name)) > 0; }

class session;

// Member order matters: the io_context goes first (its pending handlers hold the last sessions,
// whose destructors use the registry below).
struct http_server::impl {
  explicit impl(http_server_config c) : cfg(std::move(c)), ioc(std::max(1, cfg.io_threads)), acceptor(ioc) {}
  void accept();
  http_server_config cfg;
  http_precheck precheck;
  http_handler handler;
  std::mutex mu;
  std::unordered_map<session*, std::weak_ptr<session>> sessions;  // guarded by mu
  std::atomic<size_t> open{0}, busy{0};
  net::io_context ioc;
  tcp::acceptor acceptor;
};

class session final : public http_exchange, public std::enable_shared_from_this<session> {
public:
  session(std::shared_ptr<http_server::impl> srv, tcp::socket sock) : srv_(std::move(srv)), stream_(std::move(sock)) {}
  ~session() override {
    {
      std::lock_guard lk(srv_->mu);
      srv_->sessions.erase(this);
    }
    --srv_->open;
    if (busy_) --srv_->busy;
  }
  void start() { net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->read_request(); }); }
  void close_now() {
    net::post(stream_.get_executor(), [self = shared_from_this()] {
      beast::error_code ec;
      self->stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
      self->stream_.close();
    });
  }
  bool busy() const { return busy_; }

  void respond(int status, std::string type, std::string body, header_list headers) override {
    post([self = shared_from_this(), status, type = std::move(type), body = std::move(body), headers = std::move(headers)]() mutable {
      self->do_respond(status, std::move(type), std::move(body), std::move(headers), false);
    });
  }
  void begin_stream(int status, std::string type, header_list headers) override {
    post([self = shared_from_this(), status, type = std::move(type), headers = std::move(headers)] {
      if (self->answered_ || self->closed_) return;
      self->answered_ = true;
      self->head_ = std::make_shared<bhttp::response<bhttp::empty_body>>(static_cast<bhttp::status>(status), 11);
      self->head_->set(bhttp::field::content_type, type);
      self->head_->set(bhttp::field::cache_control, "no-cache");
      for (const auto& [k, v] : headers) self->head_->set(k, v);
      self->head_->keep_alive(self->keep_alive_);
      self->head_->chunked(true);
      self->sr_ = std::make_shared<bhttp::response_serializer<bhttp::empty_body>>(*self->head_);
      self->writing_ = true;
      self->stream_.expires_after(self->srv_->cfg.write_timeout);
      bhttp::async_write_header(self->stream_, *self->sr_, [self](beast::error_code ec, size_t) {
        self->stream_.expires_never();
        self->writing_ = false;
        if (ec) return self->gone();
        self->pump();
      });
    });
  }
  void write(std::string chunk) override {
    if (chunk.empty()) return;
    post([self = shared_from_this(), c = std::move(chunk)]() mutable {
      self->chunks_.push_back(std::move(c));
      self->pump();
    });
  }
  void end() override {
    post([self = shared_from_this()] {
      self->ending_ = true;
      self->pump();
    });
  }
  void post(std::function<void()> f) override { net::post(stream_.get_executor(), std::move(f)); }
  void on_timeout(std::chrono::milliseconds after, std::function<void()> f) override {
    post([self = shared_from_this(), after, f = std::move(f)]() mutable {
      if (self->done_ || self->closed_) return;
      self->timer_ = std::make_shared<net::steady_timer>(self->stream_.get_executor(), after);
      self->timer_->async_wait([self, f = std::move(f), t = self->timer_](beast::error_code ec) {
        if (!ec && !self->done_ && !self->closed_) f();
      });
    });
  }
  void on_disconnect(std::function<void()> f) override {
    post([self = shared_from_this(), f = std::move(f)]() mutable {
      if (self->closed_) return f();
      self->on_gone_ = std::move(f);
    });
  }

private:
  void read_request() {
    if (closed_) return;
    parser_.emplace();
    parser_->header_limit(64 * 1024);
    parser_->body_limit(4 * srv_->cfg.max_body_bytes);
    stream_.expires_after(srv_->cfg.header_timeout);
    bhttp::async_read_header(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
  }

  void on_header(beast::error_code ec) {
    if (ec == bhttp::error::body_limit) {  // Content-Length over 4x the limit: refused unread
      keep_alive_ = false;
      return do_respond(400, "application/json",
                        error_json("the request body is over 4x the limit of " + std::to_string(srv_->cfg.max_body_bytes) +
                                       " bytes (--http-max-body); refused unread", "too_long"), {}, true);
    }
    if (ec) return close();  // the client closed, or its headers did not come in time
    const auto& msg = parser_->get();
    req_ = http_request{};
    req_.method = std::string(msg.method_string());
    const std::string target(msg.target());
    req_.path = target.substr(0, target.find('?'));
    for (const auto& f : msg) req_.headers[lower(std::string(f.name_string()))] = std::string(f.value());
    keep_alive_ = msg.keep_alive();
    if (srv_->precheck) {
      if (auto refusal = srv_->precheck(req_)) {
        keep_alive_ = false;
        return do_respond(refusal->first, "application/json", std::move(refusal->second), {{"WWW-Authenticate", "Bearer"}}, true);
      }
    }
    stream_.expires_after(srv_->cfg.body_timeout);
    bhttp::async_read(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) { self->on_body(ec); });
  }

  void on_body(beast::error_code ec) {
    stream_.expires_never();
    if (ec == bhttp::error::body_limit) {
      keep_alive_ = false;
      return do_respond(400, "application/json", error_json("the request body is over 4x --http-max-body; refused", "too_long"), {}, true);
    }
    if (ec) return close();
    req_.body = std::move(parser_->get().body());
    parser_.reset();
    answered_ = done_ = false;
    busy_ = true;
    ++srv_->busy;
    watch_for_disconnect();
    try {
      srv_->handler(std::move(req_), shared_from_this());
    } catch (const std::exception& e) {
      do_respond(500, "application/json", error_json(std::string("internal error: ") + e.what(), "internal"), {}, false);
    }
  }

  // While the answer is pending: a readable socket with nothing to read is a client that left.
  void watch_for_disconnect() {
    if (waiting_read_ || closed_) return;
    waiting_read_ = true;
    stream_.socket().async_wait(tcp::socket::wait_read, [self = shared_from_this()](beast::error_code ec) {
      self->waiting_read_ = false;
      if (ec || self->done_) return;
      char c;
      const ssize_t n = ::recv(self->stream_.socket().native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) self->gone();
      // n > 0: the client pipelined its next request; it is read after this answer.
    });
  }

  void do_respond(int status, std::string type, std::string body, header_list headers, bool unread) {
    if (answered_ || closed_) return;
    answered_ = true;
    auto res = std::make_shared<bhttp::response<bhttp::string_body>>(static_cast<bhttp::status>(status), 11);
    res->set(bhttp::field::content_type, type);
    for (const auto& [k, v] : headers) res->set(k, v);
    res->keep_alive(keep_alive_ && !unread);
    res->body() = std::move(body);
    res->prepare_payload();
    writing_ = true;
    stream_.expires_after(srv_->cfg.write_timeout);
    bhttp::async_write(stream_, *res, [self = shared_from_this(), res](beast::error_code ec, size_t) {
      self->stream_.expires_never();
      self->writing_ = false;
      self->finished(ec, !res->keep_alive());
    });
  }

  void pump() {
    if (writing_ || !sr_ || closed_) return;
    if (!chunks_.empty()) {
      auto data = std::make_shared<std::string>(std::move(chunks_.front()));
      chunks_.pop_front();
      writing_ = true;
      stream_.expires_after(srv_->cfg.write_timeout);
      net::async_write(stream_, bhttp::make_chunk(net::buffer(*data)), [self = shared_from_this(), data](beast::error_code ec, size_t) {
        self->stream_.expires_never();
        self->writing_ = false;
        if (ec) return self->gone();
        self->pump();
      });
    } else if (ending_) {
      ending_ = false;
      writing_ = true;
      stream_.expires_after(srv_->cfg.write_timeout);
      net::async_write(stream_, bhttp::make_chunk_last(), [self = shared_from_this()](beast::error_code ec, size_t) {
        self->stream_.expires_never();
        self->writing_ = false;
        self->sr_.reset();
        self->head_.reset();
        self->finished(ec, !self->keep_alive_);
      });
    }
  }

  // The answer is out (or failed): the next request, or the end of the connection.
  void finished(beast::error_code ec, bool close_after) {
    done_ = true;
    on_gone_ = nullptr;
    if (timer_) std::exchange(timer_, nullptr)->cancel();
    if (busy_) {
      busy_ = false;
      --srv_->busy;
    }
    if (ec || close_after) return close();
    if (waiting_read_) {
      beast::error_code ignored;
      stream_.socket().cancel(ignored);  // the disconnect watch; nothing else is pending
    }
    read_request();
  }

  void gone() {
    if (!done_ && on_gone_) std::exchange(on_gone_, nullptr)();
    close();
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.close();
    if (!done_ && on_gone_) std::exchange(on_gone_, nullptr)();
  }

  std::shared_ptr<http_server::impl> srv_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  http_request req_;
  bool keep_alive_ = false, busy_ = false, answered_ = false, done_ = true, closed_ = false;
  bool waiting_read_ = false, writing_ = false, ending_ = false;
  std::shared_ptr<bhttp::response<bhttp::empty_body>> head_;
  std::shared_ptr<bhttp::response_serializer<bhttp::empty_body>> sr_;
  std::deque<std::string> chunks_;
  std::function<void()> on_gone_;
  std::shared_ptr<net::steady_timer> timer_;
};

void http_server::impl::accept() {
  acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket sock) {
    if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
    if (!ec) {
      if (open.load() >= cfg.max_connections) {
        static const std::string busy_reply = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
                                              "Connection: close\r\nContent-Length: 0\r\n\r\n";
        beast::error_code ignored;
        net::write(sock, net::buffer(busy_reply), ignored);
        sock.close(ignored);
      } else {
        ++open;
        // (the impl outlives its sessions: the server joins its threads before it goes)
        auto s = std::make_shared<session>(std::shared_ptr<impl>(std::shared_ptr<impl>{}, this), std::move(sock));
        {
          std::lock_guard lk(mu);
          sessions.emplace(s.get(), s);
        }
        s->start();
      }
    }
    accept();
  });
}

http_server::http_server(http_server_config cfg) : impl_(std::make_shared<impl>(std::move(cfg))) {
  tcp::resolver resolver(impl_->ioc);
  const auto results = resolver.resolve(impl_->cfg.host, std::to_string(impl_->cfg.port), tcp::resolver::passive);
  const tcp::endpoint ep = results.begin()->endpoint();
  impl_->acceptor.open(ep.protocol());
  impl_->acceptor.set_option(net::socket_base::reuse_address(true));  // a restart past TIME_WAIT; no SO_REUSEPORT
  impl_->acceptor.bind(ep);
  impl_->acceptor.listen(net::socket_base::max_listen_connections);
  port_ = impl_->acceptor.local_endpoint().port();
}

http_server::~http_server() { stop(std::chrono::milliseconds(0)); }

void http_server::start(http_precheck precheck, http_handler handler) {
  impl_->precheck = std::move(precheck);
  impl_->handler = std::move(handler);
  net::post(impl_->ioc, [i = impl_.get()] { i->accept(); });
  for (int t = 0; t < std::max(1, impl_->cfg.io_threads); ++t) threads_.emplace_back([i = impl_.get()] { i->ioc.run(); });
}

void http_server::stop(std::chrono::milliseconds grace) {
  if (stopped_) return;
  stopped_ = true;
  net::post(impl_->ioc, [i = impl_.get()] {
    beast::error_code ignored;
    i->acceptor.close(ignored);
  });
  // Answers being written get `grace` to finish; then every connection closes.
  const auto until = std::chrono::steady_clock::now() + grace;
  while (impl_->busy.load() > 0 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  // The sessions are held, then closed and let go outside the lock: a session whose I/O thread
  // dropped it meanwhile dies with our reference, and its destructor takes the lock (taking it
  // while holding it deadlocked shutdown).
  std::vector<std::shared_ptr<session>> live;
  {
    std::lock_guard lk(impl_->mu);
    for (auto& [p, w] : impl_->sessions)
      if (auto s = w.lock()) live.push_back(std::move(s));
  }
  for (auto& s : live) s->close_now();
  live.clear();
  const auto drain_until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (impl_->open.load() > 0 && std::chrono::steady_clock::now() < drain_until) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  impl_->ioc.stop();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

size_t http_server::connections() const { return impl_->open.load(); }

} // namespace conveyor::transport
