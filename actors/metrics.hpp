// The runtime's Prometheus metrics: counters and histograms that the request actors and the
// intake thread fill, and the text exposition /metrics serves (and the `stats` op repeats).
// Thread-safe behind one mutex; std only, so the unit tier links it without CAF.
// NOTE: the gauges and the token / preemption counters are not kept here. The job table already
// counts them (serving_stats); the caller passes them in at scrape time, so nothing is counted
// twice.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/job_types.hpp"

namespace conveyor::actors {

/// Bucket upper bounds in seconds, vLLM's (the +Inf bucket is implied).
struct metric_buckets {
  static const std::vector<double> ttft;             ///< time to first token
  static const std::vector<double> per_token;        ///< TPOT and ITL
  static const std::vector<double> request_latency;  ///< E2E and queue time
};

/// One histogram: non-cumulative counts per bucket (the last one counts values above every
/// bound), plus the count and sum of all observations.
struct histogram_data {
  std::vector<double> bounds;
  std::vector<uint64_t> counts;  ///< bounds.size() + 1 entries
  uint64_t count = 0;
  double sum = 0.0;

  explicit histogram_data(std::vector<double> upper_bounds = {});
  /// Adds `n` observations of `v` to the first bucket whose bound is >= v (Prometheus' `le`).
  void observe(double v, uint64_t n = 1);
};

/// One finished request's latencies in seconds, from the timestamps of its done event.
struct request_latencies {
  std::optional<double> ttft_s;  ///< absent when the request produced no token
  double tpot_s = 0.0;           ///< (e2e - ttft) / (output tokens - 1); 0 below 2 tokens
  double e2e_s = 0.0;
  double queue_s = 0.0;
};

/// A histogram with its exposition name (without the conveyor_ prefix) and help text.
struct named_histogram {
  const char* name;
  const char* help;
  const histogram_data* data;
};

/// A consistent copy of every counter and histogram.
struct metrics_snapshot {
  std::map<std::string, uint64_t> rejected;  ///< error replies and rejection events, by code
  std::map<std::string, uint64_t> finished;  ///< done events, by finish reason
  uint64_t failed = 0;                       ///< accepted jobs that ended with an error event
  uint64_t rejected_submits = 0;             ///< submits refused (ROUTER reply or PULL), any code
  histogram_data ttft{metric_buckets::ttft}, tpot{metric_buckets::per_token}, itl{metric_buckets::per_token},
      e2e{metric_buckets::request_latency}, queue{metric_buckets::request_latency};

  /// The five histograms, in exposition order.
  std::vector<named_histogram> histograms() const;
};

class metrics {
public:
  /// Starts with every error code and finish reason at 0, so each series exists from the start.
  metrics();
  /// An error reply (ROUTER) or rejection (PULL) with this wire code.
  void count_rejection(std::string_view code);
  /// A refused submit (ROUTER error reply or PULL rejection) with this wire code: counted in
  /// `rejected` and in `rejected_submits` (stats.jobs_rejected).
  void count_rejected_submit(std::string_view code);
  /// A done event with this finish reason, and its request's latencies.
  void count_finished(std::string_view reason, const request_latencies& l);
  /// An accepted job that ended with an error event (the executor failed).
  void count_failed();
  /// Inter-token gaps as the engine timed them (one per token after a request's first).
  void observe_itl_gaps(const std::vector<double>& gaps_s);
  metrics_snapshot snapshot() const;

private:
  mutable std::mutex mu_;
  metrics_snapshot data_;
};

/// The Prometheus text exposition (format 0.0.4) of `m` and `s`, names prefixed conveyor_.
std::string render_prometheus(const metrics_snapshot& m, const serving_stats& s);
/// A label value with backslash, double quote and newline escaped.
std::string escape_label_value(std::string_view v);
/// A sample value as Prometheus writes it: integers without a point, +Inf/-Inf/NaN spelled out.
std::string format_value(double v);

} // namespace conveyor::actors
