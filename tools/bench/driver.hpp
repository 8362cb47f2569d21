// The load generator's socket side. One thread (the caller's) owns a DEALER (submit, fetch and
// their replies) and a SUB (job events) and polls both. Before submitting anything it
// subscribes to "job/<run-prefix>/" (job ids are "<run-prefix>/<index>") and waits for a "sys/"
// heartbeat, so the subscription is live (slow-joiner rule). Each event is delivered to its
// request's timeline in seq order; a hole is a gap: the later events wait, `fetch` fills it,
// and the waiting events count as delivered when the hole is filled (what a streaming client
// sees). A job with no event for `stall_s` is fetched too (the lost event may be the last);
// that counts as a gap only when the fetch returns something new.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "tools/bench/metrics.hpp"
#include "tools/bench/wire.hpp"
#include "tools/bench/workload.hpp"

namespace conveyor::bench {

struct driver_options {
  std::string router_ep = "tcp://127.0.0.1:5555";
  std::string pub_ep = "tcp://127.0.0.1:5556";
  /// Most requests in flight (sent, not yet ended); 0 = no cap.
  int32_t max_concurrency = 0;
  /// Resend a submit refused with `overloaded` (backoff 50 ms doubling to 1 s) instead of
  /// counting it as rejected. Its send time stays the first attempt's.
  bool retry_overloaded = false;
  submit_settings submit;
  /// "" draws a random one.
  std::string run_prefix;
  /// Wait this long for the health reply and the first heartbeat.
  double connect_timeout_s = 10.0;
  /// Fetch a live job that had no event for this long (doubling, up to 8 s, while nothing new
  /// comes): a lost terminal event is otherwise never noticed. Seconds.
  double stall_s = 0.25;
  /// Give up on unfinished jobs after this many seconds of run time; 0 = never.
  double timeout_s = 0.0;
};

struct progress {
  int32_t ended = 0, sent = 0, total = 0;
  int64_t output_tokens = 0;
  double elapsed_s = 0.0;
};

struct driver_result {
  std::string run_prefix;
  std::string model;
  /// One per request, times in seconds since the first send could start.
  std::vector<request_timeline> timelines;
  int32_t rejected = 0;  // refused with `overloaded` (not retried)
  int32_t failed = 0;    // any other refusal, or an error event
  int32_t unfinished = 0;  // not ended when the timeout struck
  int32_t num_gaps = 0;
  int32_t num_fetches = 0;
  int32_t num_retries = 0;
  /// Tokens counted from tokens events (live and fetched), to check against usage.
  int64_t streamed_output_tokens = 0;
  std::map<std::string, int32_t> error_codes;
  std::map<std::string, int32_t> finish_reasons;
};

/// Thrown when the server cannot be reached (no health reply or no heartbeat in time).
struct connect_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Runs `requests` (arrival_s set) against the server; calls `on_progress` about 10 times a
/// second and once at the end.
driver_result run_driver(const driver_options& o, const std::vector<bench_request>& requests,
                         const std::function<void(const progress&)>& on_progress = {});

} // namespace conveyor::bench
