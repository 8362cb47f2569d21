#include "transport/job_watch.hpp"

#include <algorithm>

namespace conveyor::transport {

void job_watch::notify() {
  std::shared_ptr<std::function<void()>> l;
  {
    std::lock_guard lk(mu_);
    l = listener_;
  }
  if (l && *l) (*l)();
}

void job_watch::add(schemas::job_event ev) {
  {
    std::lock_guard lk(mu_);
    const uint64_t seq = schemas::seq_of(ev);
    if (seq < next_ || held_.contains(seq)) return;
    held_.emplace(seq, std::move(ev));
  }
  notify();
}

void job_watch::set_reply(schemas::reply r) {
  {
    std::lock_guard lk(mu_);
    reply_ = std::move(r);
  }
  notify();
}

void job_watch::close() {
  {
    std::lock_guard lk(mu_);
    closed_ = true;
  }
  notify();
}

void job_watch::set_listener(std::function<void()> listener) {
  bool ready = false;
  {
    std::lock_guard lk(mu_);
    listener_ = std::make_shared<std::function<void()>>(std::move(listener));
    ready = reply_.has_value() || closed_ || !held_.empty();
  }
  if (ready) notify();
}

std::optional<schemas::reply> job_watch::take_reply() {
  std::lock_guard lk(mu_);
  std::optional<schemas::reply> out = std::move(reply_);
  reply_.reset();
  return out;
}

std::optional<schemas::job_event> job_watch::try_next() {
  std::lock_guard lk(mu_);
  if (held_.empty() || held_.begin()->first != next_) return std::nullopt;
  auto node = held_.extract(held_.begin());
  ++next_;
  return std::move(node.mapped());
}

bool job_watch::closed() const {
  std::lock_guard lk(mu_);
  return closed_;
}

uint64_t job_watch::next_seq() const {
  std::lock_guard lk(mu_);
  return next_;
}

std::pair<std::shared_ptr<job_watch>, uint64_t> watch_registry::watch(const std::string& job_id) {
  auto w = std::make_shared<job_watch>();
  std::lock_guard lk(mu_);
  const uint64_t tag = next_tag_++;
  if (closed_) w->close();
  by_id_[job_id].emplace_back(tag, w);
  by_tag_.emplace(tag, w);
  return {w, tag};
}

void watch_registry::unwatch(const std::string& job_id, uint64_t tag) {
  std::lock_guard lk(mu_);
  by_tag_.erase(tag);
  auto it = by_id_.find(job_id);
  if (it == by_id_.end()) return;
  std::erase_if(it->second, [tag](const auto& p) { return p.first == tag; });
  if (it->second.empty()) by_id_.erase(it);
}

void watch_registry::reply(uint64_t tag, schemas::reply r) {
  std::shared_ptr<job_watch> w;
  {
    std::lock_guard lk(mu_);
    auto it = by_tag_.find(tag);
    if (it == by_tag_.end()) return;
    w = it->second;
  }
  w->set_reply(std::move(r));
}

void watch_registry::event(const schemas::job_event& ev) {
  std::vector<std::shared_ptr<job_watch>> ws;
  {
    std::lock_guard lk(mu_);
    auto it = by_id_.find(schemas::job_id_of(ev));
    if (it == by_id_.end()) return;
    for (const auto& p : it->second) ws.push_back(p.second);
  }
  for (const auto& w : ws) w->add(ev);  // copied only for a job someone watches
}

void watch_registry::close_all() {
  std::lock_guard lk(mu_);
  closed_ = true;
  for (auto& [tag, w] : by_tag_) w->close();
}

} // namespace conveyor::transport
