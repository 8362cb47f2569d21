// Jobs an HTTP request waits on. An HTTP exchange registers a watch for its job id before it
// submits, so no event can be missed; the publisher's sinks (any job event, as it is sent) and the
// intake's reply channel (the answer to the submit, a fetch or a status) feed the watch; the
// exchange pops events in seq order, each once, whether they came live or from a fetch. Nobody
// blocks on a watch: its listener is called (from whichever thread fed it) and the exchange then
// takes what is ready on its own connection's strand.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "schemas/protocol.hpp"
#include "schemas/events.hpp"
#include "schemas/replies.hpp"

namespace conveyor::transport {

class job_watch {
public:
  /// Adds one event (live or fetched); one already popped or already held is dropped.
  void add(schemas::job_event ev);
  /// The answer to the request tagged for this watch.
  void set_reply(schemas::reply r);
  /// Wakes the waiter for good: the intake is stopping.
  void close();
  /// Called, outside the watch's lock, after every add, reply and close (any thread); and at
  /// once when something is already there.
  void set_listener(std::function<void()> listener);

  /// The reply, if it has come (taken once).
  std::optional<schemas::reply> take_reply();
  /// The next event in seq order, if it is here.
  std::optional<schemas::job_event> try_next();
  /// The seq the next popped event will have.
  uint64_t next_seq() const;
  /// close() was called.
  bool closed() const;

private:
  void notify();

  mutable std::mutex mu_;
  std::shared_ptr<std::function<void()>> listener_;
  std::optional<schemas::reply> reply_;
  std::map<uint64_t, schemas::job_event> held_;
  uint64_t next_ = 0;
  bool closed_ = false;
};

/// Watches by job id and by reply tag. Thread-safe.
class watch_registry {
public:
  /// A new watch on `job_id` and the tag its requests' replies carry.
  std::pair<std::shared_ptr<job_watch>, uint64_t> watch(const std::string& job_id);
  /// Ends a watch (the handler is done with it).
  void unwatch(const std::string& job_id, uint64_t tag);
  /// A reply for `tag` (a request of a watch that ended is dropped).
  void reply(uint64_t tag, schemas::reply r);
  /// A job event: copied only to the watches of its job.
  void event(const schemas::job_event& ev);
  /// Closes every watch, now and from now on.
  void close_all();

private:
  std::mutex mu_;
  std::unordered_map<std::string, std::vector<std::pair<uint64_t, std::shared_ptr<job_watch>>>> by_id_;
  std::unordered_map<uint64_t, std::shared_ptr<job_watch>> by_tag_;
  uint64_t next_tag_ = 1;
  bool closed_ = false;
};

} // namespace conveyor::transport
