// The request actor: one per job. Turns the job's input into prompt tokens (chat template for
// `messages`), submits it to the scheduler, turns its tokens into text deltas that never split
// a UTF-8 character nor show a stop string, and publishes the job's numbered events.
#pragma once

#include <vector>

#include "actors/interfaces.hpp"
#include "actors/metrics.hpp"
#include "model/tokenizer.hpp"
#include "schemas/requests.hpp"

namespace conveyor::actors {

struct request_context {
  const model::tokenizer* tok = nullptr;  // shared, read-only
  scheduler_actor sched;
  publisher_actor pub;
  int32_t max_model_len = 0;
  metrics* registry = nullptr;  // shared, thread-safe; null: nothing is counted
};

/// Spawns the actor for one decoded job that arrived at `arrival_s` (now_s() clock).
/// from_pull: the job came over PULL, so a rejection is published as its only event.
request_actor spawn_request(caf::actor_system& sys, schemas::submit_request job, double arrival_s, bool from_pull,
                            const request_context& ctx);

} // namespace conveyor::actors
