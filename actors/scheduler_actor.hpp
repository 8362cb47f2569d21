// The scheduler actor: engine::scheduler behind a mailbox. Each iteration it plans a step, sends
// it to the executor actor, applies the result and forwards each job's tokens to its request
// actor. It also keeps the job-id registry (live ids, and recently finished ones so that a
// resubmitted id is not run twice).
#pragma once

#include <memory>

#include "actors/interfaces.hpp"
#include "actors/runtime_control.hpp"
#include "engine/config.hpp"

namespace conveyor::actors {

class trace_writer;

struct scheduler_actor_config {
  scheduler_config sched;
  cache_config cache;
  int32_t num_kv_blocks = 0;
  /// Finished job ids remembered for duplicate detection and `status`.
  size_t max_remembered_jobs = 100000;
  /// The iteration trace (`--trace`), or null when off; the actor records every step into it.
  std::shared_ptr<trace_writer> trace;
};

/// Spawns the scheduler actor. On an executor failure it fails every live job and calls
/// control.request_stop(1, ...); `control` must outlive the actor system.
scheduler_actor spawn_scheduler(caf::actor_system& sys, const scheduler_actor_config& cfg, executor_actor executor,
                                runtime_control& control);

} // namespace conveyor::actors
