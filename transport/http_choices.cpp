#include "transport/http_choices.hpp"

#include <chrono>
#include <optional>

#include "schemas/events.hpp"
#include "transport/http_intake.hpp"

namespace conveyor::transport {
namespace {

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

void send_error(http_exchange& x, const openai_error& e, header_list headers) {
  if (e.status == 429 || e.status == 503) headers.emplace_back("Retry-After", "1");
  x.respond(e.status, "application/json", to_json(e), std::move(headers));
}

class job_exchange;

// What the choices of one request share: the HTTP exchange and the answer being assembled. Every
// member runs on the connection's strand, so none of this is locked.
class choice_group {
public:
  choice_group(http_intake& in, std::shared_ptr<http_exchange> x, std::shared_ptr<openai_request> r, std::string id, bool client_id)
      : in_(in), x_(std::move(x)), r_(std::move(r)), id_(std::move(id)), client_id_(client_id), created_(unix_seconds()),
        choices_(static_cast<size_t>(r_->n)) {}

  void begin(const std::shared_ptr<choice_group>& self);
  // The first choice produced its first token: the others start.
  void leader_started();
  void stream_start() {
    if (streaming_ || done_) return;
    x_->begin_stream(200, "text/event-stream", id_header());
    streaming_ = true;
  }
  void write(std::string chunk) {
    if (!done_ && !chunk.empty()) x_->write(std::move(chunk));
  }
  // Choice i ended; the answer goes out once every choice has.
  void choice_done(int32_t i, choice_events ev);
  void fail(const openai_error& e, bool live);
  void client_gone();
  void timed_out();

  http_intake& in_;
  std::shared_ptr<http_exchange> x_;
  std::shared_ptr<openai_request> r_;
  std::string id_;
  bool client_id_;
  int64_t created_;
  std::vector<std::shared_ptr<job_exchange>> members_;
  std::vector<std::optional<choice_events>> choices_;
  size_t ended_ = 0;
  bool streaming_ = false, done_ = false, siblings_started_ = false;

private:
  std::shared_ptr<choice_group> self_;  // alive until the answer is complete (end_all)
  header_list id_header() const { return {{"X-Request-Id", id_}}; }
  void end_all();
};

// One choice's job, driven by its watch: submit, then (a retried id) fetch what the job
// published so far, then follow its events live. Every step runs on the connection's strand,
// woken by the watch's listener; nothing waits.
class job_exchange : public std::enable_shared_from_this<job_exchange> {
public:
  job_exchange(std::shared_ptr<choice_group> group, int32_t index, std::string id)
      : group_(std::move(group)), g_(*group_), in_(g_.in_), index_(index), id_(std::move(id)), job_(g_.r_->job),
        ctx_{g_.r_.get(), g_.id_, g_.created_, g_.in_.piece_, index,
             g_.r_->endpoint == openai_endpoint::chat_completions ? g_.in_.cfg_.reasoning : reasoning_parser::none},
        thinking_(ctx_.reasoning) {
    job_.id = id_;
    if (g_.r_->new_turn_parser) turn_ = g_.r_->new_turn_parser();
    if (g_.r_->n > 1) {
      if (job_.seed) job_.seed = *job_.seed + static_cast<uint64_t>(index);
      job_.stream = true;  // the first token event starts the other choices
    }
  }

  void begin() {
    auto [w, tag] = in_.watches_.watch(id_);  // before the submit: no event can be missed
    w_ = std::move(w);
    tag_ = tag;
    ++in_.active_;
    auto self = shared_from_this();
    auto x = g_.x_;
    w_->set_listener([self, x] { x->post([self] { self->pump(); }); });
    in_.sink_->deliver(to(), schemas::decode_result(job_));
  }

  // The job stops, unless a retry may come for it (a request id was given). (Tag 0 belongs to no
  // watch: the cancel's reply is dropped.)
  void abandon() {
    if (done_) return;
    if (!g_.client_id_ && w_) in_.sink_->deliver(reply_to{&in_, 0}, schemas::decode_result(schemas::cancel_request{id_}));
    finish();
  }

