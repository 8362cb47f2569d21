#include "actors/intake_handler.hpp"

#include <chrono>

#include "schemas/events.hpp"
#include "schemas/replies.hpp"

namespace conveyor::actors {
namespace {

using schemas::error_code;
using schemas::error_reply;

constexpr auto kActorTimeout = std::chrono::seconds(30);

error_reply error(const std::string& id, error_code code, std::string message) { return {id, code, std::move(message), {}}; }

std::optional<schemas::job_state> parse_state(const std::string& s) {
  for (auto st : {schemas::job_state::queued, schemas::job_state::running, schemas::job_state::finished,
                  schemas::job_state::cancelled, schemas::job_state::failed})
    if (s == schemas::to_string(st)) return st;
  return std::nullopt;
}

// Blocking request from the intake thread; returns nullopt (and fills `why`) on error/timeout.
template <class T, class Dest, class... Args>
std::optional<T> ask(caf::actor_system& sys, const Dest& dest, std::string& why, Args&&... args) {
  caf::scoped_actor self{sys};
  std::optional<T> out;
  self->request(dest, kActorTimeout, std::forward<Args>(args)...)
      .receive([&](T& x) { out = std::move(x); }, [&](caf::error& e) { why = sys.render(e); });
  return out;
}

} // namespace

intake_handler::intake_handler(caf::actor_system& sys, request_context ctx, schemas::decode_limits limits, std::string model_name,
                               const std::atomic<bool>& draining, std::atomic<int64_t>& live_requests)
    : sys_(sys), ctx_(std::move(ctx)), limits_(limits), model_name_(std::move(model_name)), draining_(draining),
      live_requests_(live_requests) {}

void intake_handler::count_rejection(schemas::error_code code) {
  if (ctx_.registry) ctx_.registry->count_rejection(schemas::to_string(code));
}

schemas::wire_bytes intake_handler::refuse(const schemas::error_reply& reply) {
  count_rejection(reply.code);
  return encode(reply);
}

schemas::wire_bytes intake_handler::submit(schemas::submit_request job, bool from_pull) {
  const std::string id = job.id;
  if (draining_) {
    const auto reply = error(id, error_code::shutting_down, "the server is shutting down; submit elsewhere or retry later");
    if (from_pull) {
      const auto bytes = encode(schemas::error_event{id, 0, reply.code, reply.message});
      caf::anon_send(ctx_.pub, publish_atom::value, id, std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
    }
    return refuse(reply);
  }
  auto actor = spawn_request(sys_, std::move(job), now_s(), from_pull, ctx_);
  ++live_requests_;
  actor->attach_functor([counter = &live_requests_] { --*counter; });
  std::string why;
  auto answer = ask<submit_answer>(sys_, actor, why, start_atom::value);
  if (!answer) return refuse(error(id, error_code::internal, "submit failed: " + why));
  if (!answer->accepted)
    return refuse(error(id, schemas::error_code_from_string(answer->code).value_or(error_code::internal), answer->message));
  return encode(schemas::submit_reply{id});
}

schemas::wire_bytes intake_handler::stats() {
  std::string why;
  auto s = ask<runtime_stats>(sys_, ctx_.sched, why, stats_atom::value);
  if (!s) return refuse(error("", error_code::internal, why));
  schemas::stats_reply r;
  r.queued = s->waiting;
  r.running = s->running;
  r.kv_usage = s->kv_usage;
  r.kv_blocks_used = s->kv_blocks_used;
  r.kv_blocks_total = s->kv_blocks;
  r.prompt_tokens_total = static_cast<uint64_t>(s->prompt_tokens);
  r.completion_tokens_total = static_cast<uint64_t>(s->generation_tokens);
  r.cached_tokens_total = static_cast<uint64_t>(s->cached_tokens);
  r.tokens_per_s = s->tokens_per_s;
  r.jobs_accepted = static_cast<uint64_t>(s->jobs_accepted);
  r.jobs_rejected = static_cast<uint64_t>(s->jobs_rejected);
  r.jobs_finished = static_cast<uint64_t>(s->jobs_finished);
  r.uptime_s = now_s();
  r.preemptions_total = static_cast<uint64_t>(s->preemptions);
  if (ctx_.registry) {
    const metrics_snapshot m = ctx_.registry->snapshot();
    r.jobs_failed = m.failed;
    r.rejected.assign(m.rejected.begin(), m.rejected.end());
    r.finished.assign(m.finished.begin(), m.finished.end());
    for (const auto& h : m.histograms()) r.histograms.push_back({h.name, h.data->count, h.data->sum});
  }
  return encode(r);
}

schemas::wire_bytes intake_handler::handle(const schemas::decode_result& req) {
  std::string why;
  if (auto* e = std::get_if<schemas::decode_error>(&req)) return refuse(schemas::to_reply(*e));
  if (auto* s = std::get_if<schemas::submit_request>(&req)) return submit(*s, false);
  if (auto* c = std::get_if<schemas::cancel_request>(&req)) {
    auto st = ask<job_status>(sys_, ctx_.sched, why, cancel_atom::value, c->id);
    if (!st) return refuse(error(c->id, error_code::internal, why));
    auto state = parse_state(st->state);
    if (!state) return refuse(error(c->id, error_code::not_found, "no job '" + c->id + "' (never submitted, or forgotten)"));
    return encode(schemas::cancel_reply{c->id, *state});
  }
  if (auto* s = std::get_if<schemas::status_request>(&req)) {
    auto st = ask<job_status>(sys_, ctx_.sched, why, status_atom::value, s->id);
    auto log = ask<fetch_result>(sys_, ctx_.pub, why, fetch_atom::value, s->id, int64_t{0}, int64_t{0});
    if (!st || !log) return refuse(error(s->id, error_code::internal, why));
    auto state = parse_state(st->state);
    if (!state) return refuse(error(s->id, error_code::not_found, "no job '" + s->id + "' (never submitted, or forgotten)"));
    return encode(schemas::status_reply{s->id, *state, st->prompt_tokens, st->completion_tokens, log->next_seq, st->reason});
  }
  if (auto* f = std::get_if<schemas::fetch_request>(&req)) {
    auto log = ask<fetch_result>(sys_, ctx_.pub, why, fetch_atom::value, f->id, static_cast<int64_t>(f->from_seq),
                                 static_cast<int64_t>(f->max_events));
    if (!log) return refuse(error(f->id, error_code::internal, why));
    if (!log->found) return refuse(error(f->id, error_code::not_found, "no events for job '" + f->id + "' (unknown id, or past retention)"));
    schemas::fetch_reply r{f->id, {}, log->complete};
    for (const auto& ev : log->events) r.events.emplace_back(reinterpret_cast<const uint8_t*>(ev.data()), ev.size());
    return encode(r);
  }
  if (std::holds_alternative<schemas::stats_request>(req)) return stats();
  return encode(schemas::health_reply{draining_ ? schemas::server_status::draining : schemas::server_status::serving, model_name_});
}

std::vector<uint8_t> intake_handler::on_router(std::span<const uint8_t> frame) {
  try {
    return handle(schemas::decode_request(frame, limits_));
  } catch (const std::exception& e) {
    return refuse(error("", error_code::internal, std::string("internal error: ") + e.what()));
  }
}

void intake_handler::on_pull(std::span<const uint8_t> frame) {
  try {
    auto req = schemas::decode_request(frame, limits_);
    if (auto* s = std::get_if<schemas::submit_request>(&req)) {
      (void)submit(*s, true);
      return;
    }
    // Not a valid submit: answer on the job's topic when we know its id; otherwise nobody can hear.
    std::string id;
    schemas::error_event ev;
    if (auto* e = std::get_if<schemas::decode_error>(&req)) {
      id = e->id;
      ev.code = e->code;
      ev.message = (e->field.empty() ? "" : e->field + ": ") + e->message;
    } else {
      ev.code = error_code::bad_request;
      ev.message = "op: only submit is accepted over PULL";
    }
    count_rejection(ev.code);
    if (id.empty()) return;
    ev.id = id;
    const auto bytes = encode(ev);
    caf::anon_send(ctx_.pub, publish_atom::value, id, std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  } catch (const std::exception&) {
    // A PULL frame has nobody to answer; the runtime keeps serving.
    count_rejection(error_code::internal);
  }
}

} // namespace conveyor::actors
