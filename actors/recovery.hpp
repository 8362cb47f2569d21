// Restart from the journal: what the last incarnation left, sorted into what the runtime does
// with it before serving. Finished jobs are remembered (duplicate, status, fetch from the
// journal); unfinished ones resume (their request actors continue them) unless they were
// running in `poison_after` consecutive crashes (engine::job_table::is_poison), which end with
// an `error` event instead.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "actors/request_actor.hpp"
#include "actors/scheduler_actor.hpp"
#include "journal/journal.hpp"

namespace conveyor::actors {

struct recovery_plan {
  struct resumed_job {
    schemas::submit_request job;
    schemas::resume_point resume;
  };
  struct poisoned_job {
    std::string job_id;
    uint64_t next_seq = 0;
    int32_t crash_runs = 0;
  };
  std::vector<restored_job> finished;
  std::vector<resumed_job> resumed;
  std::vector<poisoned_job> poisoned;
  /// Every unfinished job's events so far (resumed and poisoned): the publisher's logs go on
  /// from them.
  std::vector<std::pair<std::string, std::vector<schemas::wire_bytes>>> logs;
};

/// Sorts `jobs` (journal::load()). Throws journal::journal_error naming `path` when a stored
/// request or event does not decode (the file was damaged past SQLite's own checks).
recovery_plan plan_recovery(std::vector<journal::stored_job> jobs, int32_t poison_after, const std::string& path);

/// The error event that ends a poison job.
schemas::published_event poison_event(const recovery_plan::poisoned_job& p, int32_t poison_after);

} // namespace conveyor::actors
