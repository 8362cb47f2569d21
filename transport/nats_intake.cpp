#include "transport/nats_intake.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "schemas/events.hpp"
#include "schemas/stored.hpp"
#include "schemas/replay.hpp"

namespace conveyor::transport {
namespace {

using clock_type = std::chrono::steady_clock;

// A job without a seed samples with one derived from its id, so the replica that continues it
// after a failover draws the same numbers (FNV-1a, 64 bits).
uint64_t seed_of(const std::string& id) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : id) h = (h ^ c) * 1099511628211ull;
  return h;
}

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

} // namespace

nats_intake::nats_intake(const nats_config& cfg, const schemas::decode_limits& limits, int64_t max_in_flight)
    : link_(std::make_shared<nats_link>(cfg)), limits_(limits), max_in_flight_(std::max<int64_t>(1, max_in_flight)) {}

nats_intake::~nats_intake() { stop(); }

void nats_intake::start(const intake_context& ctx) {
  free_slots_ = ctx.free_slots;
  publisher_ = std::thread([this] { event_loop(); });
  fetcher_ = std::thread([this, sink = ctx.sink] { fetch_loop(*sink); });
}

void nats_intake::stop_accepting() {
  stop_fetch_ = true;
  if (fetcher_.joinable()) fetcher_.join();
}

void nats_intake::stop() {
  stop_accepting();
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (publisher_.joinable()) publisher_.join();
}

void nats_intake::reply(uint64_t tag, schemas::reply r) {
  std::optional<schemas::error_reply> refused;
  if (auto* e = std::get_if<schemas::error_reply>(&r)) refused = std::move(*e);
  {
    std::lock_guard lk(mu_);
    replies_.emplace_back(tag, std::move(refused));
  }
  cv_.notify_all();
}

void nats_intake::on_event(const schemas::published_event& ev) {
  const std::string& job_id = ev.job_id();
  const auto* done = std::get_if<schemas::done_event>(&ev.event);
  {
    std::lock_guard lk(mu_);
    if (done && stop_fetch_ && done->reason == finish_reason::cancelled && held_.count(job_id)) {
      to_nak_.push_back(job_id);  // drained away, not cancelled by anyone: another replica goes on
    } else {
      events_.push_back({job_id, ev.seq(), ev.wire, ev.terminal()});
    }
  }
  cv_.notify_all();
}

void nats_intake::fetch_loop(request_sink& sink) {
  bool outage = false;
  while (!stop_fetch_) {
    // Redelivered jobs whose stored events could not be read: again, at most every 500 ms each.
    for (auto& u : unresolved_)
      if (clock_type::now() - u.tried >= std::chrono::milliseconds(500)) {
        u.tried = clock_type::now();
        resolve(u, sink);
      }
    std::erase_if(unresolved_, [](const unresolved_job& u) { return u.done; });
    int64_t credit;
    {
      std::lock_guard lk(mu_);
      credit = max_in_flight_ - static_cast<int64_t>(held_.size());
    }
    if (free_slots_) credit = std::min(credit, free_slots_());
    if (credit <= 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      continue;
    }
    std::string error;
    auto msgs = link_->fetch(static_cast<int>(std::min<int64_t>(credit, 64)), 250, &error);
    if (!error.empty()) {
      if (!outage) std::fprintf(stderr, "conveyor: NATS: cannot fetch jobs (%s); retrying\n", error.c_str());
      outage = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
      continue;
    }
    outage = false;
    for (auto& m : msgs) take(std::move(m), sink);
  }
}

