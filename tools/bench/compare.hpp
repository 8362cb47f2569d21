// Pure. The report of `conveyor bench --compare-batching`: the same workload run against a
// server in static and in continuous batching mode, for each output-length cap. A table (one row
// per cap and mode, the continuous/static ratio of output throughput per cap), a JSON object and
// an SVG with three bar charts: output throughput, median TTFT and median E2EL per cap and mode.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "tools/bench/metrics.hpp"

namespace conveyor::bench {

/// One bench run against one server.
struct compare_run {
  int32_t cap = 0;
  std::string batching;  // "static" | "continuous"
  int32_t num_requests = 0;
  int32_t failed = 0;  // rejected, failed or unfinished: a comparison with any is not clean
  int64_t preemptions = -1;  // the server's count after the run (-1: unknown)
  bench_metrics metrics;
};

/// What was compared, echoed into the report.
struct compare_setup {
  std::string model;
  std::string workload;  // e.g. "anyscale: 200 prompts of 128 tokens, outputs exp(mean 128) <= cap"
  std::string server_args;
};

/// continuous output throughput / static output throughput for `cap`; 0 when either is missing
/// or static produced nothing.
double throughput_ratio(const std::vector<compare_run>& runs, int32_t cap);

std::string format_compare_table(const compare_setup& s, const std::vector<compare_run>& runs);
nlohmann::ordered_json compare_to_json(const compare_setup& s, const std::vector<compare_run>& runs);
std::string render_compare_svg(const compare_setup& s, const std::vector<compare_run>& runs);

} // namespace conveyor::bench
