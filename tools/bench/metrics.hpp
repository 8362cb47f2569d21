// Pure. Serving metrics of a `conveyor bench` run from per-request client-side timelines,
// defined as vLLM's benchmark_serving defines them (reference/peers.md §5.7):
//   TTFT  = first tokens event - send;  E2EL = done event - send;
//   TPOT  = (E2EL - TTFT) / (output_tokens - 1), only for requests with > 1 output token;
//   ITL   = every gap between successive tokens events, pooled over requests. An event that
//           carries k > 1 tokens is one chunk: it contributes one gap (vLLM does the same with
//           multi-token stream chunks); TPOT, from the usage count, is unaffected;
//   throughputs over the wall duration from the first send to the last terminal reply/event;
//   goodput = completed requests meeting every given SLO (<=), per second; TPOT counts as 0
//   for requests with <= 1 output token. Stats: numpy's mean, median, std (ddof 0) and linear
//   percentiles; an empty sample gives 0 for all, as vLLM's `np.mean(x or 0)`.
// A completed request with no tokens event has no TTFT sample; its goodput TTFT is its E2EL.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/sim/metrics.hpp"

namespace conveyor::bench {

/// One tokens event as the client delivered it (in seq order).
struct token_chunk {
  /// Seconds since the run's start.
  double t_s = 0.0;
  int32_t num_tokens = 0;
};

/// What the client saw of one request. Times are seconds since the run's start.
struct request_timeline {
  /// Sent at all (a run cut short by a timeout leaves some unsent).
  bool sent = false;
  double send_s = 0.0;
  /// A done event was delivered (finished with stop or length, or cancelled/deadline).
  bool completed = false;
  std::vector<token_chunk> chunks;
  /// When the terminal outcome reached the client: done/error event or refusing reply.
  double end_s = 0.0;
  /// From the done event's usage.
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
};

/// Service-level objectives for goodput; an absent one is not checked. Milliseconds.
struct goodput_slo {
  std::optional<double> ttft_ms, tpot_ms, e2el_ms;
  bool any() const { return ttft_ms || tpot_ms || e2el_ms; }
};

struct metric_stats {
  double mean = 0.0, median = 0.0, std = 0.0;
  /// (p, value) for each requested percentile, in the order asked.
  std::vector<std::pair<double, double>> percentiles;
};

/// Per-request (and per-gap, for ITL) samples in milliseconds.
struct latency_samples {
  std::vector<double> ttft_ms, tpot_ms, itl_ms, e2el_ms;
};

struct bench_metrics : sim::serving_totals {
  /// Requests meeting every SLO; request_goodput is absent when no SLO was given.
  int32_t good_completed = 0;
  std::optional<double> request_goodput;
  metric_stats ttft, tpot, itl, e2el;
  latency_samples samples;
};

/// Parses vLLM's --goodput items "ttft:MS", "tpot:MS", "e2el:MS" into `out`. Returns "" or a
/// message naming the bad item.
std::string parse_goodput(const std::vector<std::string>& items, goodput_slo& out);

/// The p-th percentile (p in [0, 100]), numpy's linear interpolation; 0 for no values.
double percentile(std::vector<double> values, double p);
/// numpy mean, median, std (ddof 0) and the given percentiles of `v`; all 0 when empty.
metric_stats describe(const std::vector<double>& v, const std::vector<double>& percentiles);
/// The samples of every completed request.
latency_samples collect_samples(const std::vector<request_timeline>& requests);
/// First send to last end over the sent requests; 0 when none was sent.
double wall_duration_s(const std::vector<request_timeline>& requests);
bench_metrics compute_metrics(const std::vector<request_timeline>& requests, const goodput_slo& slo,
                              const std::vector<double>& percentiles);
/// Output tokens per second in `num_bins` equal bins from the first send to the last end,
/// counted at each tokens event's delivery. Returns the rates and sets `bin_s`.
std::vector<double> output_rate_series(const std::vector<request_timeline>& requests, int32_t num_bins,
                                       double& bin_s);

} // namespace conveyor::bench
