#include "transport/http_intake.hpp"

#include <chrono>
#include <random>

#include <nlohmann/json.hpp>

#include "schemas/events.hpp"
#include "transport/sockets.hpp"

namespace conveyor::transport {
namespace {

using json = nlohmann::json;
using header_list = std::vector<std::pair<std::string, std::string>>;

void send_error(http_exchange& x, const openai_error& e, header_list headers = {}) {
  if (e.status == 429 || e.status == 503) headers.emplace_back("Retry-After", "1");
  x.respond(e.status, "application/json", to_json(e), std::move(headers));
}

// A refusal or a failed job (the protocol's error code) as OpenAI's error.
openai_error error_for(error_code code, const std::string& message) {
  const std::string name = to_string(code);
  switch (code) {
    case error_code::overloaded: return {429, message, "rate_limit_error", "", name};
    case error_code::shutting_down: return {503, message, "service_unavailable", "", name};
    case error_code::not_found: return {404, message, "not_found_error", "", name};
    case error_code::duplicate: return {409, message, "invalid_request_error", "", name};
    case error_code::internal: return {500, message, "server_error", "", name};
    case error_code::bad_request:
    case error_code::too_long: break;
  }
  return {400, message, "invalid_request_error", "", name};
}

openai_error stopping_error() { return {503, "the server is shutting down; retry on another replica or later", "service_unavailable", "", "shutting_down"}; }

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

} // namespace

// One HTTP request's job, driven by its watch: submit, then (a retried id) fetch what the job
// published so far, then follow its events live into a whole answer or a stream of chunks. Every
// step runs on the connection's strand, woken by the watch's listener; nothing waits.
class job_exchange : public std::enable_shared_from_this<job_exchange> {
public:
  job_exchange(http_intake& in, std::shared_ptr<http_exchange> x, std::shared_ptr<openai_request> r, std::string id, bool client_id)
      : in_(in), x_(std::move(x)), r_(std::move(r)), id_(std::move(id)), client_id_(client_id),
        ctx_{r_.get(), id_, unix_seconds(), in.piece_} {}

  void begin() {
    auto [w, tag] = in_.watches_.watch(id_);  // before the submit: no event can be missed
    w_ = std::move(w);
    tag_ = tag;
    ++in_.active_;
    auto self = shared_from_this();
    x_->on_disconnect([self] { self->client_gone(); });
    if (!r_->stream)
      x_->on_timeout(std::chrono::milliseconds(static_cast<int64_t>(in_.cfg_.request_timeout_s * 1000)), [self] { self->timed_out(); });
    w_->set_listener([self] { self->x_->post([self] { self->pump(); }); });
    in_.sink_->deliver(to(), schemas::decode_result(r_->job));
  }

private:
  enum class phase { submitting, fetching, checking, live };

  reply_to to() const { return reply_to{&in_, tag_}; }
  header_list id_header() const { return {{"X-Request-Id", id_}}; }

  void pump() {
    if (done_) return;
    if (phase_ != phase::live) {
      if (auto r = w_->take_reply()) on_reply(*r);
      else if (w_->closed()) return fail(stopping_error());
      if (done_ || phase_ != phase::live) return;
    }
    while (auto ev = w_->try_next()) {
      on_event(*ev);
      if (done_) return;
    }
    if (w_->closed()) fail(stopping_error());
  }

