#include "actors/request_actor.hpp"

#include <optional>
#include <random>
#include <utility>

#include "actors/job_session.hpp"
#include "schemas/events.hpp"
#include "schemas/replies.hpp"
#include "schemas/stored.hpp"  // the journal's submit map

namespace conveyor::actors {
namespace {

struct request_state {
  static inline const char* name = "request";
  request_state() = default;  // (not an aggregate: CAF would build it from its actor pointer)
  std::optional<job_session> session;  // the job's policy: events, verdicts, usage, timings
  transport::reply_to to;
  front_context ctx;
  double arrival_s = 0.0;
  seq_id sid = 0;
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

// Quits, or once the pending `accepted` reply is out.
void end_actor(self_ptr self) {
  if (self->state.accept_pending) self->state.quit_when_answered = true;
  else self->quit();
}

// An event on its way to the publisher: without its typed payload when no sink reads it.
schemas::published_event outgoing(const request_state& st, schemas::published_event ev) {
  if (!st.ctx.typed_events) ev.drop_typed_payload();
  return ev;
}

// Publishes a job's last events, counts its end, quits.
void finish(self_ptr self, job_session::end_result r) {
  auto& st = self->state;
  for (auto& ev : r.events) self->send(st.ctx.pub, p_event_atom::value, outgoing(st, std::move(ev)));
  if (st.ctx.registry) {
    if (r.failed) st.ctx.registry->count_failed();
    else st.ctx.registry->count_finished(to_string(r.reason), r.latencies);
  }
  end_actor(self);
}

void on_end(self_ptr self, const job_end& end) { finish(self, self->state.session->on_end(end, now_s())); }

// Tells the producer the job is in: once the journal has it (the accepted event goes out with
// that commit), the reply.
void answer_accepted(self_ptr self) {
  auto& st = self->state;
  const schemas::submit_request& job = st.session->job();
  schemas::wire_bytes request = st.ctx.journal ? schemas::encode(job) : schemas::wire_bytes{};
  const double arrival_unix = unix_now() - (now_s() - st.arrival_s);
  st.accept_pending = true;
  auto answered = [self, id = job.id](bool ok) {
    auto& st = self->state;
    if (ok) st.to.send(schemas::submit_reply{id});
    else  // the journal could not store the job: it is not `accepted` (its events are not sent)
      st.to.send(schemas::error_reply{id, error_code::internal,
                                      "the job journal could not store this job; it does not run. Retry "
                                      "(under a new id if it says duplicate) or see the server's log",
                                      {}});
    st.accept_pending = false;
    if (st.quit_when_answered) self->quit();
  };
  self->request(st.ctx.pub, caf::infinite, p_accept_atom::value, std::move(request), arrival_unix, st.session->accepted())
      .then([answered] { answered(true); }, [answered](caf::error&) { answered(false); });
}

// The scheduler refused the job (or did not answer).
void refused(self_ptr self, const refusal& why) {
  auto& st = self->state;
  if (!st.session->resumed()) {
    refuse_submit(st.ctx, st.to, st.session->job().id, why);
    self->quit();
    return;
  }
  if (auto r = st.session->on_resume_refused(why, now_s())) return finish(self, std::move(*r));
  end_actor(self);  // shutting down: the next start resumes it
}

void start(self_ptr self) {
  auto& st = self->state;
  job_session::submit_plan plan = st.session->plan_submit(now_s());
  if (plan.ended) {  // a resumed job whose output was complete: the table records its end
    self->request(st.ctx.sched, caf::infinite, s_submit_atom::value, std::move(plan.sub)).then([](submit_answer&) {}, [](caf::error&) {});
    return on_end(self, *plan.ended);
  }
  self->request(st.ctx.sched, caf::infinite, s_submit_atom::value, std::move(plan.sub))
      .then(
          [self](submit_answer& a) {
            auto& st = self->state;
            st.submit_answered = true;
            if (auto* why = std::get_if<refusal>(&a.outcome)) return refused(self, *why);
            st.sid = std::get<seq_id>(a.outcome);
            if (!st.session->resumed()) answer_accepted(self);
            if (st.early_end) on_end(self, *std::exchange(st.early_end, std::nullopt));
          },
          [self](caf::error& e) {
            self->state.submit_answered = true;
            refused(self, refusal{error_code::internal, "scheduler unavailable: " + self->system().render(e)});
          });
}

// Replies (through the publisher, for the job table's flow control) once the event is out.
caf::result<void> on_tokens(self_ptr self, const token_batch& b) {
  auto& st = self->state;
  job_session::tokens_result r = st.session->on_tokens(b);
  if (st.ctx.registry && !r.itl_gaps.empty()) st.ctx.registry->observe_itl_gaps(r.itl_gaps);
  if (r.stop_matched) self->send(st.ctx.sched, s_stop_atom::value, st.sid);
  if (r.event) return self->delegate(st.ctx.pub, p_event_atom::value, outgoing(st, std::move(*r.event)));
  return {};
}

request_actor::behavior_type request_impl(self_ptr self, schemas::submit_request job, double arrival_s, transport::reply_to to,
                                          front_context ctx, std::optional<schemas::resume_point> resume) {
  auto& st = self->state;
  const uint64_t seed = job.seed ? 0 : std::random_device{}() | (uint64_t{std::random_device{}()} << 32);
  st.session.emplace(std::move(job), arrival_s, session_models{ctx.tok, ctx.chat, ctx.grammars}, std::move(resume), seed);
  st.to = to;
  st.ctx = std::move(ctx);
  st.arrival_s = arrival_s;
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
  const schemas::error_code code = why.code;
  if (ctx.registry) ctx.registry->count_rejected_submit(schemas::to_string(code));
  if (!to.fire_and_forget()) {
    to.send(schemas::error_reply{job_id, code, why.message, {}});
    return;
  }
  if (!refusal_may_be_published(why, job_id)) return;
  caf::anon_send(ctx.pub, p_refusal_atom::value, schemas::published_event(schemas::error_event{job_id, 0, code, why.message}));
}

request_actor spawn_request(caf::actor_system& sys, schemas::submit_request job, double arrival_s, transport::reply_to to,
                            const front_context& ctx, std::optional<schemas::resume_point> resume) {
  auto actor = sys.spawn(request_impl, std::move(job), arrival_s, to, ctx, std::move(resume));
  if (ctx.live_requests) {
    ++*ctx.live_requests;
    actor->attach_functor([counter = ctx.live_requests] { --*counter; });
  }
  caf::anon_send(actor, r_start_atom::value);
  return actor;
}

} // namespace conveyor::actors
