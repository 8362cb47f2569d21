// Where a job goes on from its stored events: the one reading of a job's history that journal
// recovery (a restart) and NATS failover (another replica's events) share.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "schemas/events.hpp"

namespace conveyor::schemas {

/// Where a job that began in an earlier incarnation or on another replica goes on: the token ids
/// its tokens events carried and the seq of its next event. It gets no `accepted` and no reply.
struct resume_point {
  std::vector<token_id> published;  ///< every token id of its tokens events, in order
  uint64_t next_seq = 0;            ///< events it published before
  double arrival_unix = 0.0;        ///< when the first incarnation (or replica) received it
  bool cancelled = false;           ///< its cancel was acknowledged: it ends as cancelled
};

/// What a job's stored events say.
struct replayed {
  /// The gapless run from seq 0: its tokens and next seq (arrival and cancel are the caller's).
  resume_point at;
  /// The terminal event within that run: the job ended, and nothing is to be resumed.
  std::optional<job_event> end;
  /// Events past a gap in the seqs (not counted in `at`).
  size_t after_gap = 0;
};

/// Reads `events` (in any order; duplicates of one seq count once).
replayed replay(std::vector<job_event> events);

} // namespace conveyor::schemas
