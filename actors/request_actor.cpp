#include "actors/request_actor.hpp"

#include <memory>
#include <optional>
#include <random>

#include "model/text_stream.hpp"
#include "schemas/events.hpp"

namespace conveyor::actors {
namespace {

struct request_state {
  static inline const char* name = "request";
  schemas::submit_request job;
  request_context ctx;
  double arrival_s = 0.0;
  bool from_pull = false;
  seq_id sid = 0;
  uint64_t next_seq = 0;
  std::unique_ptr<model::text_stream> text;
  std::vector<token_id> pending_ids;
  std::vector<float> pending_logprobs;
  double first_scheduled_s = -1.0, first_token_s = -1.0, last_token_s = -1.0;
};

using self_ptr = request_actor::stateful_pointer<request_state>;

std::string as_string(const schemas::wire_bytes& b) { return {reinterpret_cast<const char*>(b.data()), b.size()}; }

template <class Event>
std::string encode_next(request_state& st, Event& ev) {
  ev.id = st.job.id;
  ev.seq = st.next_seq++;
  return as_string(schemas::encode(ev));
}

template <class Event>
void publish(self_ptr self, Event ev, bool terminal) {
  auto& st = self->state;
  self->send(st.ctx.pub, publish_atom::value, st.job.id, encode_next(st, ev), terminal);
}

// The tokens event of what is safe to show (a stop string cannot start in it), or nothing when
// there is nothing to show or the job does not stream.
std::optional<std::string> take_tokens_event(request_state& st, bool final) {
  std::string delta = st.text->take_visible(final);
  if (!st.job.stream || (st.pending_ids.empty() && delta.empty())) return std::nullopt;
  schemas::tokens_event ev;
  ev.token_ids = std::move(st.pending_ids);
  ev.text = std::move(delta);
  if (st.job.logprobs) ev.logprobs = std::move(st.pending_logprobs);
  st.pending_ids.clear();
  st.pending_logprobs.clear();
  return encode_next(st, ev);
}

// The prompt's token ids, or the error that makes the job impossible.
std::variant<std::vector<token_id>, submit_answer> tokenize(const request_state& st) {
  const model::tokenizer& tok = *st.ctx.tok;
  std::vector<token_id> ids;
  try {
    if (auto* text = std::get_if<std::string>(&st.job.input)) {
      ids = tok.encode(*text, /*parse_special=*/false);
    } else if (auto* msgs = std::get_if<std::vector<schemas::chat_message>>(&st.job.input)) {
      std::vector<model::chat_message> m;
      for (const auto& x : *msgs) m.push_back({x.role, x.content});
      ids = tok.encode(model::format_chatml(m, tok.chat_template()), /*parse_special=*/true);
    } else {
      ids = std::get<std::vector<token_id>>(st.job.input);
      for (token_id t : ids)
        if (t < 0 || t >= tok.vocab_size())
          return submit_answer{false, 0, "bad_request", "prompt_tokens: id " + std::to_string(t) + " is outside the vocabulary [0, " + std::to_string(tok.vocab_size()) + ")"};
    }
  } catch (const std::exception& e) {
    return submit_answer{false, 0, "bad_request", std::string("prompt: cannot tokenize: ") + e.what()};
  }
  if (ids.empty()) return submit_answer{false, 0, "bad_request", "prompt: it has no tokens"};
  if (static_cast<int64_t>(ids.size()) >= st.ctx.max_model_len)
    return submit_answer{false, 0, "too_long", "prompt: " + std::to_string(ids.size()) + " tokens; this server's max_model_len is " +
                                                   std::to_string(st.ctx.max_model_len) + " (prompt + output); shorten the prompt"};
  return ids;
}

// The done event's timing in seconds, for the histograms (the same numbers the client sees).
request_latencies latencies(const schemas::done_event& done, int32_t completion_tokens) {
  request_latencies l;
  l.e2e_s = done.timing.e2e_ms / 1000.0;
  l.queue_s = done.timing.queue_ms / 1000.0;
  if (done.timing.ttft_ms) {
    l.ttft_s = *done.timing.ttft_ms / 1000.0;
    if (completion_tokens > 1) l.tpot_s = (l.e2e_s - *l.ttft_s) / (completion_tokens - 1);
  }
  return l;
}

void reject(self_ptr self, const submit_answer& a) {
  auto& st = self->state;
  if (st.from_pull && a.code != "duplicate") {
    schemas::error_event ev;
    ev.id = st.job.id;
    ev.code = schemas::error_code_from_string(a.code).value_or(schemas::error_code::internal);
    ev.message = a.message;
    self->send(st.ctx.pub, publish_atom::value, st.job.id, as_string(schemas::encode(ev)));
  }
  self->quit();
}

caf::result<submit_answer> start(self_ptr self) {
  auto& st = self->state;
  auto tokens = tokenize(st);
  if (auto* err = std::get_if<submit_answer>(&tokens)) {
    reject(self, *err);
    return *err;
  }
  submission sub;
  sub.job_id = st.job.id;
  sub.req.prompt_token_ids = std::move(std::get<std::vector<token_id>>(tokens));
  sub.req.sampling = st.job.to_sampling_params(std::random_device{}());
  sub.req.stop = st.job.to_stop_params(st.ctx.tok->eog_ids());
  sub.req.priority = st.job.priority;
  sub.req.arrival_time_s = st.arrival_s;
  if (st.job.deadline_ms) sub.req.deadline_s = st.arrival_s + static_cast<double>(*st.job.deadline_ms) / 1000.0;
  auto rp = self->make_response_promise<submit_answer>();
  self->request(st.ctx.sched, caf::infinite, submit_atom::value, std::move(sub))
      .then(
          [self, rp](submit_answer& a) mutable {
            if (!a.accepted) {
              reject(self, a);
            } else {
              self->state.sid = a.id;
              publish(self, schemas::accepted_event{}, false);
            }
            rp.deliver(std::move(a));
          },
          [self, rp](caf::error& e) mutable {
            submit_answer a{false, 0, "internal", "scheduler unavailable: " + self->system().render(e)};
            reject(self, a);
            rp.deliver(std::move(a));
          });
  return rp;
}

request_actor::behavior_type request_impl(self_ptr self, schemas::submit_request job, double arrival_s, bool from_pull,
                                          request_context ctx) {
  auto& st = self->state;
  st.text = std::make_unique<model::text_stream>(*ctx.tok, job.stop);
  st.job = std::move(job);
  st.ctx = std::move(ctx);
  st.arrival_s = arrival_s;
  st.from_pull = from_pull;
  return {
      [self](start_atom) { return start(self); },
      // Replies (through the publisher, for the scheduler's flow control) once the event is out.
      [self](token_atom, const token_batch& b) -> caf::result<void> {
        auto& st = self->state;
        if (st.first_scheduled_s < 0 && b.first_scheduled_s >= 0) st.first_scheduled_s = b.first_scheduled_s;
        const double t = now_s();
        const auto n = static_cast<int64_t>(b.tokens.size());
        if (st.first_token_s < 0) st.first_token_s = t;
        if (st.ctx.registry) {  // one inter-token gap per token after the request's first
          if (st.last_token_s >= 0) st.ctx.registry->observe_itl(t - st.last_token_s, n);
          else if (n > 1) st.ctx.registry->observe_itl(0.0, n - 1);
        }
        st.last_token_s = t;
        if (st.text->stopped()) return {};
        for (size_t i = 0; i < b.tokens.size() && !st.text->stopped(); ++i) {
          st.pending_ids.push_back(b.tokens[i]);
          st.pending_logprobs.push_back(b.logprobs[i]);
          if (st.text->push(b.tokens[i])) self->send(st.ctx.sched, finish_atom::value, st.sid);  // a stop string matched
        }
        if (auto ev = take_tokens_event(st, false)) return self->delegate(st.ctx.pub, publish_atom::value, st.job.id, std::move(*ev), false);
        return {};
      },
      [self](finished_atom, const finish_info& fi) {
        auto& st = self->state;
        if (!fi.error.empty()) {
          schemas::error_event ev;
          ev.code = schemas::error_code::internal;
          ev.message = fi.error;
          publish(self, std::move(ev), true);
          if (st.ctx.registry) st.ctx.registry->count_failed();
          self->quit();
          return;
        }
        st.text->finish();
        if (auto ev = take_tokens_event(st, true)) self->send(st.ctx.pub, publish_atom::value, st.job.id, std::move(*ev), false);
        const double now = now_s();
        schemas::done_event done;
        done.reason = st.text->stopped() ? finish_reason::stop : fi.reason;
        done.text = st.text->full_text();
        done.usage = {fi.prompt_tokens, fi.completion_tokens, fi.cached_tokens};
        done.timing.queue_ms = ((st.first_scheduled_s >= 0 ? st.first_scheduled_s : now) - st.arrival_s) * 1000.0;
        if (st.first_token_s >= 0) done.timing.ttft_ms = (st.first_token_s - st.arrival_s) * 1000.0;
        done.timing.e2e_ms = (now - st.arrival_s) * 1000.0;
        if (st.ctx.registry) st.ctx.registry->count_finished(to_string(done.reason), latencies(done, fi.completion_tokens));
        publish(self, std::move(done), true);
        self->quit();
      },
  };
}

} // namespace

request_actor spawn_request(caf::actor_system& sys, schemas::submit_request job, double arrival_s, bool from_pull,
                            const request_context& ctx) {
  return sys.spawn(request_impl, std::move(job), arrival_s, from_pull, ctx);
}

} // namespace conveyor::actors