  void on_reply(const schemas::reply& r) {
    const auto* refused = std::get_if<schemas::error_reply>(&r);
    if (phase_ == phase::submitting) {
      if (!refused) return go_live();
      if (refused->code != error_code::duplicate) return fail(error_for(refused->code, refused->message));
      phase_ = phase::fetching;  // a retried id: what the job published so far, then live
      return fetch();
    }
    if (phase_ == phase::fetching) {
      const auto* fetched = std::get_if<schemas::fetch_reply>(&r);
      if (!fetched) {
        // The job table knows the id but the publisher has no event of it: the first request's
        // `accepted` is still being committed. Nothing of the job has gone out, and the watch
        // hears everything from here on: follow it live if it is queued or running.
        if (refused && refused->code == error_code::not_found && from_ == 0) {
          phase_ = phase::checking;
          return in_.sink_->deliver(to(), schemas::decode_result(schemas::status_request{id_}));
        }
        return gone_409(refused ? refused->message : "its events cannot be read");
      }
      for (const auto& bytes : fetched->events) {
        auto ev = schemas::decode_event(bytes);
        if (!ev) return gone_409("its events cannot be read");
        from_ = schemas::seq_of(*ev) + 1;
        w_->add(std::move(*ev));
      }
      const size_t n = fetched->events.size();
      const auto max = static_cast<size_t>(in_.cfg_.limits.max_fetch_events);
      if (fetched->complete || n == 0 || n < max) return go_live();
      return fetch();
    }
    const auto* status = std::get_if<schemas::status_reply>(&r);  // phase::checking: the status
    if (status && (status->state == job_state::queued || status->state == job_state::running)) return go_live();
    gone_409("no events are kept");
  }

  void fetch() {
    in_.sink_->deliver(to(), schemas::decode_result(schemas::fetch_request{id_, from_, in_.cfg_.limits.max_fetch_events}));
  }

  void gone_409(const std::string& why) {
    fail({409, "job " + id_ + " already ran and its results are no longer kept (" + why + "); send a new request id",
          "invalid_request_error", "X-Request-Id", "duplicate"});
  }

  void go_live() {
    phase_ = phase::live;
    if (!r_->stream) return;
    x_->begin_stream(200, "text/event-stream", id_header());
    streaming_ = true;
    x_->write(render_chunk_start(ctx_));
  }

  void on_event(const schemas::job_event& ev) {
    if (const auto* e = std::get_if<schemas::error_event>(&ev)) return fail(error_for(e->code, e->message));
    const auto* t = std::get_if<schemas::tokens_event>(&ev);
    const auto* d = std::get_if<schemas::done_event>(&ev);
    if (!r_->stream) {
      if (t) tokens_.push_back(*t);
      if (!d) return;
      x_->respond(200, "application/json", render_completion(ctx_, tokens_, *d), id_header());
      return finish();
    }
    if (t) {
      shown_ = shown_ || !t->text.empty();
      x_->write(render_chunk_tokens(ctx_, *t));
    } else if (d) {
      if (!shown_ && !d->text.empty()) {  // a job whose tokens events were not kept (stream: false elsewhere)
        schemas::tokens_event all;
        all.text = d->text;
        x_->write(render_chunk_tokens(ctx_, all));
      }
      x_->write(render_chunk_done(ctx_, *d));
      x_->end();
      finish();
    }
  }

  // An error: a whole answer, or inside a stream already begun an error chunk and the end.
  void fail(const openai_error& e) {
    if (done_) return;
    if (streaming_) {
      x_->write(render_chunk_error(e));
      x_->end();
    } else {
      send_error(*x_, e, phase_ == phase::live ? id_header() : header_list{});
    }
    finish();
  }

  // The client went away before the end: the job stops, unless a retry may come for it (a
  // request id was given). (Tag 0 belongs to no watch: the cancel's reply is dropped.)
  void client_gone() {
    if (done_) return;
    if (!client_id_) in_.sink_->deliver(reply_to{&in_, 0}, schemas::decode_result(schemas::cancel_request{id_}));
    finish();
  }

  void timed_out() {
    if (done_) return;
    if (!client_id_) in_.sink_->deliver(reply_to{&in_, 0}, schemas::decode_result(schemas::cancel_request{id_}));
    fail({504, "the job did not end within --http-request-timeout (" + std::to_string(static_cast<int64_t>(in_.cfg_.request_timeout_s)) +
                   " s); use stream: true for long jobs" + (client_id_ ? ", or retry with the same request id" : ""),
          "server_error", "", "timeout"});
  }

  void finish() {
    if (done_) return;
    done_ = true;
    w_->set_listener(nullptr);  // (it held this exchange)
    in_.watches_.unwatch(id_, tag_);
    --in_.active_;
  }

