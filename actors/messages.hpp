// The values actors exchange besides the engine's step_plan / step_result / token_batch /
// job_end. Plain structs; every one crosses threads by value (local only: conveyor's actors
// never go remote). Error codes, job states and wire bytes keep their types end to end.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "engine/job_table.hpp"
#include "engine/step.hpp"
#include "schemas/events.hpp"
#include "schemas/replay.hpp"
#include "schemas/requests.hpp"
#include "transport/intake.hpp"

namespace conveyor::actors {

/// Seconds on the runtime's steady clock (the engine's `now_s`).
double now_s();
/// Wall-clock seconds since the Unix epoch (what the journal stores: it outlives the process).
double unix_now();

/// intake -> front actor: one decoded request (or the decode error refusing it), where its
/// answer goes, and when the intake received it.
struct inbound {
  transport::reply_to to;
  schemas::decode_result request;
  double arrival_s = 0.0;
  std::optional<schemas::resume_point> resume;  ///< a job continued from a stored history (restart, NATS failover)
};

/// request actor / front actor -> scheduler: a job to admit. `refused` carries what was found
/// wrong before the job table saw it (a prompt that does not tokenize, a PUSHed frame that does
/// not decode); the table still answers `duplicate` first for a known id.
struct submission {
  std::string job_id;
  request req;  // req.id is assigned by the job table
  std::optional<refusal> refused;
  bool resume = false;  // a journaled job continuing after a restart (its id is reserved)
  std::optional<job_info> ended;  // resume: its output was complete before the crash; record this end
};

/// scheduler -> request actor: the job's seq id, or why it was refused.
struct submit_answer {
  std::variant<seq_id, refusal> outcome;
};

/// publisher -> front actor: a slice of one job's event log.
struct fetch_result {
  bool found = false;
  std::vector<schemas::wire_bytes> events;  // encoded event maps, seq from_seq, from_seq+1, ...
  bool complete = false;                    // the terminal event is among those returned
  uint64_t next_seq = 0;                    // events logged so far (the seq the next one gets)
};

/// scheduler -> front actor: where a job is; empty when the id is unknown or forgotten.
struct job_status {
  std::optional<job_info> info;
};

} // namespace conveyor::actors
