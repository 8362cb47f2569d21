// The replies the server sends on its ROUTER socket, one per request, as plain structs and their
// msgpack encoders. Keys are written in the order protocol.md lists them (decoders must not rely
// on order; the test vectors do, to compare bytes).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "engine/job_types.hpp"
#include "engine/request.hpp"
#include "schemas/protocol.hpp"

namespace conveyor::schemas {

/// submit accepted: {"ok":true,"id":S,"topic":"job/<id>/"}.
struct submit_reply {
  std::string id;
};

/// Any refused request: {"ok":false,"id":S?,"error":{"code":S,"message":S,"field":S?}}.
/// `id` is left out when empty (the request had no valid id); `field` when empty.
struct error_reply {
  std::string id;
  error_code code = error_code::internal;
  std::string message;
  std::string field;
};

/// cancel: {"ok":true,"id":S,"state":S}: the job's state after the cancel (cancelling a job
/// that already ended changes nothing and reports its final state).
struct cancel_reply {
  std::string id;
  job_state state = job_state::cancelled;
};

/// status: {"ok":true,"id":S,"state":S,"prompt_tokens":I,"completion_tokens":I,"next_seq":I,
/// "finish_reason":S?}. next_seq is the seq the job's next event will get (= events so far);
/// finish_reason is present once a `done` event was published.
struct status_reply {
  std::string id;
  job_state state = job_state::queued;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  uint64_t next_seq = 0;
  std::optional<finish_reason> reason;
};

/// fetch: {"ok":true,"id":S,"events":[event map...],"complete":B}. `events` are the job's
/// already-encoded event maps from from_seq on, in seq order, spliced in without re-encoding
/// (decode_event() reads one); `complete` is true when the last of them is the job's terminal event.
struct fetch_reply {
  std::string id;
  std::vector<wire_bytes> events;
  bool complete = false;
};

/// stats: {"ok":true, "queued", "running", "kv_usage", "kv_blocks_used", "kv_blocks_total",
/// "prompt_tokens_total", "completion_tokens_total", "cached_tokens_total", "jobs_accepted",
/// "jobs_rejected", "jobs_finished", "jobs_failed", "tokens_per_s", "uptime_s",
/// "preemptions_total", "rejected":{code:I}, "finished":{reason:I},
/// "histograms":{name:{"count":I,"sum":F}}}: the numbers /metrics shows. The engine's
/// serving_stats carry their wire names; the rest is counted at the front door.
struct stats_reply {
  serving_stats serving;
  /// Submits refused (error reply or, over PULL, error event), whatever the reason.
  uint64_t jobs_rejected = 0;
  /// Accepted jobs that ended with an error event.
  uint64_t jobs_failed = 0;
  double uptime_s = 0.0;
  /// Error replies and rejected submits, by error code (conveyor_request_rejected_total).
  std::vector<std::pair<std::string, uint64_t>> rejected;
  /// Done events, by finish reason (conveyor_request_success_total).
  std::vector<std::pair<std::string, uint64_t>> finished;
  /// A latency histogram of /metrics (name without the conveyor_ prefix): observations, their sum.
  struct histogram_totals {
    std::string name;
    uint64_t count = 0;
    double sum = 0.0;
  };
  std::vector<histogram_totals> histograms;
};

/// health: {"ok":true,"status":"serving|draining","protocol":1,"model":S}.
struct health_reply {
  server_status status = server_status::serving;
  std::string model;
};

/// Any reply, typed: what the actors answer and an intake turns into its own wire (ZeroMQ
/// encodes it with encode(); HTTP and NATS read it as it is).
using reply = std::variant<submit_reply, error_reply, cancel_reply, status_reply, fetch_reply, stats_reply, health_reply>;

/// The reply's map (any kind: `encode(status_reply{...})` converts).
wire_bytes encode(const reply& r);

/// The error reply for a decode_error (id and field carried over).
error_reply to_reply(const decode_error& error);

} // namespace conveyor::schemas
