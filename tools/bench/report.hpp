// Pure. The results of a `conveyor bench` run as JSON with vLLM benchmark_serving's key names
// (completed, request_throughput, mean_ttft_ms, p99_itl_ms, ...) plus conveyor's own (rejected,
// failed, num_gaps, workload and arrival settings), and as vLLM's end-of-run table.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "tools/bench/driver.hpp"
#include "tools/bench/metrics.hpp"

namespace conveyor::bench {

/// What was asked for, echoed into the JSON.
struct run_settings {
  std::string date;  // vLLM's "%Y%m%d-%H%M%S"
  std::string router_ep, pub_ep;
  workload_options workload;
  std::string dataset;  // the JSONL file, for workload file
  arrival_options arrivals;
  int32_t max_concurrency = 0;  // 0 = none
  goodput_slo slo;
  std::vector<double> percentiles{90.0, 99.0};
};

/// "p99", "p99.9": vLLM's key prefix for a percentile.
std::string percentile_key(double p);

/// The result object. `detailed` adds per-request input_lens, output_lens, ttfts and itls
/// (seconds, as vLLM's --save-detailed).
nlohmann::ordered_json to_json(const run_settings& s, const driver_result& d, const bench_metrics& m, bool detailed);

/// vLLM's "Serving Benchmark Result" table, plus conveyor's rejected / failed / gaps lines.
std::string format_table(const run_settings& s, const driver_result& d, const bench_metrics& m);

/// One progress-bar line (no newline): "[=====>    ] 120/256 ended  8.1 s  51234 tok/s".
std::string progress_line(const progress& p, int bar_width = 30);

} // namespace conveyor::bench
