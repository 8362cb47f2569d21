#include "transport/http_intake.hpp"

#include <charconv>
#include <chrono>
#include <random>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "transport/sockets.hpp"

namespace conveyor::transport {
namespace {

using json = nlohmann::json;

void send_error(httplib::Response& res, const openai_error& e) {
  res.status = e.status;
  if (e.status == 429 || e.status == 503) res.set_header("Retry-After", "1");
  res.set_content(to_json(e), "application/json");
}

// An intake refusal (the protocol's error code) as OpenAI's error.
openai_error error_for(const std::string& code, const std::string& message) {
  if (code == "overloaded") return {429, message, "rate_limit_error", "", code};
  if (code == "shutting_down") return {503, message, "service_unavailable", "", code};
  if (code == "not_found") return {404, message, "not_found_error", "", code};
  if (code == "duplicate") return {409, message, "invalid_request_error", "", code};
  if (code == "internal") return {500, message, "server_error", "", code};
  return {400, message, "invalid_request_error", "", code.empty() ? "bad_request" : code};
}

openai_error stopping_error() { return {503, "the server is shutting down; retry on another replica or later", "service_unavailable", "", "shutting_down"}; }

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Unwatches when the last holder (the handler, or the streaming provider it hands on) is gone.
struct lease {
  watch_registry* reg;
  std::string id;
  uint64_t tag;
  std::shared_ptr<job_watch> w;
  std::atomic<int64_t>* active;
  ~lease() {
    reg->unwatch(id, tag);
    --*active;
  }
};

// The job table knows the id (our submit was a duplicate) but the publisher has no event of it:
// the first request's `accepted` is still being committed. Nothing of the job has gone out then,
// and the watch, registered before our submit, hears every event from here on: it is followed
// live, if the job is queued or running.
bool live(request_sink& sink, const lease& l, reply_to to) {
  sink.deliver(to, schemas::decode_result(schemas::status_request{l.id}));
  auto bytes = l.w->wait_reply();
  if (!bytes) return false;
  auto r = schemas::summarize_reply(*bytes);
  return r && r->ok && (r->state == "queued" || r->state == "running");
}

// A retried request's job already exists: its events so far, by fetch (live ones follow through
// the tap, which the watch has heard since before the submit). False: none are kept any more.
bool attach(request_sink& sink, const lease& l, reply_to to, int32_t max_events, std::string& why) {
  uint64_t from = 0;  // (the watch's pop cursor does not move while events are only added)
  for (;;) {
    schemas::fetch_request f{l.id, from, max_events};
    sink.deliver(to, schemas::decode_result(f));
    auto bytes = l.w->wait_reply();
    if (!bytes) return false;
    auto fetched = schemas::summarize_fetch_reply(*bytes);
    if (!fetched) {
      auto r = schemas::summarize_reply(*bytes);
      if (r && r->code == "not_found" && from == 0 && live(sink, l, to)) return true;
      why = r ? r->message : "its events cannot be read";
      return false;
    }
    const size_t n = fetched->events.size();
    if (n > 0) from = fetched->events.back().seq + 1;
    for (auto& ev : fetched->events) l.w->add(std::move(ev));
    if (fetched->complete || n == 0 || n < static_cast<size_t>(max_events)) return true;
  }
}

} // namespace

http_intake::http_intake(http_config cfg, piece_fn piece, health_fn health)
    : cfg_(std::move(cfg)), piece_(std::move(piece)), health_(std::move(health)), server_(std::make_unique<httplib::Server>()) {
  id_salt_ = (uint64_t{std::random_device{}()} << 32) | std::random_device{}();
  const int threads = cfg_.threads;
  server_->new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  server_->set_keep_alive_max_count(1000);
  server_->set_keep_alive_timeout(2);  // an idle connection holds a thread (and stop()) this long
  server_->set_read_timeout(30, 0);
  server_->set_write_timeout(30, 0);
  // A body a little over the limit is read and refused (400), which every client handles; one far
  // over it (4x) is refused unread and the connection closed (the client may see a broken pipe).
  const size_t max_body = cfg_.max_body_bytes, hard_cap = cfg_.max_body_bytes * 4;
  server_->set_payload_max_length(hard_cap);
  server_->set_socket_options([](socket_t sock) {  // no SO_REUSEPORT: a taken port must fail to bind
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  server_->set_pre_routing_handler([max_body, hard_cap, keys = cfg_.keys](const httplib::Request& req, httplib::Response& res) {
    if (keys && keys->enabled() && req.path.rfind("/v1", 0) == 0 && !keys->allows(req.get_header_value("Authorization"))) {
      const bool given = req.has_header("Authorization");
      send_error(res, {401, given ? "Incorrect API key provided. Send one of the server's keys as Authorization: Bearer <key>."
                                  : "You didn't provide an API key. Send Authorization: Bearer <key> (the server runs with --api-key).",
                       "invalid_request_error", "", given ? "invalid_api_key" : "missing_api_key"});
      res.set_header("WWW-Authenticate", "Bearer");
      return httplib::Server::HandlerResponse::Handled;
    }
    const std::string len = req.get_header_value("Content-Length");
    unsigned long long n = 0;
    const bool numeric = std::from_chars(len.data(), len.data() + len.size(), n).ec == std::errc{};
    if (!len.empty() && (!numeric || n > hard_cap)) {
      send_error(res, {400, "the request body is " + len + " bytes; the limit is " + std::to_string(max_body) + " (--http-max-body)",
                       "invalid_request_error", "", "too_long"});
      res.set_header("Connection", "close");
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  server_->set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string what = res.status == 404 ? "no such endpoint: " + req.method + " " + req.path + " (POST /v1/chat/completions, POST /v1/completions, GET /v1/models, GET /health)"
                       : res.status == 413 ? "the request body is over the limit of --http-max-body"
                                           : std::string("HTTP ") + std::to_string(res.status);
    res.set_content(to_json({res.status, what, res.status >= 500 ? "server_error" : "invalid_request_error", "", ""}), "application/json");
  });
  server_->set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, {500, "internal error: " + what, "server_error", "", "internal"});
  });
  server_->Post("/v1/completions", [this](const httplib::Request& q, httplib::Response& r) { generate(q, r, openai_endpoint::completions); });
  server_->Post("/v1/chat/completions", [this](const httplib::Request& q, httplib::Response& r) { generate(q, r, openai_endpoint::chat_completions); });
  server_->Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    json m = {{"id", cfg_.model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "conveyor"}};
    res.set_content(json{{"object", "list"}, {"data", json::array({m})}}.dump(), "application/json");
  });
  server_->Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    const std::optional<std::string> why = health_ ? health_() : std::nullopt;
    res.status = why ? 503 : 200;
    res.set_content(json{{"status", why ? "unavailable" : "serving"}, {"reason", why ? json(*why) : json(nullptr)}, {"model", cfg_.model_name}}.dump(),
                    "application/json");
  });
  const int port = cfg_.port;
  if (port < 0 || port > 65535)
    throw bind_error("--http-port " + std::to_string(port) + " is not a TCP port; HINT: use 1..65535, or 0 for any free port");
  const bool bound = port == 0 ? (port_ = server_->bind_to_any_port(cfg_.host)) > 0 : server_->bind_to_port(cfg_.host, port);
  if (!bound)
    throw bind_error("cannot bind the HTTP endpoint http://" + cfg_.host + ":" + std::to_string(port) +
                     " (port in use, or not an address of this machine); HINT: pick another --http-port (0: any free port) or "
                     "--http-host, or stop what holds that port");
  if (port > 0) port_ = port;
  endpoint_ = "http://" + cfg_.host + ":" + std::to_string(port_);
}

