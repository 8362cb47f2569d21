#include "actors/scheduler_actor.hpp"

#include <optional>
#include <unordered_map>

#include "actors/trace_writer.hpp"

namespace conveyor::actors {
namespace {

struct scheduler_state {
  static inline const char* name = "scheduler";
  std::unique_ptr<job_table> jobs;
  executor_actor executor;
  runtime_control* control = nullptr;
  std::unordered_map<seq_id, request_actor> handles;  // live jobs' request actors
  // Steps sent to the executor whose results are not applied yet (at most 1, or 2 pipelined);
  // a collect request outstanding; planning paused while the journal stores first runs; an
  // executor failure seen (no more steps).
  int32_t submitted = 0;
  bool pipelined = false, collecting = false, planning_blocked = false, failed = false, tick_armed = false;
  std::vector<caf::response_promise> drain_waiters;
  std::shared_ptr<trace_writer> trace;  // null: tracing off
  std::optional<publisher_actor> journal;  // the journal is on: mark first runs through it
  std::atomic<int32_t>* waiting_gauge = nullptr;
};

using self_ptr = scheduler_actor::stateful_pointer<scheduler_state>;

void maybe_finish_drain(self_ptr self) {
  auto& st = self->state;
  if (!st.jobs->draining() || !st.jobs->drained()) return;
  for (auto& rp : st.drain_waiters) rp.deliver(true);
  st.drain_waiters.clear();
}

void deliver(self_ptr self);

// Token batches go as requests: the reply comes (delegated to the publisher) once their event
// is on the PUB socket, and releases the job's next batch (job_table flow control). Outputs go
// in the table's order; CAF keeps the order of messages between two actors, so a job's tokens
// reach it before its end.
void deliver(self_ptr self) {
  auto& st = self->state;
  for (auto& out : st.jobs->take_outputs()) {
    auto it = st.handles.find(out.id);
    if (it == st.handles.end()) continue;
    if (out.what == job_output::kind::tokens) {
      const seq_id id = out.id;
      auto acked = [self, id] {
        self->state.jobs->on_published(id);
        deliver(self);
      };
      self->request(it->second, caf::infinite, r_tokens_atom::value, std::move(out.tokens))
          .then(acked, [acked](caf::error&) { acked(); });
    } else {
      self->send(it->second, r_end_atom::value, std::move(out.end));
      st.handles.erase(it);
    }
  }
  maybe_finish_drain(self);
}

void submit_step(self_ptr self, step_plan plan);
void ensure_collect(self_ptr self);

void fail_all(self_ptr self, const std::string& why) {
  self->state.failed = true;
  self->state.jobs->fail_all(why, now_s());
  deliver(self);
  self->state.control->request_stop(1, why);
}

void step_failed(self_ptr self, const caf::error& e) {
  if (self->state.trace) self->state.trace->end_step(now_s());
  if (!self->state.failed) fail_all(self, self->system().render(e));
}

// One iteration: plan, then (if there is work) one executor step whose result re-enters here.
// Pipelined, the plan is made while the step before still runs (at most one result pending):
//   submit A, plan + submit B, collect A -> update, plan + submit C, collect B -> update, ...
// so the device always has the next step queued; results are applied in plan order.
void iterate(self_ptr self) {
  auto& st = self->state;
  if (st.failed || st.planning_blocked) return;
  if (st.submitted >= (st.pipelined ? 2 : 1)) return ensure_collect(self);
  step_plan plan = st.jobs->schedule(now_s());
  deliver(self);
  if (plan.seqs.empty()) {
    // Waiting jobs that cannot run yet (deadlines pending, nothing admissible): look again soon.
    if (st.submitted == 0 && st.jobs->has_unfinished() && !st.tick_armed) {
      st.tick_armed = true;
      self->delayed_send(self, std::chrono::milliseconds(5), s_tick_atom::value);
    }
    return ensure_collect(self);  // pipelined: nothing to queue behind the step in flight
  }
  std::vector<std::string> first_runs = st.jobs->take_first_scheduled();
  if (st.journal && !first_runs.empty()) {
    // Stored before the step that runs them: a job that crashes the server is known at restart.
    st.planning_blocked = true;
    ensure_collect(self);  // a step in flight is collected meanwhile
    self->request(*st.journal, caf::infinite, p_running_atom::value, std::move(first_runs))
        .then(
            [self, plan = std::move(plan)]() mutable {
              self->state.planning_blocked = false;
              if (!self->state.failed) submit_step(self, std::move(plan));
            },
            [self](caf::error& e) {
              self->state.planning_blocked = false;
              if (!self->state.failed) fail_all(self, "journal unavailable: " + self->system().render(e));
            });
    return;
  }
  submit_step(self, std::move(plan));
}

void apply_result(self_ptr self, step_result& r) {
  auto& st = self->state;
  --st.submitted;
  const double back = now_s();
  if (st.failed) {
    if (st.trace) st.trace->end_step(back);
    return;
  }
  const int64_t accepted_before = st.trace ? st.jobs->sched().stats().num_spec_accepted_tokens : 0;
  st.jobs->update(r, back);
  if (st.trace) st.trace->end_step(back, st.jobs->sched().stats().num_spec_accepted_tokens - accepted_before);
  if (st.waiting_gauge) st.waiting_gauge->store(st.jobs->sched().num_waiting());
  deliver(self);
  iterate(self);
}

void submit_step(self_ptr self, step_plan plan) {
  auto& st = self->state;
  if (st.trace) st.trace->begin_step(plan, st.jobs->sched(), [&st](seq_id id) { return st.jobs->job_id_of(id); }, now_s());
  ++st.submitted;
  if (!st.pipelined) {
    self->request(st.executor, caf::infinite, x_step_atom::value, std::move(plan))
        .then([self](step_result& r) { apply_result(self, r); },
              [self](caf::error& e) {
                --self->state.submitted;
                step_failed(self, e);
              });
    return;
  }
  // The reply only acknowledges; a failure here is the step's (its collect fails too).
  self->request(st.executor, caf::infinite, x_submit_atom::value, std::move(plan)).then([](uint64_t) {}, [self](caf::error& e) { step_failed(self, e); });
  iterate(self);  // plan the next step while this one runs (or collect, two being out)
}

void ensure_collect(self_ptr self) {
  auto& st = self->state;
  if (!st.pipelined || st.collecting || st.submitted == 0 || st.failed) return;
  st.collecting = true;
  self->request(st.executor, caf::infinite, x_collect_atom::value)
      .then(
          [self](step_result& r) {
            self->state.collecting = false;
            apply_result(self, r);
          },
          [self](caf::error& e) {
            self->state.collecting = false;
            --self->state.submitted;
            step_failed(self, e);
          });
}

// New work: plan at once when the loop is idle; otherwise the next iteration takes it.
void kick(self_ptr self) {
  auto& st = self->state;
  if (!st.planning_blocked && !st.collecting && st.submitted == 0) self->send(self, s_tick_atom::value);
}

scheduler_actor::behavior_type scheduler_impl(self_ptr self, scheduler_actor_config cfg, executor_actor executor,
                                              runtime_control* control) {
  auto& st = self->state;
  st.jobs = std::make_unique<job_table>(cfg.sched, cfg.cache, cfg.num_kv_blocks, cfg.max_remembered_jobs, cfg.retention_s);
  for (const auto& r : cfg.restored_finished) st.jobs->restore_finished(r.job_id, r.info, now_s() - std::max(0.0, unix_now() - r.ended_unix));
  for (const auto& id : cfg.restored_unfinished) st.jobs->reserve(id);
  st.executor = std::move(executor);
  st.pipelined = cfg.pipelined;
  st.control = control;
  st.trace = cfg.trace;
  st.waiting_gauge = cfg.waiting_gauge;
  return {
      [self](s_submit_atom, submission& sub) -> submit_answer {
        auto& st = self->state;
        st.jobs->forget_expired(now_s());
        if (sub.ended) {
          st.jobs->end_resumed(sub.job_id, *sub.ended, now_s());
          return submit_answer{refusal{error_code::duplicate, "ended before the restart"}};
        }
        auto outcome = st.jobs->submit(sub.job_id, std::move(sub.req), sub.refused, now_s(), sub.resume);
        if (auto* id = std::get_if<seq_id>(&outcome)) {
          st.handles[*id] = caf::actor_cast<request_actor>(self->current_sender());
          kick(self);
          deliver(self);  // a deadline already past ends the job at once
        }
        return {std::move(outcome)};
      },
      [self](s_cancel_atom, const std::string& job_id) -> job_status {
        self->state.jobs->cancel(job_id, now_s());
        deliver(self);
        return {self->state.jobs->status(job_id)};
      },
      [self](s_stop_atom, seq_id id) {
        self->state.jobs->finish_stop(id, now_s());
        deliver(self);
      },
      [self](s_status_atom, const std::string& job_id) -> job_status {
        self->state.jobs->forget_expired(now_s());
        return {self->state.jobs->status(job_id)};
      },
      [self](s_stats_atom) -> serving_stats { return self->state.jobs->stats(now_s()); },
      [self](s_tick_atom) {
        self->state.tick_armed = false;
        iterate(self);
      },
      [self](s_journal_atom, publisher_actor pub) { self->state.journal = std::move(pub); },
      [self](s_drain_atom, double timeout_s) -> caf::result<bool> {
        auto& st = self->state;
        st.jobs->begin_drain();
        auto rp = self->make_response_promise<bool>();
        st.drain_waiters.push_back(rp);
        self->delayed_send(self, std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)), s_drained_atom::value);
        maybe_finish_drain(self);
        return rp;
      },
      [self](s_drained_atom) {
        self->state.jobs->cancel_all(now_s());
        deliver(self);
      },
  };
}

} // namespace

scheduler_actor spawn_scheduler(caf::actor_system& sys, const scheduler_actor_config& cfg, executor_actor executor,
                                runtime_control& control, bool detached) {
  if (!detached) return sys.spawn(scheduler_impl, cfg, std::move(executor), &control);
  return sys.spawn<caf::detached>(scheduler_impl, cfg, std::move(executor), &control);
}

} // namespace conveyor::actors
