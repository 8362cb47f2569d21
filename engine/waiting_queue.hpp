// Pure. The waiting queue, ordered by policy: fcfs keeps submit order (a preempted sequence
// goes back to the very front); priority orders by (priority, arrival time, submit order), so a
// preempted sequence returns to the place its own key gives it, ahead of later arrivals of the
// same priority. Cancels and deadlines remove from the middle in O(log n).
#pragma once

#include <cstddef>
#include <set>
#include <utility>

#include "engine/config.hpp"
#include "engine/sequence.hpp"

namespace conveyor {

class waiting_queue {
public:
  explicit waiting_queue(scheduling_policy policy) : policy_(policy) {}

  bool empty() const { return entries_.empty(); }
  size_t size() const { return entries_.size(); }
  sequence* front() const { return entries_.begin()->second; }
  void pop_front() { entries_.erase(entries_.begin()); }

  /// A newly submitted sequence.
  void push_back(sequence* seq) { insert(seq, key_for(seq, ++back_)); }
  /// A preempted sequence.
  void push_front(sequence* seq) { insert(seq, key_for(seq, --front_)); }
  void erase(const sequence* seq) { entries_.erase({seq->key, const_cast<sequence*>(seq)}); }

  auto begin() const { return entries_.begin(); }
  auto end() const { return entries_.end(); }

private:
  queue_key key_for(const sequence* seq, int64_t position) const {
    if (policy_ == scheduling_policy::fcfs) return {0, 0.0, position};
    return {seq->req.priority, seq->req.arrival_time_s, static_cast<int64_t>(seq->serial)};
  }
  void insert(sequence* seq, queue_key key) {
    seq->key = key;
    entries_.emplace(key, seq);
  }

  scheduling_policy policy_;
  int64_t back_ = 0;
  int64_t front_ = 0;
  std::set<std::pair<queue_key, sequence*>> entries_;
};

} // namespace conveyor