http_intake::~http_intake() {
  // Never started (the runtime's start-up failed): nothing listens. The bound socket stays open
  // until exit (httplib 0.11 closes it only from its loop, and running the loop now would serve
  // /health from a half-built runtime).
  stop();
}

void http_intake::start(request_sink& sink) {
  if (started_) return;
  sink_ = &sink;
  started_ = true;
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  // httplib 0.11's stop() does nothing until the loop runs: wait for it.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!server_->is_running() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void http_intake::stop() {
  // Called after the drain: every job has ended, so each handler has its terminal event and is
  // writing it out. Let them finish (httplib cuts a stream off once the server stops), then wake
  // any that still wait.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (active_.load() > 0 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  watches_.close_all();
  if (!thread_.joinable()) return;
  server_->stop();
  thread_.join();
}

void http_intake::generate(const httplib::Request& req, httplib::Response& res, openai_endpoint ep) {
  if (req.body.size() > cfg_.max_body_bytes)
    return send_error(res, {400, "the request body is " + std::to_string(req.body.size()) + " bytes; the limit is " +
                                     std::to_string(cfg_.max_body_bytes) + " (--http-max-body)",
                            "invalid_request_error", "", "too_long"});
  auto parsed = parse_openai_request(req.body, ep, cfg_.model_name, cfg_.limits);
  if (auto* e = std::get_if<openai_error>(&parsed)) return send_error(res, *e);
  auto r = std::make_shared<openai_request>(std::move(std::get<openai_request>(parsed)));
  // A client's request id becomes the job id, so that a retry finds the job instead of running it again.
  std::string id;
  bool client_id = false;
  for (const char* h : {"X-Request-Id", "Idempotency-Key"}) {
    if (!req.has_header(h)) continue;
    id = req.get_header_value(h);
    client_id = true;
    if (!schemas::valid_id(id))
      return send_error(res, {400, std::string("the ") + h + " header must be 1-128 characters of [A-Za-z0-9._:/-] (it becomes the job id)",
                              "invalid_request_error", h, "bad_request"});
    break;
  }
  if (!client_id) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "http-%016llx-%llu", static_cast<unsigned long long>(id_salt_),
                  static_cast<unsigned long long>(id_counter_.fetch_add(1)));
    id = buf;
  }
  r->job.id = id;
  r->job.stream = r->stream || r->logprobs;  // without logprobs a whole answer needs only the done event
  auto [w, tag] = watches_.watch(id);
  ++active_;
  std::shared_ptr<lease> l(new lease{&watches_, id, tag, w, &active_});  // (a temporary lease would unwatch at once)
  const reply_to to{this, tag};
  sink_->deliver(to, schemas::decode_result(r->job));
  auto reply = w->wait_reply();
  if (!reply) return send_error(res, stopping_error());
  auto rs = schemas::summarize_reply(*reply);
  if (!rs) return send_error(res, {500, "internal error: the submit's reply cannot be read", "server_error", "", "internal"});
  if (!rs->ok) {
    std::string why;
    if (rs->code != "duplicate") return send_error(res, error_for(rs->code, rs->message));
    if (!attach(*sink_, *l, to, cfg_.limits.max_fetch_events, why))
      return send_error(res, {409, "job " + id + " already ran and its results are no longer kept (" + why + "); send a new request id",
                              "invalid_request_error", "X-Request-Id", "duplicate"});
  }
  res.set_header("X-Request-Id", id);
  auto ctx = std::make_shared<openai_context>(openai_context{r.get(), id, unix_seconds(), piece_});
  if (!r->stream) {
    std::vector<schemas::event_summary> tokens;
    while (auto ev = w->next()) {
      if (ev->kind == "tokens") tokens.push_back(std::move(*ev));
      if (ev->kind == "done") return res.set_content(render_completion(*ctx, tokens, *ev), "application/json");
      if (ev->kind == "error") return send_error(res, error_for(ev->error_code, ev->message));
    }
    return send_error(res, stopping_error());
  }
  // Streaming: the provider runs on this handler thread until the job's terminal event.
  struct stream_state {
    bool started = false, shown = false, ended = false;
  };
  auto st = std::make_shared<stream_state>();
  request_sink* sink = sink_;
  res.set_chunked_content_provider("text/event-stream", [r, l, ctx, st, sink, client_id](size_t, httplib::DataSink& out) {
    const auto write = [&out](const std::string& s) { return s.empty() || out.write(s.data(), s.size()); };
    if (!st->started) {
      st->started = true;
      if (!write(render_chunk_start(*ctx))) return false;
    }
    auto ev = l->w->next(1000);
    if (!ev) {
      if (!out.is_writable()) return false;
      if (l->w->closed()) {
        write(render_chunk_error(stopping_error()));
        st->ended = true;
        out.done();
      }
      return true;
    }
    if (ev->kind == "tokens") {
      st->shown = st->shown || !ev->text.empty();
      return write(render_chunk_tokens(*ctx, *ev));
    }
    if (ev->kind == "done") {
      if (!st->shown && !ev->text.empty()) {  // a job whose tokens events were not kept (stream: false elsewhere)
        schemas::event_summary all;
        all.kind = "tokens";
        all.text = ev->text;
        write(render_chunk_tokens(*ctx, all));
      }
      write(render_chunk_done(*ctx, *ev));
      st->ended = true;
      out.done();
    } else if (ev->kind == "error") {
      write(render_chunk_error(error_for(ev->error_code, ev->message)));
      st->ended = true;
      out.done();
    }
    return true;
  },
  [this, l, st, sink, client_id](bool) {
    // The client went away before the end (httplib stops calling the provider once the socket
    // fails): the job stops, unless a retry may come for it (a request id was given).
    // (Tag 0 belongs to no watch: the cancel's reply is dropped. A null channel would read as PULL.)
    if (!st->ended && !client_id) sink->deliver(reply_to{this, 0}, schemas::decode_result(schemas::cancel_request{l->id}));
  });
}

} // namespace conveyor::transport
