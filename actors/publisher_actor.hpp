// The publisher actor: detached (its own thread), the only user of the PUB socket. It numbers
// nothing itself (request actors encode each event with its seq) but keeps every job's encoded
// events so `fetch` can replay them, until `retention_s` after the job's terminal event.
#pragma once

#include <memory>

#include "actors/interfaces.hpp"
#include "transport/sockets.hpp"

namespace conveyor::actors {

struct publisher_config {
  /// Seconds a finished job's events stay fetchable.
  double retention_s = 300.0;
  /// Most finished jobs kept (oldest dropped first), bounding memory.
  size_t max_retained_jobs = 100000;
  /// Heartbeat period on "sys/".
  int heartbeat_ms = 1000;
};

/// Spawns the publisher; it takes over `pub` (bound by the caller so the endpoint is known
/// before start-up; only the publisher's thread touches it afterwards). It asks `sched` for the
/// numbers of each heartbeat.
/// `detached` false runs it on CAF's scheduler (the actor tests' deterministic one).
publisher_actor spawn_publisher(caf::actor_system& sys, std::shared_ptr<transport::pub_socket> pub,
                                scheduler_actor sched, const publisher_config& cfg, bool detached = true);

} // namespace conveyor::actors
