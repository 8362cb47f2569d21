#include "actors/scheduler_actor.hpp"

#include <deque>
#include <memory>
#include <unordered_map>

#include "actors/trace_writer.hpp"
#include "engine/scheduler.hpp"

namespace conveyor::actors {
namespace {

struct live_job {
  std::string job_id;
  request_actor handle;
  double first_scheduled_s = -1.0;
  bool reported_start = false;
  /// A token batch is on its way and not yet acknowledged (its event not yet published); new
  /// tokens wait in `pending` and go out together with the acknowledgement.
  bool in_flight = false;
  token_batch pending;
};

struct scheduler_state {
  static inline const char* name = "scheduler";
  std::unique_ptr<scheduler> sched;
  executor_actor executor;
  runtime_control* control = nullptr;
  size_t max_remembered = 0;
  std::unordered_map<seq_id, live_job> live;
  std::unordered_map<std::string, seq_id> by_job;
  std::unordered_map<std::string, job_status> finished;  // job id -> final status
  std::deque<std::string> finished_order;
  seq_id next_id = 1;
  bool step_in_flight = false, tick_armed = false, failed = false, draining = false;
  std::vector<caf::response_promise> drain_waiters;
  runtime_stats counters;
  double rate_since_s = 0.0;  // start of the current tokens_per_s interval
  int64_t rate_since_tokens = 0;
  std::shared_ptr<trace_writer> trace;  // null: tracing off
};

using self_ptr = scheduler_actor::stateful_pointer<scheduler_state>;

const char* final_state(finish_reason r) { return r == finish_reason::cancelled ? "cancelled" : "finished"; }

void remember(scheduler_state& st, const std::string& job_id, job_status status) {
  if (st.finished.emplace(job_id, std::move(status)).second) st.finished_order.push_back(job_id);
  while (st.finished_order.size() > st.max_remembered) {
    st.finished.erase(st.finished_order.front());
    st.finished_order.pop_front();
  }
}

void maybe_finish_drain(self_ptr self) {
  auto& st = self->state;
  if (!st.draining || !st.live.empty()) return;
  for (auto& rp : st.drain_waiters) rp.deliver(true);
  st.drain_waiters.clear();
}

void send_tokens(self_ptr self, seq_id id, live_job& job);

// The publisher has sent the event made of a job's last batch (or its request actor is gone):
// send what accumulated meanwhile.
void on_tokens_published(self_ptr self, seq_id id) {
  auto it = self->state.live.find(id);
  if (it == self->state.live.end()) return;
  it->second.in_flight = false;
  if (!it->second.pending.tokens.empty()) send_tokens(self, id, it->second);
}

// Flow control on the event path: at most one token batch per job is in flight between here
// and the PUB socket (the request actor delegates the acknowledgement to the publisher). When
// the event path keeps up, every step's token goes out at once; when it falls behind (many
// streams, a fast executor), a job's tokens coalesce into one event instead of queueing in
// mailboxes without bound. Nothing is dropped.
void send_tokens(self_ptr self, seq_id id, live_job& job) {
  token_batch b = std::move(job.pending);
  job.pending = token_batch{};
  if (!job.reported_start) {
    b.first_scheduled_s = job.first_scheduled_s;
    job.reported_start = true;
  }
  job.in_flight = true;
  self->request(job.handle, caf::infinite, token_atom::value, std::move(b))
      .then([self, id] { on_tokens_published(self, id); }, [self, id](caf::error&) { on_tokens_published(self, id); });
}

// Forwards engine events to request actors: every job's tokens first, then the finishes, so
// a job's tokens always reach it before its end (a finishing job's pending tokens go out
// without waiting for the acknowledgement: messages between two actors keep their order).
void dispatch(self_ptr self, const std::vector<seq_event>& events) {
  auto& st = self->state;
  std::vector<seq_id> touched;
  for (const auto& e : events) {
    if (e.kind != event_kind::token) continue;
    ++st.counters.generation_tokens;
    auto it = st.live.find(e.id);
    if (it == st.live.end()) continue;
    token_batch& b = it->second.pending;
    if (b.tokens.empty()) touched.push_back(e.id);
    b.tokens.push_back(e.token);
    b.logprobs.push_back(e.logprob);
  }
  for (seq_id id : touched) {
    live_job& job = st.live.at(id);
    if (!job.in_flight) send_tokens(self, id, job);
  }
  for (const auto& e : events) {
    if (e.kind != event_kind::finished) continue;
    auto it = st.live.find(e.id);
    if (it == st.live.end()) continue;
    live_job& job = it->second;
    if (!job.pending.tokens.empty()) {
      if (!job.reported_start) job.pending.first_scheduled_s = job.first_scheduled_s;
      self->send(job.handle, token_atom::value, std::move(job.pending));
    }
    self->send(job.handle, finished_atom::value,
               finish_info{e.reason, e.num_prompt_tokens, e.num_output_tokens, e.num_cached_tokens, {}});
    remember(st, job.job_id, {final_state(e.reason), e.num_prompt_tokens, e.num_output_tokens, e.reason});
    st.by_job.erase(job.job_id);
    st.live.erase(it);
    ++st.counters.jobs_finished;
    st.counters.cached_tokens += e.num_cached_tokens;
  }
  maybe_finish_drain(self);
}

void fail_all(self_ptr self, const std::string& why) {
  auto& st = self->state;
  st.failed = true;
  for (auto& [id, job] : st.live) {
    if (!job.pending.tokens.empty()) self->send(job.handle, token_atom::value, std::move(job.pending));
    finish_info fi;
    fi.error = why;
    self->send(job.handle, finished_atom::value, std::move(fi));
    const sequence* s = st.sched->find(id);
    remember(st, job.job_id, {"failed", s ? s->num_prompt_tokens : 0, s ? s->num_output_tokens() : 0, std::nullopt});
  }
  st.live.clear();
  st.by_job.clear();
  maybe_finish_drain(self);
  st.control->request_stop(1, why);
}

// Hands the trace the plan about to run, with each sequence's job id.
void trace_begin(scheduler_state& st, const step_plan& plan, double now) {
  st.trace->begin_step(plan, *st.sched, [&st](seq_id id) -> const std::string* {
    auto it = st.live.find(id);
    return it == st.live.end() ? nullptr : &it->second.job_id;
  }, now);
}

// One iteration: plan, then (if there is work) one executor step whose result re-enters here.
void iterate(self_ptr self) {
  auto& st = self->state;
  if (st.step_in_flight || st.failed) return;
  const double now = now_s();
  step_plan plan = st.sched->schedule(now);
  dispatch(self, st.sched->take_events());
  if (plan.seqs.empty()) {
    // Waiting jobs that cannot run yet (deadlines pending, nothing admissible): look again soon.
    if (st.sched->has_unfinished() && !st.tick_armed) {
      st.tick_armed = true;
      self->delayed_send(self, std::chrono::milliseconds(5), tick_atom::value);
    }
    return;
  }
  for (const auto& s : plan.seqs) {
    auto it = st.live.find(s.id);
    if (it != st.live.end() && it->second.first_scheduled_s < 0) it->second.first_scheduled_s = now;
  }
  ++st.counters.steps;
  if (st.trace) trace_begin(st, plan, now_s());
  st.step_in_flight = true;
  self->request(st.executor, caf::infinite, step_atom::value, std::move(plan))
      .then(
          [self](step_result& r) {
            self->state.step_in_flight = false;
            if (self->state.trace) self->state.trace->end_step(now_s());
            dispatch(self, self->state.sched->update(r, now_s()));
            iterate(self);
          },
          [self](caf::error& e) {
            self->state.step_in_flight = false;
            if (self->state.trace) self->state.trace->end_step(now_s());
            fail_all(self, self->system().render(e));
          });
}

job_status status_of(const scheduler_state& st, const std::string& job_id) {
  if (auto it = st.by_job.find(job_id); it != st.by_job.end()) {
    const sequence* s = st.sched->find(it->second);
    if (!s) return {"queued", 0, 0, std::nullopt};
    return {s->status == seq_status::running ? "running" : "queued", s->num_prompt_tokens, s->num_output_tokens(), std::nullopt};
  }
  if (auto it = st.finished.find(job_id); it != st.finished.end()) return it->second;
  return {};
}

void kick(self_ptr self) {
  if (!self->state.step_in_flight) self->send(self, tick_atom::value);
}

scheduler_actor::behavior_type scheduler_impl(self_ptr self, scheduler_actor_config cfg, executor_actor executor,
                                              runtime_control* control) {
  auto& st = self->state;
  st.sched = std::make_unique<scheduler>(cfg.sched, cfg.cache, cfg.num_kv_blocks);
  st.executor = std::move(executor);
  st.control = control;
  st.max_remembered = cfg.max_remembered_jobs;
  st.counters.kv_blocks = cfg.num_kv_blocks;
  st.trace = cfg.trace;
  return {
      [self](submit_atom, submission& sub) -> submit_answer {
        auto& st = self->state;
        submit_answer a;
        if (st.draining || st.failed) return {false, 0, "shutting_down", "the server is shutting down; submit elsewhere or retry later"};
        if (st.by_job.count(sub.job_id)) return {false, 0, "duplicate", "job '" + sub.job_id + "' is already running; not run again"};
        if (auto it = st.finished.find(sub.job_id); it != st.finished.end())
          return {false, 0, "duplicate", "job '" + sub.job_id + "' already ran (" + it->second.state + "); not run again"};
        sub.req.id = st.next_id++;
        const submit_result r = st.sched->submit(sub.req, now_s());
        if (!r.accepted) {
          ++st.counters.jobs_rejected;
          return {false, 0, r.reason == reject_reason::overloaded ? "overloaded" : "bad_request", r.message};
        }
        live_job& job = st.live[sub.req.id];
        job.job_id = sub.job_id;
        job.handle = caf::actor_cast<request_actor>(self->current_sender());
        st.by_job[sub.job_id] = sub.req.id;
        ++st.counters.jobs_accepted;
        st.counters.prompt_tokens += static_cast<int64_t>(sub.req.prompt_token_ids.size());
        kick(self);
        return {true, sub.req.id, "", ""};
      },
      [self](cancel_atom, const std::string& job_id) -> job_status {
        auto& st = self->state;
        if (auto it = st.by_job.find(job_id); it != st.by_job.end() && st.sched->cancel(it->second))
          dispatch(self, st.sched->take_events());
        return status_of(self->state, job_id);
      },
      [self](finish_atom, seq_id id) {
        if (self->state.sched->finish(id, finish_reason::stop)) dispatch(self, self->state.sched->take_events());
      },
      [self](status_atom, const std::string& job_id) -> job_status { return status_of(self->state, job_id); },
      [self](stats_atom) -> runtime_stats {
        auto& st = self->state;
        const scheduler_stats s = st.sched->stats();
        runtime_stats r = st.counters;
        r.waiting = s.num_waiting;
        r.running = s.num_running;
        r.kv_blocks_used = s.num_kv_blocks_used;
        r.kv_usage = s.num_kv_blocks > 0 ? static_cast<double>(s.num_kv_blocks_used) / s.num_kv_blocks : 0.0;
        r.preemptions = s.num_preemptions;
        if (const double now = now_s(), dt = now - st.rate_since_s; dt >= 1.0) {
          st.counters.tokens_per_s = static_cast<double>(st.counters.generation_tokens - st.rate_since_tokens) / dt;
          st.rate_since_s = now;
          st.rate_since_tokens = st.counters.generation_tokens;
        }
        r.tokens_per_s = st.counters.tokens_per_s;
        r.draining = st.draining;
        return r;
      },
      [self](tick_atom) {
        self->state.tick_armed = false;
        iterate(self);
      },
      [self](drain_atom, double timeout_s) -> caf::result<bool> {
        auto& st = self->state;
        st.draining = true;
        auto rp = self->make_response_promise<bool>();
        st.drain_waiters.push_back(rp);
        self->delayed_send(self, std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)), drain_atom::value);
        maybe_finish_drain(self);
        return rp;
      },
      [self](drain_atom) {
        auto& st = self->state;
        std::vector<seq_id> ids;
        for (const auto& [id, job] : st.live) ids.push_back(id);
        for (seq_id id : ids) st.sched->cancel(id);
        dispatch(self, st.sched->take_events());
      },
  };
}

} // namespace

scheduler_actor spawn_scheduler(caf::actor_system& sys, const scheduler_actor_config& cfg, executor_actor executor,
                                runtime_control& control) {
  return sys.spawn(scheduler_impl, cfg, std::move(executor), &control);
}

} // namespace conveyor::actors
