// Pure. Summary metrics of a simulation, defined as vLLM's benchmark_serving defines them:
// TTFT = first token - arrival; TPOT = (e2e - TTFT) / (output_tokens - 1) per request, only for
// requests with more than one output token; percentiles interpolate linearly (numpy's default);
// throughputs divide by the duration from t = 0 to the last finish.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/sim/simulator.hpp"

namespace conveyor::sim {

/// The volume of a serving run as vLLM's benchmark_serving reports it, shared by the simulator
/// and `conveyor bench`: completed requests, their tokens, and the rates over the run's duration.
struct serving_totals {
  int32_t completed = 0;
  int64_t total_input_tokens = 0;
  int64_t total_output_tokens = 0;
  double duration_s = 0.0;
  double request_throughput = 0.0;
  double output_throughput = 0.0;
  double total_token_throughput = 0.0;

  /// One more completed request.
  void count(int64_t input_tokens, int64_t output_tokens);
  /// Sets the duration and the three rates over it (0 when the duration is not > 0).
  void close(double duration);
};

struct sim_metrics : serving_totals {
  int32_t num_rejected = 0;
  double mean_ttft_ms = 0.0, median_ttft_ms = 0.0, p99_ttft_ms = 0.0;
  double mean_tpot_ms = 0.0, median_tpot_ms = 0.0, p99_tpot_ms = 0.0;
  double mean_e2el_ms = 0.0, median_e2el_ms = 0.0, p99_e2el_ms = 0.0;
  double kv_utilization = 0.0;
  int64_t num_preemptions = 0;
  int64_t num_steps = 0;
  double mean_tokens_per_step = 0.0;
  double mean_running = 0.0;
};

/// The p-th percentile (p in [0, 100]) with linear interpolation; 0 for no values.
double percentile(std::vector<double> values, double p);

sim_metrics summarize(const sim_result& result);

} // namespace conveyor::sim