void nats_intake::take(nats_job_msg m, request_sink& sink) {
  schemas::wire_bytes bytes = m.data();
  const uint64_t delivered = m.num_delivered();
  schemas::decode_result decoded = schemas::decode_request(bytes, limits_);
  auto* job = std::get_if<schemas::submit_request>(&decoded);
  if (!job) {
    std::string id, message = "only submit maps go on the jobs subject";
    schemas::error_code code = schemas::error_code::bad_request;
    if (auto* e = std::get_if<schemas::decode_error>(&decoded)) {
      id = e->id;
      code = e->code;
      message = (e->field.empty() ? "" : e->field + ": ") + e->message;
    }
    m.term();
    std::lock_guard lk(mu_);
    queue_dead_letter(id, code, message, delivered, bytes, 0, !id.empty() && !held_.count(id));
    return;
  }
  const std::string id = job->id;
  if (!job->seed) job->seed = seed_of(id);
  {
    std::lock_guard lk(mu_);
    if (auto it = held_.find(id); it != held_.end()) {  // redelivered to us while it runs here
      it->second.msg = std::move(m);
      it->second.delivered = delivered;
      return;
    }
  }
  {
    std::lock_guard lk(mu_);
    held_[id] = held_job{std::move(m), bytes, delivered};  // in-progress acks from now on
  }
  if (delivered == 1) return start_job(std::move(*job), std::nullopt, sink);
  // It may have run elsewhere: its stored events say how far. While they cannot be read (a
  // cluster electing a leader), the job stays held and is tried again: no delivery is spent.
  unresolved_.push_back({std::move(*job), clock_type::now(), false});
  resolve(unresolved_.back(), sink);
  if (unresolved_.back().done) unresolved_.pop_back();
}

// Fetch thread: reads a redelivered job's stored events and acts on them. Sets `u.done` unless
// they could not be read.
void nats_intake::resolve(unresolved_job& u, request_sink& sink) {
  const std::string id = u.job.id;
  std::string error;
  auto evs = link_->read_events(id, 2000, &error);
  if (!evs) {
    if (!u.logged)
      std::fprintf(stderr, "conveyor: NATS: cannot read the stored events of job '%s' yet (%s); it stays here, tried again\n",
                   id.c_str(), error.c_str());
    u.logged = true;
    return;
  }
  u.done = true;
  std::vector<schemas::job_event> stored;
  for (const auto& e : *evs)
    if (auto ev = schemas::decode_event(e)) stored.push_back(std::move(*ev));
  // The events after a gap are sent again (same msg ids): the job goes on from the gap.
  schemas::replayed r = schemas::replay(std::move(stored));
  if (r.end) {  // it ended; only the ack was lost
    std::lock_guard lk(mu_);
    if (auto it = held_.find(id); it != held_.end()) {
      it->second.msg.ack();
      held_.erase(it);
    }
    return;
  }
  std::optional<resume_point> resume;
  if (r.at.next_seq > 0) {
    r.at.arrival_unix = unix_seconds();
    resume = std::move(r.at);
  }
  start_job(std::move(u.job), std::move(resume), sink);
}

// Fetch thread: a held job goes to the front door (or, at its last delivery, to the dead letters).
void nats_intake::start_job(schemas::submit_request job, std::optional<resume_point> resume, request_sink& sink) {
  const std::string id = job.id;
  std::lock_guard lk(mu_);
  auto it = held_.find(id);
  if (it == held_.end()) return;
  const uint64_t delivered = it->second.delivered;
  if (delivered >= static_cast<uint64_t>(link_->config().max_deliver)) {
    queue_dead_letter(id, schemas::error_code::internal,
                      "delivered " + std::to_string(delivered) +
                          " times (--nats-max-deliver): replicas died or stalled while running it; not run again",
                      delivered, it->second.request, resume ? resume->next_seq : 0, true);
    return;
  }
  if (resume) {
    sink.deliver(reply_to{}, schemas::decode_result(std::move(job)), std::move(resume));
    return;
  }
  const uint64_t tag = next_tag_++;
  tags_[tag] = id;
  sink.deliver(reply_to{this, tag}, schemas::decode_result(std::move(job)));
}

// Under mu_: the dead letter keeps the request (the event thread stores it); the error event,
// when `event`, ends the job in the events stream (its storing acks a held job's message, as for
// any job; a stored seq `seq` of another job with that id wins: same msg id).
void nats_intake::queue_dead_letter(const std::string& job_id, schemas::error_code code, const std::string& message,
                                    uint64_t delivered, const schemas::wire_bytes& request, uint64_t seq, bool event) {
  dead_.emplace_back(job_id, schemas::encode_dead_letter(job_id, code, message, delivered, request));
  if (event) {
    schemas::error_event ev;
    ev.id = job_id;
    ev.seq = seq;
    ev.code = code;
    ev.message = message;
    events_.push_back({job_id, seq, schemas::encode(ev), true});
  }
  cv_.notify_all();
}

