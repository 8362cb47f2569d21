// Where job events go once the publisher sends them (after the journal stored them, when it is
// on): the PUB socket, the NATS events stream, the HTTP intake's watches. The publisher holds a
// list of sinks and calls each, in order, on its own thread, for every event it sends; a sink
// that owns another thread hands the event over without blocking (NATS queues it).
#pragma once

#include "schemas/events.hpp"

namespace conveyor::transport {

class event_sink {
public:
  virtual ~event_sink() = default;
  /// A job event, in seq order per job; `ev.wire` is its encoding, `ev.event` the typed event.
  virtual void on_event(const schemas::published_event& ev) = 0;
  /// A PUSHed job's refusal: never logged, the job never existed (only the job's topic hears it).
  virtual void on_refusal(const schemas::published_event&) {}
  /// The server's heartbeat (encoded), once a heartbeat period.
  virtual void on_heartbeat(const schemas::wire_bytes&) {}
};

} // namespace conveyor::transport
