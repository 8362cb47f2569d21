#include "tools/bench/report.hpp"

#include <cmath>
#include <cstdio>

namespace conveyor::bench {
namespace {

using json = nlohmann::ordered_json;

json number_or_null(double v, bool present) { return present ? json(v) : json(nullptr); }

void add_stats(json& j, const std::string& name, const metric_stats& st) {
  j["mean_" + name + "_ms"] = st.mean;
  j["median_" + name + "_ms"] = st.median;
  j["std_" + name + "_ms"] = st.std;
  for (const auto& [p, v] : st.percentiles) j[percentile_key(p) + "_" + name + "_ms"] = v;
}

json slo_json(const goodput_slo& slo) {
  json j = json::object();
  if (slo.ttft_ms) j["ttft"] = *slo.ttft_ms;
  if (slo.tpot_ms) j["tpot"] = *slo.tpot_ms;
  if (slo.e2el_ms) j["e2el"] = *slo.e2el_ms;
  return j;
}

} // namespace

std::string percentile_key(double p) {
  char buf[32];
  if (p == std::floor(p)) std::snprintf(buf, sizeof buf, "p%d", static_cast<int>(p));
  else std::snprintf(buf, sizeof buf, "p%g", p);
  return buf;
}

json to_json(const run_settings& s, const driver_result& d, const bench_metrics& m, bool detailed) {
  const workload_options& w = s.workload;
  json j{
      {"date", s.date},
      {"backend", "conveyor"},
      {"model_id", d.model},
      {"num_prompts", w.num_prompts},
      {"request_rate", std::isinf(s.arrivals.request_rate) ? json("inf") : json(s.arrivals.request_rate)},
      {"burstiness", s.arrivals.burstiness},
      {"max_concurrency", number_or_null(s.max_concurrency, s.max_concurrency > 0)},
      {"duration", m.duration_s},
      {"completed", m.completed},
      {"total_input_tokens", m.total_input_tokens},
      {"total_output_tokens", m.total_output_tokens},
      {"request_throughput", m.request_throughput},
      {"request_goodput", number_or_null(m.request_goodput.value_or(0.0), m.request_goodput.has_value())},
      {"output_throughput", m.output_throughput},
      {"total_token_throughput", m.total_token_throughput},
  };
  add_stats(j, "ttft", m.ttft);
  add_stats(j, "tpot", m.tpot);
  add_stats(j, "itl", m.itl);
  add_stats(j, "e2el", m.e2el);
  j["good_completed"] = m.good_completed;
  j["goodput_slo_ms"] = slo_json(s.slo);
  j["rejected"] = d.rejected;
  j["failed"] = d.failed;
  j["unfinished"] = d.unfinished;
  j["num_gaps"] = d.num_gaps;
  j["num_fetches"] = d.num_fetches;
  j["num_retries"] = d.num_retries;
  j["streamed_output_tokens"] = d.streamed_output_tokens;
  j["error_codes"] = d.error_codes;
  j["finish_reasons"] = d.finish_reasons;
  j["workload"] = to_string(w.name);
  if (w.name == workload_name::file) j["dataset"] = s.dataset;
  j["input_len"] = w.name == workload_name::anyscale ? 512 : w.input_len;
  j["output_len"] = w.name == workload_name::anyscale ? 128 : w.output_len;
  j["input_dist"] = to_string(w.input_dist);
  j["output_dist"] = to_string(w.output_dist);
  j["range_ratio"] = w.range_ratio;
  j["lognormal_sigma"] = w.lognormal_sigma;
  j["cap"] = w.cap;
  j["seed"] = w.seed;
  j["arrivals"] = s.max_concurrency > 0 && std::isinf(s.arrivals.request_rate) ? "max-concurrency"
                  : std::isinf(s.arrivals.request_rate)                         ? "all-at-once"
                  : s.arrivals.burstiness == 1.0                                ? "poisson"
                                                                                : "gamma";
  j["run_prefix"] = d.run_prefix;
  j["router"] = s.router_ep;
  j["pub"] = s.pub_ep;
  if (detailed) {
    json in = json::array(), out = json::array(), ttfts = json::array(), itls = json::array();
    for (const request_timeline& t : d.timelines) {
      in.push_back(t.prompt_tokens);
      out.push_back(t.completed ? t.output_tokens : 0);
      ttfts.push_back(t.completed && !t.chunks.empty() ? t.chunks.front().t_s - t.send_s : 0.0);
      json gaps = json::array();
      for (size_t i = 1; t.completed && i < t.chunks.size(); ++i) gaps.push_back(t.chunks[i].t_s - t.chunks[i - 1].t_s);
      itls.push_back(std::move(gaps));
    }
    j["input_lens"] = std::move(in);
    j["output_lens"] = std::move(out);
    j["ttfts"] = std::move(ttfts);
    j["itls"] = std::move(itls);
  }
  return j;
}

namespace {

void line(std::string& out, const char* label, const std::string& value) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%-40s%s\n", label, value.c_str());
  out += buf;
}

std::string fmt(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

void rule(std::string& out, const std::string& title, char fill) {
  const size_t width = 50, pad = width > title.size() ? (width - title.size()) / 2 : 0;
  out += std::string(pad, fill) + title + std::string(width - pad - title.size(), fill) + "\n";
}

void stats_block(std::string& out, const std::string& title, const std::string& name, const metric_stats& st) {
  rule(out, title, '-');
  line(out, ("Mean " + name + " (ms):").c_str(), fmt(st.mean));
  line(out, ("Median " + name + " (ms):").c_str(), fmt(st.median));
  for (const auto& [p, v] : st.percentiles) {
    std::string key = percentile_key(p);
    key[0] = 'P';
    line(out, (key + " " + name + " (ms):").c_str(), fmt(v));
  }
}

} // namespace

std::string format_table(const run_settings& s, const driver_result& d, const bench_metrics& m) {
  std::string out;
  rule(out, " Serving Benchmark Result ", '=');
  line(out, "Successful requests:", std::to_string(m.completed));
  line(out, "Rejected (overloaded):", std::to_string(d.rejected));
  line(out, "Failed:", std::to_string(d.failed));
  if (d.unfinished > 0) line(out, "Unfinished (timeout):", std::to_string(d.unfinished));
  if (s.max_concurrency > 0) line(out, "Maximum request concurrency:", std::to_string(s.max_concurrency));
  line(out, "Benchmark duration (s):", fmt(m.duration_s));
  line(out, "Total input tokens:", std::to_string(m.total_input_tokens));
  line(out, "Total generated tokens:", std::to_string(m.total_output_tokens));
  line(out, "Request throughput (req/s):", fmt(m.request_throughput));
  if (m.request_goodput) line(out, "Request goodput (req/s):", fmt(*m.request_goodput));
  line(out, "Output token throughput (tok/s):", fmt(m.output_throughput));
  line(out, "Total Token throughput (tok/s):", fmt(m.total_token_throughput));
  line(out, "Stream gaps repaired by fetch:", std::to_string(d.num_gaps));
  stats_block(out, "Time to First Token", "TTFT", m.ttft);
  stats_block(out, "Time per Output Token (excl. 1st token)", "TPOT", m.tpot);
  stats_block(out, "Inter-token Latency", "ITL", m.itl);
  stats_block(out, "End-to-end Latency", "E2EL", m.e2el);
  rule(out, "", '=');
  return out;
}

std::string progress_line(const progress& p, int bar_width) {
  const double frac = p.total > 0 ? static_cast<double>(p.ended) / p.total : 1.0;
  const int full = static_cast<int>(frac * bar_width);
  std::string bar(static_cast<size_t>(full), '=');
  if (full < bar_width) bar += '>';
  bar.resize(static_cast<size_t>(bar_width), ' ');
  char buf[160];
  std::snprintf(buf, sizeof buf, "[%s] %d/%d done  %d sent  %.1f s  %.0f tok/s", bar.c_str(), p.ended, p.total, p.sent,
                p.elapsed_s, p.elapsed_s > 0 ? p.output_tokens / p.elapsed_s : 0.0);
  return buf;
}

} // namespace conveyor::bench
