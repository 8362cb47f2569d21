// The publisher actor: detached (its own thread), the only caller of the event sinks (the PUB
// socket, the NATS events stream, the HTTP watches: transport/event_sink.hpp) and the only user
// of the job journal. It numbers nothing itself (request actors number and encode each event)
// but keeps every job's encoded events so `fetch` can replay them, until `retention_s` after the
// job's terminal event.
//
// With the journal on, nothing leaves before it is stored (write-ahead): events, accepted jobs
// and running marks are buffered; a p_flush the actor sends itself, queued behind whatever is in
// its mailbox, commits the buffer in one transaction, then sends the events and answers the
// requests waiting on them (the `accepted` reply, the tokens acknowledgements that drive flow
// control, the scheduler's running marks). A step's events thus share one commit. A commit that
// fails stops the server (exit 1) with nothing of that batch sent: `accepted` never outruns the
// disk. With the journal off, everything goes out at once.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "actors/interfaces.hpp"
#include "actors/runtime_control.hpp"
#include "journal/journal.hpp"
#include "transport/event_sink.hpp"

namespace conveyor::actors {

struct publisher_config {
  /// Seconds a finished job's events stay fetchable (and in the journal).
  double retention_s = 300.0;
  /// Most finished jobs kept (oldest dropped first), bounding memory and the journal.
  size_t max_retained_jobs = 100000;
  /// Heartbeat period on "sys/".
  int heartbeat_ms = 1000;
  /// The journal (null: off). Its thread is the publisher's from spawn on.
  std::shared_ptr<journal::journal> journal;
  /// Events already published by jobs resumed after a restart (their logs continue from them).
  std::vector<std::pair<std::string, std::vector<schemas::wire_bytes>>> resumed_logs;
  /// Where every event goes, in this order, on the publisher's thread (the PUB socket, bound by
  /// the caller so its endpoint is known before start-up, is touched by no other thread).
  std::vector<std::shared_ptr<transport::event_sink>> sinks;
};

/// Spawns the publisher. It asks `sched` for the numbers of each heartbeat. A failed journal
/// commit calls control->request_stop(1, ...). `detached` false runs it on CAF's scheduler (the
/// actor tests' deterministic one).
publisher_actor spawn_publisher(caf::actor_system& sys, scheduler_actor sched, publisher_config cfg, runtime_control* control,
                                bool detached = true);

} // namespace conveyor::actors
