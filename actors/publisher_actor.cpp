#include "actors/publisher_actor.hpp"

#include <chrono>
#include <deque>
#include <unordered_map>

#include "schemas/events.hpp"
#include "schemas/protocol.hpp"

namespace conveyor::actors {
namespace {

struct job_log {
  std::vector<schemas::wire_bytes> events;
  bool complete = false;
};

struct publisher_state {
  static inline const char* name = "publisher";
  std::shared_ptr<transport::pub_socket> pub;
  scheduler_actor sched;
  publisher_config cfg;
  std::unordered_map<std::string, job_log> logs;
  std::deque<std::pair<double, std::string>> completed;  // (completion time, job id), oldest first
  uint64_t heartbeat_seq = 0;
};

using self_ptr = publisher_actor::stateful_pointer<publisher_state>;

std::string_view as_view(const schemas::wire_bytes& b) { return {reinterpret_cast<const char*>(b.data()), b.size()}; }

void prune(publisher_state& st, double now) {
  while (!st.completed.empty() &&
         (st.completed.front().first + st.cfg.retention_s < now || st.completed.size() > st.cfg.max_retained_jobs)) {
    st.logs.erase(st.completed.front().second);
    st.completed.pop_front();
  }
}

void heartbeat(self_ptr self) {
  self->request(self->state.sched, std::chrono::seconds(1), s_stats_atom::value)
      .then([self](const serving_stats& s) {
        auto& st = self->state;
        schemas::heartbeat_event hb;
        hb.seq = st.heartbeat_seq++;
        hb.ts = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
        hb.status = s.draining ? schemas::server_status::draining : schemas::server_status::serving;
        hb.running = s.running;
        hb.waiting = s.queued;
        hb.kv_usage = s.kv_usage;
        hb.tokens_per_s = s.tokens_per_s;
        st.pub->send(schemas::heartbeat_topic, as_view(schemas::encode(hb)));
      },
      [](const caf::error&) {});  // the scheduler is busy or gone: skip this beat
}

publisher_actor::behavior_type publisher_impl(self_ptr self, std::shared_ptr<transport::pub_socket> pub, scheduler_actor sched,
                                              publisher_config cfg) {
  self->state.pub = std::move(pub);
  self->state.sched = std::move(sched);
  self->state.cfg = cfg;
  self->send(self, p_tick_atom::value);
  return {
      [self](p_event_atom, const std::string& job_id, schemas::wire_bytes& event, bool terminal) {
        auto& st = self->state;
        job_log& log = st.logs[job_id];
        st.pub->send(schemas::topic_for(job_id), as_view(event));
        log.events.push_back(std::move(event));
        if (terminal && !log.complete) {
          log.complete = true;
          st.completed.emplace_back(now_s(), job_id);
        }
      },
      [self](p_event_atom, const std::string& job_id, const schemas::wire_bytes& event) {
        self->state.pub->send(schemas::topic_for(job_id), as_view(event));
      },
      [self](p_fetch_atom, const std::string& job_id, int64_t from, int64_t max_events) -> fetch_result {
        fetch_result r;
        auto it = self->state.logs.find(job_id);
        if (it == self->state.logs.end()) return r;
        const auto& ev = it->second.events;
        r.found = true;
        r.next_seq = ev.size();
        const int64_t n = static_cast<int64_t>(ev.size());
        const int64_t begin = std::min(std::max<int64_t>(from, 0), n), end = std::min(n, begin + std::max<int64_t>(max_events, 0));
        r.events.assign(ev.begin() + begin, ev.begin() + end);
        r.complete = it->second.complete && end == n;
        return r;
      },
      [self](p_tick_atom) {
        prune(self->state, now_s());
        heartbeat(self);
        self->delayed_send(self, std::chrono::milliseconds(self->state.cfg.heartbeat_ms), p_tick_atom::value);
      },
  };
}

} // namespace

publisher_actor spawn_publisher(caf::actor_system& sys, std::shared_ptr<transport::pub_socket> pub, scheduler_actor sched,
                                const publisher_config& cfg, bool detached) {
  if (!detached) return sys.spawn(publisher_impl, std::move(pub), std::move(sched), cfg);
  return sys.spawn<caf::detached>(publisher_impl, std::move(pub), std::move(sched), cfg);
}

} // namespace conveyor::actors