// Under mu_.
void nats_intake::on_refused(const std::string& job_id, const schemas::error_reply& why) {
  auto it = held_.find(job_id);
  if (it == held_.end()) return;
  if (why.code == error_code::overloaded || why.code == error_code::shutting_down) {  // another replica (or this one, later) runs it
    it->second.msg.nak();
    held_.erase(it);
    return;
  }
  if (why.code == error_code::duplicate) {  // that id ran here within the retention period: its events are stored
    it->second.msg.term();
    held_.erase(it);
    return;
  }
  queue_dead_letter(job_id, why.code, why.message, it->second.delivered, it->second.request, 0, true);
}

void nats_intake::progress_all() {
  std::lock_guard lk(mu_);
  for (auto& [id, h] : held_) h.msg.in_progress();
}

void nats_intake::event_loop() {
  const auto progress_every = std::chrono::duration<double>(link_->config().ack_wait_s / 3.0);
  auto last_progress = clock_type::now();
  clock_type::time_point stop_deadline{};
  for (;;) {
    std::vector<nats_event_out> batch;
    std::vector<std::pair<std::string, schemas::wire_bytes>> dead;
    bool stopping;
    {
      std::unique_lock lk(mu_);
      cv_.wait_for(lk, std::chrono::milliseconds(200), [&] { return stop_ || !events_.empty() || !replies_.empty() || !to_nak_.empty() || !dead_.empty(); });
      for (auto& [tag, refused] : replies_) {
        auto t = tags_.find(tag);
        if (t == tags_.end()) continue;
        if (refused) on_refused(t->second, *refused);
        tags_.erase(t);
      }
      replies_.clear();
      for (const auto& id : to_nak_)
        if (auto it = held_.find(id); it != held_.end()) {
          it->second.msg.nak();
          held_.erase(it);
        }
      to_nak_.clear();
      dead.swap(dead_);
      batch.assign(std::make_move_iterator(events_.begin()), std::make_move_iterator(events_.end()));
      events_.clear();
      stopping = stop_;
    }
    for (const auto& [id, body] : dead)
      if (!link_->dead_letter(id, body)) std::fprintf(stderr, "conveyor: NATS: could not store the dead letter of job '%s'\n", id.c_str());
    if (stopping && stop_deadline == clock_type::time_point{}) stop_deadline = clock_type::now() + std::chrono::seconds(5);
    if (!batch.empty()) {
      const auto confirmed = link_->store(batch, 5000);
      std::vector<bool> ok(batch.size(), false);
      for (size_t i : confirmed) ok[i] = true;
      std::lock_guard lk(mu_);
      std::deque<nats_event_out> again;
      for (size_t i = 0; i < batch.size(); ++i) {
        if (!ok[i]) {
          again.push_back(std::move(batch[i]));
          continue;
        }
        if (!batch[i].terminal) continue;
        if (auto it = held_.find(batch[i].job_id); it != held_.end()) {
          it->second.msg.ack();
          held_.erase(it);
        }
      }
      if (!again.empty()) {
        events_.insert(events_.begin(), std::make_move_iterator(again.begin()), std::make_move_iterator(again.end()));
        if (!stopping) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
    if (clock_type::now() - last_progress >= progress_every) {
      progress_all();
      last_progress = clock_type::now();
    }
    if (stopping) {
      std::lock_guard lk(mu_);
      if (events_.empty() || clock_type::now() > stop_deadline) {
        if (!events_.empty())
          std::fprintf(stderr, "conveyor: NATS: %zu events not stored at shutdown; their jobs are redelivered and go on elsewhere\n",
                       events_.size());
        for (auto& [id, h] : held_) h.msg.nak();
        held_.clear();
        return;
      }
    }
  }
}

} // namespace conveyor::transport