  http_intake& in_;
  std::shared_ptr<http_exchange> x_;
  std::shared_ptr<openai_request> r_;
  std::string id_;
  bool client_id_ = false;
  openai_context ctx_;
  std::shared_ptr<job_watch> w_;
  uint64_t tag_ = 0, from_ = 0;
  phase phase_ = phase::submitting;
  bool done_ = false, streaming_ = false, shown_ = false;
  std::vector<schemas::tokens_event> tokens_;
};

http_intake::http_intake(http_config cfg) : cfg_(std::move(cfg)) {
  id_salt_ = (uint64_t{std::random_device{}()} << 32) | std::random_device{}();
  const int port = cfg_.port;
  if (port < 0 || port > 65535)
    throw bind_error("--http-port " + std::to_string(port) + " is not a TCP port; HINT: use 1..65535, or 0 for any free port");
  http_server_config sc;
  sc.host = cfg_.host;
  sc.port = port;
  sc.io_threads = cfg_.threads;
  sc.max_body_bytes = cfg_.max_body_bytes;
  try {
    server_ = std::make_unique<http_server>(sc);
  } catch (const std::exception& e) {
    throw bind_error("cannot bind the HTTP endpoint http://" + cfg_.host + ":" + std::to_string(port) + " (" + e.what() +
                     "); HINT: pick another --http-port (0: any free port) or --http-host, or stop what holds that port");
  }
  port_ = server_->port();
  endpoint_ = "http://" + cfg_.host + ":" + std::to_string(port_);
}

http_intake::~http_intake() { stop(); }

void http_intake::start(const intake_context& ctx) {
  if (started_) return;
  sink_ = ctx.sink;
  piece_ = ctx.piece;
  unhealthy_ = ctx.unhealthy;
  tokenize_ = ctx.tokenize;
  detokenize_ = ctx.detokenize;
  max_model_len_ = ctx.max_model_len;
  started_ = true;
  // Before a body is read: API keys on /v1 (401, OpenAI's shape).
  auto precheck = [keys = cfg_.keys](const http_request& req) -> std::optional<std::pair<int, std::string>> {
    const bool guarded = req.path.rfind("/v1", 0) == 0 || req.path == "/tokenize" || req.path == "/detokenize";
    if (!keys || !keys->enabled() || !guarded || keys->allows(req.header("Authorization"))) return std::nullopt;
    const bool given = req.has_header("Authorization");
    return std::make_pair(401, to_json({401, given ? "Incorrect API key provided. Send one of the server's keys as Authorization: Bearer <key>."
                                                   : "You didn't provide an API key. Send Authorization: Bearer <key> (the server runs with --api-key).",
                                        "invalid_request_error", "", given ? "invalid_api_key" : "missing_api_key"}));
  };
  server_->start(precheck, [this](http_request req, std::shared_ptr<http_exchange> x) { route(std::move(req), std::move(x)); });
}

void http_intake::stop() {
  if (stopped_) return;
  stopped_ = true;
  // Called after the drain: every job has ended, so each exchange has its terminal event and is
  // writing it out. Let them finish, then wake any that still wait (they answer 503).
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (active_.load() > 0 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  watches_.close_all();
  server_->stop(std::chrono::milliseconds(2000));
}

void http_intake::route(http_request req, std::shared_ptr<http_exchange> x) {
  if (req.method == "POST" && req.path == "/v1/completions") return generate(std::move(req), std::move(x), openai_endpoint::completions);
  if (req.method == "POST" && req.path == "/v1/chat/completions")
    return generate(std::move(req), std::move(x), openai_endpoint::chat_completions);
  if (req.method == "POST" && (req.path == "/tokenize" || req.path == "/detokenize"))
    return tokenize(req, *x, req.path == "/tokenize" ? openai_endpoint::tokenize : openai_endpoint::detokenize);
  if (req.method == "GET" && req.path == "/v1/models") {
    json m = {{"id", cfg_.model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "conveyor"}, {"max_model_len", max_model_len_}};
    return x->respond(200, "application/json", json{{"object", "list"}, {"data", json::array({m})}}.dump());
  }
  if (req.method == "GET" && req.path == "/health") {
    const std::optional<std::string> why = unhealthy_ ? unhealthy_() : std::nullopt;
    return x->respond(why ? 503 : 200, "application/json",
                      json{{"status", why ? "unavailable" : "serving"}, {"reason", why ? json(*why) : json(nullptr)}, {"model", cfg_.model_name}}.dump());
  }
  send_error(*x, {404, "no such endpoint: " + req.method + " " + req.path +
                           " (POST /v1/chat/completions, POST /v1/completions, GET /v1/models, POST /tokenize, POST /detokenize, GET /health)",
                  "invalid_request_error", "", ""});
}

// vLLM's /tokenize and /detokenize: answered here, on the I/O thread (no job runs).
void http_intake::tokenize(const http_request& req, http_exchange& x, openai_endpoint ep) {
  if (!tokenize_ || !detokenize_ || !piece_)  // a runtime without a tokenizer (tests)
    return send_error(x, {503, "this server has no tokenizer to answer " + req.path, "server_error", "", "internal"});
  if (req.body.size() > cfg_.max_body_bytes)
    return send_error(x, {400, "the request body is " + std::to_string(req.body.size()) + " bytes; the limit is " +
                                   std::to_string(cfg_.max_body_bytes) + " (--http-max-body)",
                          "invalid_request_error", "", "too_long"});
  auto parsed = parse_openai_request(req.body, ep, cfg_.model_name, cfg_.limits);
  if (auto* e = std::get_if<openai_error>(&parsed)) return send_error(x, *e);
  const openai_request& r = std::get<openai_request>(parsed);
  if (ep == openai_endpoint::detokenize) {
    const auto text = detokenize_(std::get<std::vector<token_id>>(r.job.input));
    if (!text) return send_error(x, {400, "tokens: an id is outside the vocabulary", "invalid_request_error", "tokens", "bad_request"});
    return x.respond(200, "application/json", json{{"prompt", *text}}.dump());
  }
  auto ids = tokenize_(r.job.input);
  if (auto* why = std::get_if<std::string>(&ids)) return send_error(x, {400, *why, "invalid_request_error", "", "bad_request"});
  const auto& tokens = std::get<std::vector<token_id>>(ids);
  json out = {{"count", tokens.size()}, {"max_model_len", max_model_len_}, {"tokens", tokens}, {"token_strs", nullptr}};
  if (r.return_token_strs) {
    out["token_strs"] = json::array();
    for (token_id t : tokens) out["token_strs"].push_back(piece_(t));
  }
  x.respond(200, "application/json", out.dump());
}

void http_intake::generate(http_request req, std::shared_ptr<http_exchange> x, openai_endpoint ep) {
  if (req.body.size() > cfg_.max_body_bytes)
    return send_error(*x, {400, "the request body is " + std::to_string(req.body.size()) + " bytes; the limit is " +
                                    std::to_string(cfg_.max_body_bytes) + " (--http-max-body)",
                           "invalid_request_error", "", "too_long"});
  auto parsed = parse_openai_request(req.body, ep, cfg_.model_name, cfg_.limits);
  if (auto* e = std::get_if<openai_error>(&parsed)) return send_error(*x, *e);
  auto r = std::make_shared<openai_request>(std::move(std::get<openai_request>(parsed)));
  // A client's request id becomes the job id, so that a retry finds the job instead of running it again.
  std::string id;
  bool client_id = false;
  for (const char* h : {"X-Request-Id", "Idempotency-Key"}) {
    if (!req.has_header(h)) continue;
    id = req.header(h);
    client_id = true;
    if (!schemas::valid_id(id))
      return send_error(*x, {400, std::string("the ") + h + " header must be 1-128 characters of [A-Za-z0-9._:/-] (it becomes the job id)",
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
  std::make_shared<job_exchange>(*this, std::move(x), std::move(r), std::move(id), client_id)->begin();
}

} // namespace conveyor::transport
