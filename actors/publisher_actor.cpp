#include "actors/publisher_actor.hpp"

#include <chrono>
#include <cstdio>
#include <deque>
#include <unordered_map>
#include <unordered_set>

#include "schemas/events.hpp"
#include "schemas/protocol.hpp"

namespace conveyor::actors {
namespace {

struct job_log {
  std::vector<schemas::wire_bytes> events;
  bool complete = false;
  double completed_at = 0.0;  // now_s() of its terminal event
};

struct publisher_state {
  static inline const char* name = "publisher";
  publisher_state() = default;  // (not an aggregate: CAF would build it from its actor pointer)
  scheduler_actor sched;
  publisher_config cfg;
  runtime_control* control = nullptr;
  std::unordered_map<std::string, job_log> logs;
  std::deque<std::pair<double, std::string>> completed;  // (completion time, job id), oldest first
  uint64_t heartbeat_seq = 0, ticks = 0;
  // The journal's write-ahead buffer: what the next flush commits, then sends and answers.
  journal::write_batch batch;
  std::vector<schemas::published_event> pending;  // batch.events' typed events (their bytes lent to the batch)
  std::unordered_map<std::string, uint64_t> buffered;  // events per job in the buffer
  // Jobs the scheduler runs before their `accepted` reached this actor (the scheduler admits a
  // job at once; its request actor asks for the commit after): marked with their request.
  std::unordered_set<std::string> running_unstored, cancelled_unstored;
  // Requests answered by the next flush, each with its job (empty: several jobs, p_running).
  std::vector<std::pair<std::string, caf::response_promise>> waiting;
  // Jobs whose writes the journal refused (journal::commit): stopped, their later events dropped.
  std::unordered_set<std::string> refused;
  bool flush_armed = false, broken = false;
};

using self_ptr = publisher_actor::stateful_pointer<publisher_state>;

void prune(publisher_state& st, double now) {
  while (!st.completed.empty() &&
         (st.completed.front().first + st.cfg.retention_s < now || st.completed.size() > st.cfg.max_retained_jobs)) {
    auto it = st.logs.find(st.completed.front().second);  // (a newer job of the same id keeps its log)
    if (it != st.logs.end() && it->second.complete && it->second.completed_at == st.completed.front().first) st.logs.erase(it);
    st.completed.pop_front();
  }
  if (st.cfg.journal && !st.broken && st.ticks % 5 == 0) {
    try {
      st.cfg.journal->prune(unix_now() - st.cfg.retention_s, st.cfg.max_retained_jobs);
    } catch (const journal::journal_error& e) {
      std::fprintf(stderr, "conveyor: %s (pruning; retried later)\n", e.what());
    }
  }
}

// Hands one event to every sink and keeps its bytes for fetch.
void send_logged(publisher_state& st, schemas::published_event ev) {
  for (const auto& sink : st.cfg.sinks) sink->on_event(ev);
  const std::string& job_id = ev.job_id();
  job_log& log = st.logs[job_id];
  log.events.push_back(std::move(ev.wire));
  if (ev.terminal() && !log.complete) {
    log.complete = true;
    log.completed_at = now_s();
    st.completed.emplace_back(log.completed_at, job_id);
  }
}

void arm_flush(self_ptr self) {
  if (self->state.flush_armed) return;
  self->state.flush_armed = true;
  self->send(self, p_flush_atom::value);
}

// A job whose writes the journal refused (a constraint broken: an event seq stored twice, a bug
// upstream): it stops (the scheduler cancels it), its producer gets an error event in place of
// the events the journal lacks, and its later events are dropped. The other jobs go on.
void refuse_job(self_ptr self, const journal::refused_job& r) {
  auto& st = self->state;
  std::fprintf(stderr, "conveyor: journal %s: could not store job '%s' (%s); the job is stopped, the server goes on\n",
               st.cfg.journal->path().c_str(), r.job_id.c_str(), r.why.c_str());
  st.refused.insert(r.job_id);
  caf::anon_send(st.sched, s_cancel_atom::value, r.job_id);
  schemas::error_event ev{r.job_id, st.logs[r.job_id].events.size(), error_code::internal,
                          "the job journal could not store this job's events (" + r.why + "); the job was stopped"};
  send_logged(st, schemas::published_event(std::move(ev)));
}

// Commits the buffer, then sends its events and answers the requests waiting on it.
void flush(self_ptr self) {
  auto& st = self->state;
  st.flush_armed = false;
  if (st.broken) return;
  st.batch.now_unix = unix_now();
  std::vector<journal::refused_job> refused;
  try {
    refused = st.cfg.journal->commit(st.batch);
  } catch (const journal::journal_error& e) {
    // Nothing of this batch goes out: a producer never holds an `accepted` or an event the
    // journal lacks. The server stops (the disk failed: no job can be made durable); after a
    // restart the journal's jobs resume.
    st.broken = true;
    st.batch.clear();
    st.pending.clear();
    st.buffered.clear();
    for (auto& [id, rp] : st.waiting) rp.deliver(caf::make_error(caf::sec::request_receiver_down));
    st.waiting.clear();
    std::fprintf(stderr, "conveyor: %s; stopping (jobs resume from the journal after a restart)\n", e.what());
    if (st.control) st.control->request_stop(1, std::string("journal write failed: ") + e.what());
    return;
  }
  for (const auto& r : refused) refuse_job(self, r);
  std::vector<std::string> ended_refused;  // refused jobs whose end was in this batch: nothing more comes
  for (size_t i = 0; i < st.batch.events.size(); ++i) {
    auto& stored = st.batch.events[i];
    if (st.refused.count(stored.job_id)) {
      if (stored.terminal) ended_refused.push_back(stored.job_id);
      continue;
    }
    schemas::published_event& ev = st.pending[i];
    ev.wire = std::move(stored.body);  // (lent to the batch for the commit)
    send_logged(st, std::move(ev));
  }
  st.batch.clear();
  st.pending.clear();
  st.buffered.clear();
  for (auto& [id, rp] : st.waiting) {
    if (!id.empty() && st.refused.count(id)) rp.deliver(caf::make_error(caf::sec::request_receiver_down));
    else rp.deliver(caf::unit);
  }
  st.waiting.clear();
  for (const auto& id : ended_refused) st.refused.erase(id);
}

// An event of a job's log: through the journal's buffer when it is on, else straight out.
void on_event(self_ptr self, schemas::published_event& ev) {
  auto& st = self->state;
  if (!st.cfg.journal) return send_logged(st, std::move(ev));
  if (st.broken) return;
  const std::string& job_id = ev.job_id();
  if (auto it = st.refused.find(job_id); it != st.refused.end()) {  // stopped: its error event is out
    if (ev.terminal()) st.refused.erase(it);
    return;  // (a request's promise is answered by returning)
  }
  const uint64_t seq = st.logs[job_id].events.size() + st.buffered[job_id]++;
  st.batch.events.push_back({job_id, seq, std::move(ev.wire), ev.terminal()});
  st.pending.push_back(std::move(ev));
  if (self->current_mailbox_element()->mid.is_request()) st.waiting.emplace_back(job_id, self->make_response_promise());
  arm_flush(self);
}

void heartbeat(self_ptr self) {
  self->request(self->state.sched, std::chrono::seconds(1), s_stats_atom::value)
      .then([self](const serving_stats& s) {
        auto& st = self->state;
        schemas::heartbeat_event hb;
        hb.seq = st.heartbeat_seq++;
        hb.ts = unix_now();
        hb.status = s.draining ? schemas::server_status::draining : schemas::server_status::serving;
        hb.running = s.running;
        hb.waiting = s.queued;
        hb.kv_usage = s.kv_usage;
        hb.tokens_per_s = s.tokens_per_s;
        const schemas::wire_bytes bytes = schemas::encode(hb);
        for (const auto& sink : st.cfg.sinks) sink->on_heartbeat(bytes);
      },
      [](const caf::error&) {});  // the scheduler is busy or gone: skip this beat
}

fetch_result fetch(publisher_state& st, const std::string& job_id, int64_t from, int64_t max_events) {
  fetch_result r;
  from = std::max<int64_t>(from, 0);
  max_events = std::max<int64_t>(max_events, 0);
  auto it = st.logs.find(job_id);
  if (it == st.logs.end()) {
    if (!st.cfg.journal || job_id.empty()) return r;
    // A job finished before this incarnation (or pruned from memory): the journal has it.
    std::optional<journal::stored_slice> s;
    try {
      s = st.cfg.journal->read(job_id, static_cast<uint64_t>(from), static_cast<uint64_t>(max_events));
    } catch (const journal::journal_error& e) {
      std::fprintf(stderr, "conveyor: %s (fetch of '%s')\n", e.what(), job_id.c_str());
    }
    if (!s) return r;
    r.found = true;
    r.next_seq = s->next_seq;
    r.events = std::move(s->events);
    r.complete = s->ended && static_cast<uint64_t>(from) + r.events.size() >= s->next_seq;
    return r;
  }
  const auto& ev = it->second.events;
  r.found = true;
  r.next_seq = ev.size();
  const int64_t n = static_cast<int64_t>(ev.size());
  const int64_t begin = std::min(from, n), end = std::min(n, begin + max_events);
  r.events.assign(ev.begin() + begin, ev.begin() + end);
  r.complete = it->second.complete && end == n;
  return r;
}

publisher_actor::behavior_type publisher_impl(self_ptr self, scheduler_actor sched, publisher_config cfg, runtime_control* control) {
  auto& st = self->state;
  st.sched = std::move(sched);
  for (auto& [id, events] : cfg.resumed_logs) st.logs[id].events = std::move(events);
  cfg.resumed_logs.clear();
  st.cfg = std::move(cfg);
  st.control = control;
  self->send(self, p_tick_atom::value);
  return {
      [self](p_accept_atom, schemas::wire_bytes& request, double arrival_unix, schemas::published_event& accepted) -> caf::result<void> {
        auto& st = self->state;
        if (!st.cfg.journal) {
          send_logged(st, std::move(accepted));
          return caf::unit;
        }
        const std::string job_id = accepted.job_id();
        if (st.broken) return caf::sec::request_receiver_down;
        // The job table took this id as new: an older job of the same id (forgotten by the table,
        // its log not yet pruned here) leaves nothing behind; the new job's seq starts at 0.
        if (auto old = st.logs.find(job_id); old != st.logs.end() && old->second.complete) st.logs.erase(old);
        st.refused.erase(job_id);
        st.batch.jobs.push_back({job_id, std::move(request), arrival_unix});
        if (st.running_unstored.erase(job_id)) st.batch.running.push_back(job_id);
        if (st.cancelled_unstored.erase(job_id)) st.batch.cancelled.push_back(job_id);
        on_event(self, accepted);  // takes the response promise
        return caf::delegated<void>{};
      },
      [self](p_running_atom, std::vector<std::string>& job_ids) -> caf::result<void> {
        auto& st = self->state;
        if (!st.cfg.journal) return caf::unit;
        if (st.broken) return caf::sec::request_receiver_down;
        for (auto& id : job_ids) {
          if (st.logs.count(id) || st.buffered.count(id)) st.batch.running.push_back(std::move(id));
          else st.running_unstored.insert(std::move(id));
        }
        st.waiting.emplace_back(std::string(), self->make_response_promise());
        arm_flush(self);
        return caf::delegated<void>{};
      },
      [self](p_cancel_atom, std::string& job_id) -> caf::result<void> {
        auto& st = self->state;
        if (!st.cfg.journal) return caf::unit;
        if (st.broken) return caf::sec::request_receiver_down;
        if (st.logs.count(job_id) || st.buffered.count(job_id)) st.batch.cancelled.push_back(std::move(job_id));
        else st.cancelled_unstored.insert(job_id);  // stored with its request
        st.waiting.emplace_back(std::string(), self->make_response_promise());
        arm_flush(self);
        return caf::delegated<void>{};
      },
      [self](p_flush_atom) { flush(self); },
      [self](p_event_atom, schemas::published_event& ev) { on_event(self, ev); },
      [self](p_refusal_atom, const schemas::published_event& ev) {
        for (const auto& sink : self->state.cfg.sinks) sink->on_refusal(ev);
      },
      [self](p_fetch_atom, const std::string& job_id, int64_t from, int64_t max_events) -> fetch_result {
        return fetch(self->state, job_id, from, max_events);
      },
      [self](p_tick_atom) {
        ++self->state.ticks;
        prune(self->state, now_s());
        heartbeat(self);
        self->delayed_send(self, std::chrono::milliseconds(self->state.cfg.heartbeat_ms), p_tick_atom::value);
      },
  };
}

} // namespace

publisher_actor spawn_publisher(caf::actor_system& sys, scheduler_actor sched, publisher_config cfg, runtime_control* control,
                                bool detached) {
  if (!detached) return sys.spawn(publisher_impl, std::move(sched), std::move(cfg), control);
  return sys.spawn<caf::detached>(publisher_impl, std::move(sched), std::move(cfg), control);
}

} // namespace conveyor::actors
