#include "actors/request_actor.hpp"

#include <memory>
#include <optional>
#include <random>
#include <utility>

#include "model/text/text_stream.hpp"
#include "schemas/events.hpp"
#include "schemas/replies.hpp"
#include "schemas/stored.hpp"

namespace conveyor::actors {
namespace {

struct request_state {
  static inline const char* name = "request";
  schemas::submit_request job;
  transport::reply_to to;
  front_context ctx;
  double arrival_s = 0.0;
  seq_id sid = 0;
  uint64_t next_seq = 0;
  std::unique_ptr<model::text_stream> text;
  std::vector<token_id> pending_ids;
  std::vector<float> pending_logprobs;
  std::vector<std::vector<token_logprob>> pending_top;
  double last_token_s = -1.0;
  int32_t tokens_taken = 0;  // output tokens pushed into the text, up to a stop string
  std::optional<resume_info> resume;
  int32_t resumed_tokens = 0;  // output tokens published before the restart
  int32_t prompt_len = 0;      // the job's own prompt tokens
  // The `accepted` reply waits for the journal's commit; a job may end meanwhile (the scheduler
  // runs it at once): the actor then lives on until the reply is out.
  bool accept_pending = false, quit_when_answered = false;
  // The scheduler's answer to the submit has been handled. A job whose deadline has passed at
  // submit ends inside the scheduler's submit handler, so its end can reach this actor before
  // the answer does: it waits here until the answer is handled, so the producer always gets its
  // reply (and the `accepted` event its seq 0) before the job's end goes out.
  bool submit_answered = false;
  std::optional<job_end> early_end;
};

using self_ptr = request_actor::stateful_pointer<request_state>;

template <class Event>
schemas::wire_bytes encode_next(request_state& st, Event& ev) {
  ev.id = st.job.id;
  ev.seq = st.next_seq++;
  return schemas::encode(ev);
}

template <class Event>
void publish(self_ptr self, Event ev, bool terminal) {
  auto& st = self->state;
  self->send(st.ctx.pub, p_event_atom::value, st.job.id, encode_next(st, ev), terminal);
}

// The tokens event of what is safe to show (a stop string cannot start in it), or nothing when
// there is nothing to show or the job does not stream.
std::optional<schemas::wire_bytes> take_tokens_event(request_state& st, bool final) {
  std::string delta = st.text->take_visible(final);
  if (!st.job.stream || (st.pending_ids.empty() && delta.empty())) return std::nullopt;
  schemas::tokens_event ev;
  ev.token_ids = std::move(st.pending_ids);
  ev.text = std::move(delta);
  if (st.job.logprobs) ev.logprobs = std::move(st.pending_logprobs);
  if (st.job.top_logprobs > 0) ev.top_logprobs = std::move(st.pending_top);
  st.pending_ids.clear();
  st.pending_logprobs.clear();
  st.pending_top.clear();
  return encode_next(st, ev);
}

// The prompt's token ids, or why the job cannot run. (Its length is the job table's rule.)
std::variant<std::vector<token_id>, refusal> tokenize(const request_state& st) {
  const model::tokenizer& tok = *st.ctx.tok;
  std::vector<token_id> ids;
  try {
    if (auto* text = std::get_if<std::string>(&st.job.input)) {
      ids = tok.encode(*text, /*parse_special=*/false);
    } else if (auto* msgs = std::get_if<std::vector<schemas::chat_message>>(&st.job.input)) {
      if (!st.ctx.chat)
        return refusal{refusal_code::bad_request, "messages: the model's chat template did not compile at start-up (see the "
                                                  "server's log); send `prompt` instead"};
      std::vector<model::chat_message> m;
      for (const auto& x : *msgs) m.push_back({x.role, x.content});
      std::string text;
      try {
        text = st.ctx.chat->render(m);
      } catch (const model::chat_template_error& e) {  // the template refused these messages
        return refusal{refusal_code::bad_request, std::string("messages: ") + e.what()};
      }
      ids = tok.encode(text, /*parse_special=*/true);
    } else {
      ids = std::get<std::vector<token_id>>(st.job.input);
      for (token_id t : ids)
        if (t < 0 || t >= tok.vocab_size())
          return refusal{refusal_code::bad_request, "prompt_tokens: id " + std::to_string(t) + " is outside the vocabulary [0, " +
                                                        std::to_string(tok.vocab_size()) + ")"};
    }
  } catch (const std::exception& e) {
    return refusal{refusal_code::bad_request, std::string("prompt: cannot tokenize: ") + e.what()};
  }
  if (ids.empty()) return refusal{refusal_code::bad_request, "prompt: it has no tokens"};
  return ids;
}

model::grammar_kind grammar_kind_of(schemas::response_format::kind k) {
  switch (k) {
    case schemas::response_format::kind::json_object: return model::grammar_kind::json_object;
    case schemas::response_format::kind::json_schema: return model::grammar_kind::json_schema;
    case schemas::response_format::kind::regex: return model::grammar_kind::regex;
    case schemas::response_format::kind::grammar: return model::grammar_kind::ebnf;
  }
  return model::grammar_kind::json_object;
}

// The job's structured-output constraint (null without response_format), advanced past the
// output a resumed job had already published; or why it cannot be had.
std::variant<std::shared_ptr<token_constraint>, refusal> constraint_for(const request_state& st) {
  if (!st.job.format) return std::shared_ptr<token_constraint>{};
  if (!st.ctx.grammars) return refusal{refusal_code::bad_request, "response_format: structured outputs are not available on this server"};
  std::shared_ptr<token_constraint> c;
  try {
    c = st.ctx.grammars->constrain(grammar_kind_of(st.job.format->type), st.job.format->spec);
  } catch (const model::grammar_error& e) {
    return refusal{refusal_code::bad_request, std::string("response_format: the ") + schemas::to_string(st.job.format->type) +
                                                  " does not compile: " + e.what()};
  } catch (const std::exception& e) {
    return refusal{refusal_code::internal, std::string("response_format: the grammar engine failed: ") + e.what()};
  }
  if (st.resume)
    for (token_id t : st.resume->published)
      if (!c->accept(t)) break;  // not expected: the published output followed this grammar
  return c;
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

// Quits, or once the pending `accepted` reply is out.
void end_actor(self_ptr self) {
  if (self->state.accept_pending) self->state.quit_when_answered = true;
  else self->quit();
}

void on_end(self_ptr self, const job_end& end);
void resume_failed(self_ptr self, const refusal& why);
void resume_ended(self_ptr self, submission sub, finish_reason reason);

// Tells the producer the job is in: once the journal has it (the accepted event goes out with
// that commit), the reply.
void answer_accepted(self_ptr self) {
  auto& st = self->state;
  schemas::accepted_event ev;
  schemas::wire_bytes accepted = encode_next(st, ev);
  schemas::wire_bytes request = st.ctx.journal ? schemas::encode(st.job) : schemas::wire_bytes{};
  const double arrival_unix = unix_now() - (now_s() - st.arrival_s);
  st.accept_pending = true;
  auto answered = [self](bool ok) {
    auto& st = self->state;
    if (ok) st.to.send(schemas::encode(schemas::submit_reply{st.job.id}));
    else  // the journal could not store the job: it is not `accepted` (its events are not sent)
      st.to.send(schemas::encode(schemas::error_reply{st.job.id, schemas::error_code::internal,
                                                      "the job journal could not store this job; it does not run. Retry "
                                                      "(under a new id if it says duplicate) or see the server's log",
                                                      {}}));
    st.accept_pending = false;
    if (st.quit_when_answered) self->quit();
  };
  self->request(st.ctx.pub, caf::infinite, p_accept_atom::value, st.job.id, std::move(request), arrival_unix, std::move(accepted))
      .then([answered] { answered(true); }, [answered](caf::error&) { answered(false); });
}

void start(self_ptr self) {
  auto& st = self->state;
  submission sub;
  sub.job_id = st.job.id;
  auto tokens = tokenize(st);
  if (auto* why = std::get_if<refusal>(&tokens)) sub.refused = std::move(*why);
  else sub.req.prompt_token_ids = std::move(std::get<std::vector<token_id>>(tokens));
  // The seed is stored with the job: a job resumed after a restart samples on with it.
  if (!st.job.seed) st.job.seed = std::random_device{}() | (uint64_t{std::random_device{}()} << 32);
  sub.req.sampling = st.job.to_sampling_params(*st.job.seed);
  sub.req.stop = st.job.to_stop_params(st.ctx.tok->eog_ids());
  if (!sub.refused) {
    auto c = constraint_for(st);
    if (auto* why = std::get_if<refusal>(&c)) sub.refused = std::move(*why);
    else sub.req.constraint = std::move(std::get<std::shared_ptr<token_constraint>>(c));
  }
  if (st.resume) {
    // Continue from the prompt plus the output already published (recomputed; the prefix cache
    // helps), for the tokens still owed.
    st.prompt_len = static_cast<int32_t>(sub.req.prompt_token_ids.size());
    sub.resume = true;
    const std::optional<finish_reason> ended = st.resume->cancelled ? std::optional(finish_reason::cancelled)
                                               : st.text->stopped()    ? std::optional(finish_reason::stop)
                                               // its grammar had taken its end token (EOS under ignore_eos / min_tokens)
                                               : sub.req.constraint && sub.req.constraint->terminated() ? std::optional(finish_reason::stop)
                                                                       : job_table::resume_request(sub.req, st.resume->published);
    if (ended && !sub.refused) return resume_ended(self, std::move(sub), *ended);
  }
  sub.req.priority = st.job.priority;
  sub.req.arrival_time_s = st.arrival_s;
  if (st.job.deadline_ms) sub.req.deadline_s = st.arrival_s + static_cast<double>(*st.job.deadline_ms) / 1000.0;
  self->request(st.ctx.sched, caf::infinite, s_submit_atom::value, std::move(sub))
      .then(
          [self](submit_answer& a) {
            auto& st = self->state;
            st.submit_answered = true;
            if (auto* why = std::get_if<refusal>(&a.outcome)) {
              if (st.resume) return resume_failed(self, *why);
              refuse_submit(st.ctx, st.to, st.job.id, *why);
              self->quit();
              return;
            }
            st.sid = std::get<seq_id>(a.outcome);
            if (!st.resume) answer_accepted(self);
            if (st.early_end) on_end(self, *std::exchange(st.early_end, std::nullopt));
          },
          [self](caf::error& e) {
            auto& st = self->state;
            st.submit_answered = true;
            const refusal why{refusal_code::internal, "scheduler unavailable: " + self->system().render(e)};
            if (st.resume) return resume_failed(self, why);
            refuse_submit(st.ctx, st.to, st.job.id, why);
            self->quit();
          });
}

// Replies (through the publisher, for the job table's flow control) once the event is out.
caf::result<void> on_tokens(self_ptr self, const token_batch& b) {
  auto& st = self->state;
  if (st.ctx.registry && !b.times_s.empty()) {  // one inter-token gap per token after the job's first
    std::vector<double> gaps;
    double prev = st.last_token_s;
    for (double t : b.times_s) {
      if (prev >= 0) gaps.push_back(t - prev);
      prev = t;
    }
    st.ctx.registry->observe_itl_gaps(gaps);
  }
  if (!b.times_s.empty()) st.last_token_s = b.times_s.back();
  if (st.text->stopped()) return {};
  for (size_t i = 0; i < b.tokens.size() && !st.text->stopped(); ++i) {
    st.pending_ids.push_back(b.tokens[i]);
    st.pending_logprobs.push_back(b.logprobs[i]);
    if (st.job.top_logprobs > 0) st.pending_top.push_back(i < b.top.size() ? b.top[i] : std::vector<token_logprob>{});
    ++st.tokens_taken;
    if (st.text->push(b.tokens[i])) self->send(st.ctx.sched, s_stop_atom::value, st.sid);  // a stop string matched
  }
  if (auto ev = take_tokens_event(st, false))
    return self->delegate(st.ctx.pub, p_event_atom::value, st.job.id, std::move(*ev), false);
  return {};
}

void on_end(self_ptr self, const job_end& end) {
  auto& st = self->state;
  if (end.state == job_state::failed) {
    schemas::error_event ev;
    ev.code = schemas::error_code::internal;
    ev.message = end.error;
    publish(self, std::move(ev), true);
    if (st.ctx.registry) st.ctx.registry->count_failed();
    end_actor(self);
    return;
  }
  st.text->finish();
  if (auto ev = take_tokens_event(st, true)) self->send(st.ctx.pub, p_event_atom::value, st.job.id, std::move(*ev), false);
  const double now = now_s();
  const job_times& t = end.times;
  schemas::done_event done;
  done.reason = st.text->stopped() ? finish_reason::stop : end.reason;
  done.text = st.text->full_text();
  // After a stop string the scheduler learns of it a step or more late: the usage counts the
  // tokens up to the match (the ones the events carried), not those made meanwhile.
  // (A resumed job's earlier output is counted as output: job_table::end_job.)
  const int32_t completion = st.text->stopped() ? st.tokens_taken : end.completion_tokens;
  done.usage = {end.prompt_tokens, completion, end.cached_tokens};
  done.timing.queue_ms = ((t.first_scheduled_s >= 0 ? t.first_scheduled_s : t.finished_s) - st.arrival_s) * 1000.0;
  if (t.first_token_s >= 0 && st.resumed_tokens == 0) done.timing.ttft_ms = (t.first_token_s - st.arrival_s) * 1000.0;
  done.timing.e2e_ms = (now - st.arrival_s) * 1000.0;
  if (st.ctx.registry) st.ctx.registry->count_finished(to_string(done.reason), latencies(done, completion));
  publish(self, std::move(done), true);
  end_actor(self);
}

// A resumed job whose output was complete before the crash (its done event was not stored): the
// job table records its end, and its done event goes out now.
void resume_ended(self_ptr self, submission sub, finish_reason reason) {
  auto& st = self->state;
  sub.ended = job_info{reason == finish_reason::cancelled ? job_state::cancelled : job_state::finished, st.prompt_len,
                       st.resumed_tokens, reason};
  self->request(st.ctx.sched, caf::infinite, s_submit_atom::value, std::move(sub)).then([](submit_answer&) {}, [](caf::error&) {});
  job_end end;
  end.reason = reason;
  end.prompt_tokens = st.prompt_len;
  end.completion_tokens = st.resumed_tokens;
  end.times.finished_s = now_s();
  on_end(self, end);
}

// A resumed job the job table refused: a server shutting down leaves it for the next start; one
// whose prompt and output reach max_model_len had ended (length); anything else ends with an error.
void resume_failed(self_ptr self, const refusal& why) {
  auto& st = self->state;
  if (why.code == refusal_code::shutting_down) {
    end_actor(self);
    return;
  }
  if (why.code == refusal_code::too_long) {
    job_end end;
    end.reason = finish_reason::length;  // its prompt and output reach max_model_len
    end.prompt_tokens = st.prompt_len;
    end.completion_tokens = st.resumed_tokens;
    end.times.finished_s = now_s();
    return on_end(self, end);
  }
  schemas::error_event ev;
  ev.code = schemas::to_error_code(why.code);
  ev.message = "the job could not resume after a restart: " + why.message;
  publish(self, std::move(ev), true);
  if (st.ctx.registry) st.ctx.registry->count_failed();
  end_actor(self);
}

request_actor::behavior_type request_impl(self_ptr self, schemas::submit_request job, double arrival_s, transport::reply_to to,
                                          front_context ctx, std::optional<resume_info> resume) {
  auto& st = self->state;
  st.text = std::make_unique<model::text_stream>(*ctx.tok, job.stop);
  st.job = std::move(job);
  st.to = to;
  st.ctx = std::move(ctx);
  st.arrival_s = arrival_s;
  if (resume) {
    // Replays the published output into the text: the next delta starts where the last ended.
    st.next_seq = resume->next_seq;
    for (token_id t : resume->published) {
      if (st.text->stopped()) break;
      st.text->push(t);
      ++st.tokens_taken;
    }
    (void)st.text->take_visible(false);
    st.resumed_tokens = static_cast<int32_t>(resume->published.size());
    st.resume = std::move(resume);
  }
  return {
      [self](r_start_atom) { start(self); },
      [self](r_tokens_atom, const token_batch& b) { return on_tokens(self, b); },
      [self](r_end_atom, const job_end& end) {
        if (self->state.submit_answered) on_end(self, end);
        else self->state.early_end = end;  // handled right after the submit's answer
      },
  };
}

} // namespace

void refuse_submit(const front_context& ctx, const transport::reply_to& to, const std::string& job_id, const refusal& why) {
  const schemas::error_code code = schemas::to_error_code(why.code);
  if (ctx.registry) ctx.registry->count_rejected_submit(schemas::to_string(code));
  if (!to.fire_and_forget()) {
    to.send(schemas::encode(schemas::error_reply{job_id, code, why.message, {}}));
    return;
  }
  if (!refusal_may_be_published(why, job_id)) return;
  schemas::error_event ev;
  ev.id = job_id;
  ev.code = code;
  ev.message = why.message;
  caf::anon_send(ctx.pub, p_event_atom::value, job_id, schemas::encode(ev));
}

request_actor spawn_request(caf::actor_system& sys, schemas::submit_request job, double arrival_s, transport::reply_to to,
                            const front_context& ctx, std::optional<resume_info> resume) {
  auto actor = sys.spawn(request_impl, std::move(job), arrival_s, to, ctx, std::move(resume));
  if (ctx.live_requests) {
    ++*ctx.live_requests;
    actor->attach_functor([counter = ctx.live_requests] { --*counter; });
  }
  caf::anon_send(actor, r_start_atom::value);
  return actor;
}

} // namespace conveyor::actors