  void finish() {
    if (done_ || !w_) return;
    done_ = true;
    w_->set_listener(nullptr);  // (it held this exchange)
    in_.watches_.unwatch(id_, tag_);
    --in_.active_;
  }

  bool live() const { return phase_ == phase::live; }

private:
  enum class phase { submitting, fetching, checking, live };

  reply_to to() const { return reply_to{&in_, tag_}; }

  void pump() {
    if (done_) return;
    if (phase_ != phase::live) {
      if (auto r = w_->take_reply()) on_reply(*r);
      else if (w_->closed()) return g_.fail(stopping_error(), live());
      if (done_ || phase_ != phase::live) return;
    }
    while (auto ev = w_->try_next()) {
      on_event(*ev);
      if (done_) return;
    }
    if (w_->closed()) g_.fail(stopping_error(), true);
  }

  void on_reply(const schemas::reply& r) {
    const auto* refused = std::get_if<schemas::error_reply>(&r);
    if (phase_ == phase::submitting) {
      if (!refused) return go_live();
      if (refused->code != error_code::duplicate) return g_.fail(error_for(refused->code, refused->message), false);
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
    g_.fail({409, "job " + id_ + " already ran and its results are no longer kept (" + why + "); send a new request id",
             "invalid_request_error", "X-Request-Id", "duplicate"},
            false);
  }

  void go_live() {
    phase_ = phase::live;
    if (!g_.r_->stream) return;
    g_.stream_start();
    g_.write(render_chunk_start(ctx_));
  }

  void on_event(const schemas::job_event& ev) {
    if (const auto* e = std::get_if<schemas::error_event>(&ev)) return g_.fail(error_for(e->code, e->message), true);
    const auto* t = std::get_if<schemas::tokens_event>(&ev);
    const auto* d = std::get_if<schemas::done_event>(&ev);
    if (index_ == 0 && (t || d)) g_.leader_started();
    if (!g_.r_->stream) {
      if (t) tokens_.push_back(*t);
      if (d) g_.choice_done(index_, {std::move(tokens_), *d, whole_turn(d->text)});
      return;
    }
    if (t) {
      shown_ = shown_ || !t->text.empty();
      write_tokens(*t);
    } else if (d) {
      if (!shown_ && !d->text.empty()) {  // a job whose tokens events were not kept (stream: false elsewhere)
        schemas::tokens_event all;
        all.text = d->text;
        write_tokens(all);
      }
      if (turn_) {  // what the tool-call parser held back, then the calls' finish
        g_.write(render_chunk_turn(ctx_, schemas::tokens_event{}, turn_->finish()));
        g_.write(render_chunk_finish(ctx_, *d, !turn_->turn().tool_calls.empty()));
        return g_.choice_done(index_, {{}, *d, turn_->turn()});
      }
      if (ctx_.reasoning != reasoning_parser::none) {  // what the split held back (a partial tag)
        const reasoning_split rest = thinking_.finish();
        if (!rest.reasoning.empty() || !rest.content.empty()) g_.write(render_chunk_tokens(ctx_, schemas::tokens_event{}, &rest));
      }
      g_.write(render_chunk_finish(ctx_, *d));
      g_.choice_done(index_, {{}, *d, std::nullopt});
    }
  }

  std::shared_ptr<choice_group> group_;  // (the group lets go of its members when it ends)
  void write_tokens(const schemas::tokens_event& t) {
    if (turn_) return g_.write(render_chunk_turn(ctx_, t, turn_->feed(t.text)));
    if (ctx_.reasoning == reasoning_parser::none) return g_.write(render_chunk_tokens(ctx_, t));
    const reasoning_split part = thinking_.feed(t.text);
    g_.write(render_chunk_tokens(ctx_, t, &part));
  }

  choice_group& g_;
  http_intake& in_;
  int32_t index_;
  std::string id_;
  schemas::submit_request job_;
  openai_context ctx_;
  reasoning_stream thinking_;  // chat with a reasoning parser: this choice's text so far, split
  std::unique_ptr<schemas::turn_parser> turn_;  // a tool chat: this choice's answer, parsed as it comes

  // A whole (not streamed) tool chat answer, parsed; nullopt for other requests.
  std::optional<schemas::chat_turn> whole_turn(const std::string& text) {
    if (!turn_) return std::nullopt;
    (void)turn_->feed(text);
    (void)turn_->finish();
    return turn_->turn();
  }
  std::shared_ptr<job_watch> w_;
  uint64_t tag_ = 0, from_ = 0;
  phase phase_ = phase::submitting;
  bool done_ = false, shown_ = false;
  std::vector<schemas::tokens_event> tokens_;
};

void choice_group::begin(const std::shared_ptr<choice_group>& self) {
  for (int32_t i = 0; i < r_->n; ++i)
    members_.push_back(std::make_shared<job_exchange>(self, i, r_->n == 1 ? id_ : id_ + "/" + std::to_string(i)));
  // The members hold the group (their listeners hold them), and the exchange's callbacks hold it.
  x_->on_disconnect([self] { self->client_gone(); });
  if (!r_->stream)
    x_->on_timeout(std::chrono::milliseconds(static_cast<int64_t>(in_.cfg_.request_timeout_s * 1000)), [self] { self->timed_out(); });
  self_ = self;
  members_[0]->begin();
  if (r_->n == 1) siblings_started_ = true;
}

void choice_group::leader_started() {
  if (siblings_started_ || done_) return;
  siblings_started_ = true;
  for (size_t i = 1; i < members_.size(); ++i) members_[i]->begin();
}

void choice_group::choice_done(int32_t i, choice_events ev) {
  if (done_ || choices_[static_cast<size_t>(i)]) return;
  choices_[static_cast<size_t>(i)] = std::move(ev);
  members_[static_cast<size_t>(i)]->finish();
  if (++ended_ < choices_.size()) return;
  const openai_context ctx{r_.get(), id_, created_, in_.piece_, 0,
                           r_->endpoint == openai_endpoint::chat_completions ? in_.cfg_.reasoning : reasoning_parser::none};
  if (streaming_) {
    std::vector<schemas::done_event> done;
    for (auto& c : choices_) done.push_back(c->done);
    x_->write(render_stream_end(ctx, done));
    x_->end();
  } else {
    std::vector<choice_events> all;
    for (auto& c : choices_) all.push_back(std::move(*c));
    x_->respond(200, "application/json", render_completion(ctx, all), id_header());
  }
  end_all();
}

// An error ends the whole answer: a whole error, or inside a stream already begun an error chunk
// and the end. The other choices' jobs stop.
void choice_group::fail(const openai_error& e, bool live) {
  if (done_) return;
  if (streaming_) {
    x_->write(render_chunk_error(e));
    x_->end();
  } else {
    send_error(*x_, e, live ? id_header() : header_list{});
  }
  for (auto& m : members_) m->abandon();
  end_all();
}

void choice_group::client_gone() {
  if (done_) return;
  for (auto& m : members_) m->abandon();
  end_all();
}

void choice_group::timed_out() {
  if (done_) return;
  fail({504, "the job did not end within --http-request-timeout (" + std::to_string(static_cast<int64_t>(in_.cfg_.request_timeout_s)) +
                 " s); use stream: true for long jobs" + (client_id_ ? ", or retry with the same request id" : ""),
        "server_error", "", "timeout"},
       true);
}

void choice_group::end_all() {
  done_ = true;
  for (auto& m : members_) m->finish();
  members_.clear();  // a member's posted step may still run: it holds the group, sees done_ and stops
  self_.reset();
}

void answer_with_jobs(http_intake& in, std::shared_ptr<http_exchange> x, std::shared_ptr<openai_request> r, std::string id,
                      bool client_id) {
  auto g = std::make_shared<choice_group>(in, std::move(x), std::move(r), std::move(id), client_id);
  g->begin(g);
}

} // namespace conveyor::transport
