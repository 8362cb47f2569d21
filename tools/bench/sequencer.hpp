// Pure. One job's events in seq order (protocol §3.2): an event beyond the next expected seq
// waits in a buffer (a hole: the caller fetches from next_seq()), duplicates (live or fetched)
// are dropped, and nothing is delivered after the terminal event (done or error).
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "tools/bench/wire.hpp"

namespace conveyor::bench {

class sequencer {
public:
  /// A live event. Calls deliver(const event_view&) for every event now in order, this one
  /// and held ones after it. Returns true when the event had to wait behind a hole.
  template <class F> bool on_live(event_view&& e, F&& deliver) {
    if (ended_ || e.seq < next_) return false;
    if (e.seq > next_) {
      held_.emplace(e.seq, std::move(e));
      return true;
    }
    take(e, deliver);
    drain(deliver);
    return false;
  }

  /// Events returned by `fetch` (in order, without gaps). Delivers the new ones and then what
  /// was held behind them; returns how many events were delivered.
  template <class F> int on_fetched(const std::vector<event_view>& events, F&& deliver) {
    int n = 0;
    for (const event_view& e : events)
      if (!ended_ && e.seq == next_) {
        take(e, deliver);
        ++n;
      }
    return n + drain(deliver);
  }

  /// The seq the next delivered event must have (= events delivered so far).
  int64_t next_seq() const { return next_; }
  /// Events are waiting behind a hole.
  bool has_hole() const { return !held_.empty(); }
  /// The terminal event was delivered.
  bool ended() const { return ended_; }

private:
  template <class F> void take(const event_view& e, F& deliver) {
    ++next_;
    ended_ = e.kind == event_kind::done || e.kind == event_kind::error;
    if (ended_) held_.clear();
    deliver(e);
  }

  template <class F> int drain(F& deliver) {
    int n = 0;
    while (!ended_ && !held_.empty() && held_.begin()->first <= next_) {
      auto node = held_.extract(held_.begin());
      if (node.key() == next_) {
        take(node.mapped(), deliver);
        ++n;
      }
    }
    return n;
  }

  int64_t next_ = 0;
  bool ended_ = false;
  std::map<int64_t, event_view> held_;
};

} // namespace conveyor::bench
