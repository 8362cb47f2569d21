#include "transport/http_intake.hpp"

#include <algorithm>
#include <chrono>
#include <random>

#include <nlohmann/json.hpp>

#include "schemas/events.hpp"
#include "transport/http_choices.hpp"
#include "transport/sockets.hpp"

namespace conveyor::transport {
namespace {

using json = nlohmann::json;

} // namespace

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
  plan_chat_ = ctx.plan_chat;
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
  auto ids = tokenize_(r.job);
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
  if (r->tools) {
    if (!plan_chat_) return send_error(*x, {503, "this server cannot render tools", "server_error", "tools", "internal"});
    r->tools->reasoning = cfg_.reasoning != reasoning_parser::none;  // thinking as reasoning_content, as without tools
    auto plan = plan_chat_(*r->tools);
    if (auto* no = std::get_if<chat_refusal>(&plan)) return send_error(*x, {400, no->message, "invalid_request_error", no->param, "bad_request"});
    chat_plan& p = std::get<chat_plan>(plan);
    r->job.input = std::move(p.prompt);
    r->job.chat_template_kwargs.clear();  // (given to the template already)
    if (p.format) r->job.format = std::move(p.format);
    for (auto& s : p.stops)
      if (std::find(r->job.stop.begin(), r->job.stop.end(), s) == r->job.stop.end()) r->job.stop.push_back(std::move(s));
    r->new_turn_parser = std::move(p.parser);
  }
  if (r->echo) {  // the prompt as the client gave it, or its ids as text
    if (const auto* text = std::get_if<std::string>(&r->job.input)) {
      r->echo_text = *text;
    } else if (const auto* ids = std::get_if<std::vector<token_id>>(&r->job.input); ids && detokenize_) {
      auto text_of_ids = detokenize_(*ids);
      if (!text_of_ids) return send_error(*x, {400, "prompt: an id is outside the vocabulary", "invalid_request_error", "prompt", "bad_request"});
      r->echo_text = std::move(*text_of_ids);
    }
  }
  r->job.stream = r->stream || r->logprobs;  // without logprobs a whole answer needs only the done event
  if (r->n > 1 && id.size() + 3 > 128)
    return send_error(*x, {400, "with n > 1 the request id names each choice's job as <id>/<i>: it must be at most 125 characters",
                           "invalid_request_error", "X-Request-Id", "bad_request"});
  answer_with_jobs(*this, std::move(x), std::move(r), std::move(id), client_id);
}

} // namespace conveyor::transport
