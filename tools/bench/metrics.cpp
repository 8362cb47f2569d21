#include "tools/bench/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>

namespace conveyor::bench {

double percentile(std::vector<double> values, double p) { return sim::percentile(std::move(values), p); }

std::string parse_goodput(const std::vector<std::string>& items, goodput_slo& out) {
  for (const std::string& item : items) {
    const size_t colon = item.find(':');
    const std::string name = item.substr(0, colon);
    std::optional<double>* slot = name == "ttft" ? &out.ttft_ms : name == "tpot" ? &out.tpot_ms : name == "e2el" ? &out.e2el_ms : nullptr;
    if (!slot || colon == std::string::npos)
      return "--goodput item '" + item + "': expected ttft:MS, tpot:MS or e2el:MS";
    char* end = nullptr;
    const std::string value = item.substr(colon + 1);
    const double ms = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0' || !(ms >= 0.0) || !std::isfinite(ms))
      return "--goodput item '" + item + "': the SLO must be a number of milliseconds >= 0";
    *slot = ms;
  }
  return {};
}

metric_stats describe(const std::vector<double>& v, const std::vector<double>& percentiles) {
  metric_stats s;
  for (double p : percentiles) s.percentiles.emplace_back(p, 0.0);
  if (v.empty()) return s;
  const double n = static_cast<double>(v.size());
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / n;
  double sq = 0.0;
  for (double x : v) sq += (x - s.mean) * (x - s.mean);
  s.std = std::sqrt(sq / n);
  std::vector<double> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  s.median = percentile(sorted, 50.0);
  for (auto& [p, value] : s.percentiles) value = percentile(sorted, p);
  return s;
}

namespace {

struct request_latency {
  std::optional<double> ttft_ms;
  double e2el_ms = 0.0;
  double tpot_ms = 0.0;  // 0 for <= 1 output token, as vLLM's goodput
  bool has_tpot = false;
};

request_latency latency_of(const request_timeline& r) {
  request_latency l;
  l.e2el_ms = (r.end_s - r.send_s) * 1e3;
  if (!r.chunks.empty()) l.ttft_ms = (r.chunks.front().t_s - r.send_s) * 1e3;
  if (l.ttft_ms && r.output_tokens > 1) {
    l.tpot_ms = (l.e2el_ms - *l.ttft_ms) / static_cast<double>(r.output_tokens - 1);
    l.has_tpot = true;
  }
  return l;
}

bool meets(const request_latency& l, const goodput_slo& slo) {
  if (slo.ttft_ms && l.ttft_ms.value_or(l.e2el_ms) > *slo.ttft_ms) return false;
  if (slo.tpot_ms && l.tpot_ms > *slo.tpot_ms) return false;
  if (slo.e2el_ms && l.e2el_ms > *slo.e2el_ms) return false;
  return true;
}

} // namespace

latency_samples collect_samples(const std::vector<request_timeline>& requests) {
  latency_samples s;
  for (const request_timeline& r : requests) {
    if (!r.completed) continue;
    const request_latency l = latency_of(r);
    if (l.ttft_ms) s.ttft_ms.push_back(*l.ttft_ms);
    if (l.has_tpot) s.tpot_ms.push_back(l.tpot_ms);
    s.e2el_ms.push_back(l.e2el_ms);
    for (size_t i = 1; i < r.chunks.size(); ++i) s.itl_ms.push_back((r.chunks[i].t_s - r.chunks[i - 1].t_s) * 1e3);
  }
  return s;
}

double wall_duration_s(const std::vector<request_timeline>& requests) {
  double first = INFINITY, last = -INFINITY;
  for (const request_timeline& r : requests) {
    if (!r.sent) continue;
    first = std::min(first, r.send_s);
    last = std::max(last, r.end_s);
  }
  return first <= last ? last - first : 0.0;
}

bench_metrics compute_metrics(const std::vector<request_timeline>& requests, const goodput_slo& slo,
                              const std::vector<double>& percentiles) {
  bench_metrics m;
  for (const request_timeline& r : requests) {
    if (!r.completed) continue;
    m.count(r.prompt_tokens, r.output_tokens);
    if (slo.any() && meets(latency_of(r), slo)) ++m.good_completed;
  }
  m.close(wall_duration_s(requests));
  const double d = m.duration_s;
  if (slo.any()) m.request_goodput = d > 0.0 ? m.good_completed / d : 0.0;
  m.samples = collect_samples(requests);
  m.ttft = describe(m.samples.ttft_ms, percentiles);
  m.tpot = describe(m.samples.tpot_ms, percentiles);
  m.itl = describe(m.samples.itl_ms, percentiles);
  m.e2el = describe(m.samples.e2el_ms, percentiles);
  return m;
}

std::vector<double> output_rate_series(const std::vector<request_timeline>& requests, int32_t num_bins,
                                       double& bin_s) {
  double first = INFINITY;
  for (const request_timeline& r : requests)
    if (r.sent) first = std::min(first, r.send_s);
  const double d = wall_duration_s(requests);
  bin_s = 0.0;
  if (num_bins < 1 || !(d > 0.0)) return {};
  bin_s = d / num_bins;
  std::vector<double> rate(num_bins, 0.0);
  for (const request_timeline& r : requests)
    for (const token_chunk& c : r.chunks) {
      const auto b = static_cast<int64_t>((c.t_s - first) / bin_s);
      rate[std::clamp<int64_t>(b, 0, num_bins - 1)] += c.num_tokens;
    }
  for (double& x : rate) x /= bin_s;
  return rate;
}

} // namespace conveyor::bench
