// The scheduler actor: engine::job_table behind a mailbox. Each iteration it asks the table for
// a step's plan, sends it to the executor actor, hands the result back to the table and
// delivers the table's outputs (token batches, job ends) to the jobs' request actors. Every
// rule (admission, ids, states, flow control) is the table's; this file only moves values.
#pragma once

#include <atomic>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "actors/interfaces.hpp"
#include "actors/runtime_control.hpp"
#include "engine/config.hpp"

namespace conveyor::actors {

class trace_writer;

/// A finished job the journal remembers: how it ended, and when (Unix seconds).
struct restored_job {
  std::string job_id;
  job_info info;
  double ended_unix = 0.0;
};

struct scheduler_actor_config {
  scheduler_config sched;
  cache_config cache;
  int32_t num_kv_blocks = 0;
  /// Pipelined steps: step N+1 is planned and submitted while step N runs (x_submit/x_collect);
  /// otherwise one x_step at a time. The runtime sets it when sched.async_scheduling is on and
  /// the executor's submit() does not wait (executor_info::async_steps).
  bool pipelined = false;
  /// Finished job ids remembered for duplicate detection and `status`.
  size_t max_remembered_jobs = 100000;
  /// ... and for this long after they ended (the publisher's retention of their events).
  double retention_s = 300.0;
  /// The iteration trace (`--trace`), or null when off; the actor records every step into it.
  std::shared_ptr<trace_writer> trace;
  /// From the journal at start: finished jobs to remember (duplicate, status), and unfinished
  /// ones whose ids stay reserved for their resume submits.
  std::vector<restored_job> restored_finished;
  std::vector<std::string> restored_unfinished;
  /// Set after every step to the jobs waiting for admission (KV, token budget); may be null.
  /// The NATS intake takes no jobs while some wait.
  std::atomic<int32_t>* waiting_gauge = nullptr;
};

/// Spawns the scheduler actor. On an executor failure it fails every live job and calls
/// control.request_stop(1, ...); `control` must outlive the actor system.
/// Detached (its own thread) by default: the loop, `status` and `stats` must never wait behind
/// work on CAF's worker pool (a burst of 1,000 submits queues 1,000 tokenizations there).
/// `detached` false runs it on CAF's scheduler (the actor tests' deterministic one).
scheduler_actor spawn_scheduler(caf::actor_system& sys, const scheduler_actor_config& cfg, executor_actor executor,
                                runtime_control& control, bool detached = true);

} // namespace conveyor::actors
