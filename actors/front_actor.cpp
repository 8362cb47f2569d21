#include "actors/front_actor.hpp"

#include <algorithm>
#include <chrono>

#include "schemas/events.hpp"
#include "schemas/replies.hpp"

namespace conveyor::actors {
namespace {

using schemas::error_code;

// An answer the scheduler or publisher owes us within this time, or the reply is `internal`.
constexpr auto kActorTimeout = std::chrono::seconds(30);

struct front_state {
  static inline const char* name = "front";
  front_context ctx;
};

using self_ptr = front_actor::stateful_pointer<front_state>;

void refuse(const front_context& ctx, const transport::reply_to& to, const std::string& id, error_code code, std::string message) {
  if (ctx.registry) ctx.registry->count_rejection(schemas::to_string(code));
  to.send(schemas::error_reply{id, code, std::move(message), {}});
}

auto internal_error(self_ptr self, transport::reply_to to, std::string id) {
  return [self, to, id](caf::error& e) { refuse(self->state.ctx, to, id, error_code::internal, self->system().render(e)); };
}

std::string not_found(const std::string& id) { return "no job '" + id + "' (never submitted, or forgotten)"; }

// A frame that did not decode. Over ROUTER: its error reply. Over PULL, nobody waits for a
// reply: when it names a job id, the job table decides whether an error event may go on that
// job's topic (never when the id belongs to a job it knows).
void on_decode_error(self_ptr self, const transport::reply_to& to, const schemas::decode_error& e) {
  const front_context& ctx = self->state.ctx;
  if (!to.fire_and_forget()) {
    if (ctx.registry) {
      if (e.submit) ctx.registry->count_rejected_submit(schemas::to_string(e.code));
      else ctx.registry->count_rejection(schemas::to_string(e.code));
    }
    to.send(schemas::to_reply(e));
    return;
  }
  refusal why{e.code == error_code::too_long || e.code == error_code::internal ? e.code : error_code::bad_request,
              (e.field.empty() ? "" : e.field + ": ") + e.message};
  if (e.id.empty()) {
    refuse_submit(ctx, to, e.id, why);  // counted; nobody to tell
    return;
  }
  submission sub;
  sub.job_id = e.id;
  sub.refused = why;
  self->request(ctx.sched, kActorTimeout, s_submit_atom::value, std::move(sub))
      .then(
          [self, to, id = e.id](submit_answer& a) {
            if (auto* r = std::get_if<refusal>(&a.outcome)) refuse_submit(self->state.ctx, to, id, *r);
          },
          [self, to, why](caf::error&) { refuse_submit(self->state.ctx, to, "", why); });
}

void on_status(self_ptr self, const transport::reply_to& to, const std::string& id) {
  self->request(self->state.ctx.sched, kActorTimeout, s_status_atom::value, id)
      .then(
          [self, to, id](job_status& st) {
            if (!st.info) return refuse(self->state.ctx, to, id, error_code::not_found, not_found(id));
            self->request(self->state.ctx.pub, kActorTimeout, p_fetch_atom::value, id, int64_t{0}, int64_t{0})
                .then(
                    [to, id, info = *st.info](fetch_result& log) {
                      to.send(schemas::status_reply{id, info.state, info.prompt_tokens, info.completion_tokens, log.next_seq, info.reason});
                    },
                    internal_error(self, to, id));
          },
          internal_error(self, to, id));
}

void on_fetch(self_ptr self, const transport::reply_to& to, const schemas::fetch_request& f) {
  self->request(self->state.ctx.pub, kActorTimeout, p_fetch_atom::value, f.id, static_cast<int64_t>(f.from_seq),
                static_cast<int64_t>(f.max_events))
      .then(
          [self, to, id = f.id](fetch_result& log) {
            if (!log.found)
              return refuse(self->state.ctx, to, id, error_code::not_found,
                            "no events for job '" + id + "' (unknown id, or past retention)");
            to.send(schemas::fetch_reply{id, std::move(log.events), log.complete});
          },
          internal_error(self, to, f.id));
}

void on_stats(self_ptr self, const transport::reply_to& to) {
  self->request(self->state.ctx.sched, kActorTimeout, s_stats_atom::value)
      .then(
          [self, to](serving_stats& s) {
            schemas::stats_reply r;
            r.serving = s;
            r.uptime_s = now_s();
            if (const metrics* m = self->state.ctx.registry) {
              const metrics_snapshot snap = m->snapshot();
              r.jobs_rejected = snap.rejected_submits;
              r.jobs_failed = snap.failed;
              r.rejected.assign(snap.rejected.begin(), snap.rejected.end());
              r.finished.assign(snap.finished.begin(), snap.finished.end());
              for (const auto& h : snap.histograms()) r.histograms.push_back({h.name, h.data->count, h.data->sum});
            }
            to.send(std::move(r));
          },
          internal_error(self, to, ""));
}

void on_inbound(self_ptr self, inbound& in) {
  const front_context& ctx = self->state.ctx;
  const transport::reply_to to = in.to;
  if (auto* e = std::get_if<schemas::decode_error>(&in.request)) return on_decode_error(self, to, *e);
  if (auto* s = std::get_if<schemas::submit_request>(&in.request)) {
    // From the moment a stop is requested (SIGTERM: /health already answers 503) a new job is
    // refused here, before the drain reaches the job table, which refuses it the same way.
    if (!in.resume && ctx.control && ctx.control->stopping())
      return refuse_submit(ctx, to, s->id, refusal{error_code::shutting_down, "the server is shutting down; submit elsewhere or retry later"});
    spawn_request(self->system(), std::move(*s), in.arrival_s, to, ctx, std::move(in.resume));
    return;
  }
  if (to.fire_and_forget()) {  // PULL takes only submits
    schemas::decode_error e{error_code::bad_request, "op", "only submit is accepted over PULL", "", true};
    return on_decode_error(self, to, e);
  }
  if (auto* c = std::get_if<schemas::cancel_request>(&in.request)) {
    self->request(ctx.sched, kActorTimeout, s_cancel_atom::value, c->id)
        .then(
            [self, to, id = c->id](job_status& st) {
              if (!st.info) return refuse(self->state.ctx, to, id, error_code::not_found, not_found(id));
              auto reply = [to, id, state = st.info->state] { to.send(schemas::cancel_reply{id, state}); };
              if (!self->state.ctx.journal || st.info->state != job_state::cancelled) return reply();
              // With the journal, the acknowledgement waits until the cancel is stored.
              self->request(self->state.ctx.pub, kActorTimeout, p_cancel_atom::value, id)
                  .then([reply] { reply(); }, internal_error(self, to, id));
            },
            internal_error(self, to, c->id));
    return;
  }
  if (auto* s = std::get_if<schemas::status_request>(&in.request)) return on_status(self, to, s->id);
  if (auto* f = std::get_if<schemas::fetch_request>(&in.request)) return on_fetch(self, to, *f);
  if (std::holds_alternative<schemas::stats_request>(in.request)) return on_stats(self, to);
  const bool draining = ctx.draining && ctx.draining->load();
  to.send(schemas::health_reply{draining ? schemas::server_status::draining : schemas::server_status::serving, ctx.model_name});
}

front_actor::behavior_type front_impl(self_ptr self, front_context ctx) {
  self->state.ctx = std::move(ctx);
  return {
      [self](f_inbound_atom, inbound& in) { on_inbound(self, in); },
  };
}

} // namespace

front_actor spawn_front(caf::actor_system& sys, const front_context& ctx, bool detached) {
  if (!detached) return sys.spawn(front_impl, ctx);
  return sys.spawn<caf::detached>(front_impl, ctx);
}

void front_door::deliver(transport::reply_to to, schemas::decode_result request, std::optional<schemas::resume_point> resume) {
  // A resumed job's latencies count from the first replica's arrival.
  const double arrival_s = resume ? now_s() - std::max(0.0, unix_now() - resume->arrival_unix) : now_s();
  caf::anon_send(front_, f_inbound_atom::value, inbound{to, std::move(request), arrival_s, std::move(resume)});
}

} // namespace conveyor::actors
