// The front door: every intake's requests enter the actors here. `front_door` is the
// request_sink intakes call on their own threads (it only enqueues a message); the front actor
// answers each request without blocking anyone: submits go to a new request actor, cancel /
// status / fetch / stats become asynchronous requests to the scheduler and publisher, decode
// errors are answered (and, for PUSHed jobs, checked against the job table first).
#pragma once

#include "actors/request_actor.hpp"

namespace conveyor::actors {

/// Detached (its own thread) by default, for the same reason as the scheduler: answering a
/// `status` must not wait behind a burst of tokenizations on CAF's worker pool. `detached`
/// false runs it on CAF's scheduler (the actor tests' deterministic one).
front_actor spawn_front(caf::actor_system& sys, const front_context& ctx, bool detached = true);

/// The request_sink the intakes deliver to: stamps the arrival time and sends the request to
/// the front actor. Thread-safe; never blocks.
class front_door final : public transport::request_sink {
public:
  explicit front_door(front_actor front) : front_(std::move(front)) {}
  void deliver(transport::reply_to to, schemas::decode_result request,
               std::optional<schemas::resume_point> resume = std::nullopt) override;

private:
  front_actor front_;
};

} // namespace conveyor::actors
