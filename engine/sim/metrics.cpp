#include "engine/sim/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace conveyor::sim {

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const double rank = p / 100.0 * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (rank - static_cast<double>(lo)) * (values[hi] - values[lo]);
}

void serving_totals::count(int64_t input_tokens, int64_t output_tokens) {
  ++completed;
  total_input_tokens += input_tokens;
  total_output_tokens += output_tokens;
}

void serving_totals::close(double duration) {
  duration_s = duration;
  if (!(duration > 0.0)) return;
  request_throughput = completed / duration;
  output_throughput = static_cast<double>(total_output_tokens) / duration;
  total_token_throughput = static_cast<double>(total_input_tokens + total_output_tokens) / duration;
}

namespace {

double mean(const std::vector<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

} // namespace

sim_metrics summarize(const sim_result& result) {
  sim_metrics m;
  std::vector<double> ttft, tpot, e2el;
  for (const request_record& r : result.requests) {
    if (r.rejected) {
      ++m.num_rejected;
      continue;
    }
    if (r.finish_s < 0.0 || r.first_token_s < 0.0) continue;
    m.count(r.num_prompt_tokens, r.num_output_tokens);
    const double ttft_ms = (r.first_token_s - r.arrival_s) * 1e3;
    const double e2el_ms = (r.finish_s - r.arrival_s) * 1e3;
    ttft.push_back(ttft_ms);
    e2el.push_back(e2el_ms);
    if (r.num_output_tokens > 1) tpot.push_back((e2el_ms - ttft_ms) / (r.num_output_tokens - 1));
  }
  m.close(result.end_s);
  m.mean_ttft_ms = mean(ttft);
  m.median_ttft_ms = percentile(ttft, 50.0);
  m.p99_ttft_ms = percentile(ttft, 99.0);
  m.mean_tpot_ms = mean(tpot);
  m.median_tpot_ms = percentile(tpot, 50.0);
  m.p99_tpot_ms = percentile(tpot, 99.0);
  m.mean_e2el_ms = mean(e2el);
  m.median_e2el_ms = percentile(e2el, 50.0);
  m.p99_e2el_ms = percentile(e2el, 99.0);
  m.kv_utilization = result.kv_utilization;
  m.num_preemptions = result.num_preemptions;
  m.num_steps = result.num_steps;
  m.mean_tokens_per_step =
      result.num_steps > 0 ? static_cast<double>(result.num_batched_tokens) / result.num_steps : 0.0;
  m.mean_running = result.mean_running;
  return m;
}

} // namespace conveyor::sim
