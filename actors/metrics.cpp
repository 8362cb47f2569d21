#include "actors/metrics.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "engine/text_escape.hpp"

namespace conveyor::actors {

const std::vector<double> metric_buckets::ttft = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,   0.25,  0.5,   0.75,
                                                  1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
const std::vector<double> metric_buckets::per_token = {0.01, 0.025, 0.05, 0.075, 0.1,  0.15, 0.2,  0.3,  0.4, 0.5,
                                                       0.75, 1.0,   2.5,  5.0,   7.5,  10.0, 20.0, 40.0, 80.0};
const std::vector<double> metric_buckets::request_latency = {0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
                                                             30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};

histogram_data::histogram_data(std::vector<double> upper_bounds) : bounds(std::move(upper_bounds)), counts(bounds.size() + 1, 0) {}

void histogram_data::observe(double v, uint64_t n) {
  const auto it = std::lower_bound(bounds.begin(), bounds.end(), v);  // first bound >= v
  counts[static_cast<size_t>(it - bounds.begin())] += n;
  count += n;
  sum += v * static_cast<double>(n);
}

std::vector<named_histogram> metrics_snapshot::histograms() const {
  return {
      {"time_to_first_token_seconds", "Histogram of time to first token in seconds.", &ttft},
      {"time_per_output_token_seconds", "Histogram of time per output token in seconds (per request, excluding the first token).", &tpot},
      {"inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", &itl},
      {"e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", &e2e},
      {"request_queue_time_seconds", "Histogram of time spent waiting before first scheduled, in seconds.", &queue},
  };
}

metrics::metrics() {
  for (const char* code : {"bad_request", "too_long", "overloaded", "duplicate", "not_found", "shutting_down", "internal"})
    data_.rejected[code] = 0;
  for (const char* reason : {"stop", "length", "cancelled", "deadline"}) data_.finished[reason] = 0;
}

void metrics::count_rejection(std::string_view code) {
  std::lock_guard lock(mu_);
  ++data_.rejected[std::string(code)];
}

void metrics::count_rejected_submit(std::string_view code) {
  std::lock_guard lock(mu_);
  ++data_.rejected[std::string(code)];
  ++data_.rejected_submits;
}

void metrics::count_finished(std::string_view reason, const request_latencies& l) {
  std::lock_guard lock(mu_);
  ++data_.finished[std::string(reason)];
  if (l.ttft_s) data_.ttft.observe(*l.ttft_s);
  data_.tpot.observe(l.tpot_s);
  data_.e2e.observe(l.e2e_s);
  data_.queue.observe(l.queue_s);
}

void metrics::count_failed() {
  std::lock_guard lock(mu_);
  ++data_.failed;
}

void metrics::observe_itl_gaps(const std::vector<double>& gaps_s) {
  if (gaps_s.empty()) return;
  std::lock_guard lock(mu_);
  for (double g : gaps_s) data_.itl.observe(g);
}

metrics_snapshot metrics::snapshot() const {
  std::lock_guard lock(mu_);
  return data_;
}

std::string escape_label_value(std::string_view v) { return escape_chars(v, {{'\\', "\\\\"}, {'"', "\\\""}, {'\n', "\\n"}}); }

std::string format_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);  // shortest text that reads back as v
  return std::string(buf, r.ptr);
}

namespace {

// A bucket bound as the Python client writes it ("1.0", "0.005"), so `le` values match vLLM's.
std::string format_bound(double b) {
  std::string s = format_value(b);
  if (s.find_first_of(".eIN") == std::string::npos) s += ".0";
  return s;
}

class writer {
public:
  void family(std::string_view name, std::string_view type, std::string_view help) {
    out_ += "# HELP conveyor_";
    out_.append(name).append(" ").append(help).append("\n# TYPE conveyor_").append(name).append(" ");
    out_.append(type).append("\n");
  }
  void sample(std::string_view name, std::string_view labels, double v) {
    out_.append("conveyor_").append(name);
    if (!labels.empty()) out_.append("{").append(labels).append("}");
    out_.append(" ").append(format_value(v)).append("\n");
  }
  void scalar(std::string_view name, std::string_view type, std::string_view help, double v) {
    family(name, type, help);
    sample(name, "", v);
  }
  void labelled(std::string_view name, std::string_view help, std::string_view label, const std::map<std::string, uint64_t>& by) {
    family(name, "counter", help);
    for (const auto& [value, n] : by) sample(name, std::string(label) + "=\"" + escape_label_value(value) + "\"", static_cast<double>(n));
  }
  void histogram(const named_histogram& h) {
    const std::string name = h.name;
    family(name, "histogram", h.help);
    uint64_t cumulative = 0;
    for (size_t i = 0; i < h.data->bounds.size(); ++i) {
      cumulative += h.data->counts[i];
      sample(name + "_bucket", "le=\"" + format_bound(h.data->bounds[i]) + "\"", static_cast<double>(cumulative));
    }
    sample(name + "_bucket", "le=\"+Inf\"", static_cast<double>(h.data->count));
    sample(name + "_sum", "", h.data->sum);
    sample(name + "_count", "", static_cast<double>(h.data->count));
  }
  std::string take() { return std::move(out_); }

private:
  std::string out_;
};

} // namespace

std::string render_prometheus(const metrics_snapshot& m, const serving_stats& s) {
  writer w;
  w.scalar("num_requests_running", "gauge", "Number of requests in model execution batches.", static_cast<double>(s.running));
  w.scalar("num_requests_waiting", "gauge", "Number of requests waiting to be processed.", static_cast<double>(s.queued));
  w.scalar("kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", s.kv_usage);
  w.scalar("prompt_tokens_total", "counter", "Number of prefill tokens processed.", static_cast<double>(s.prompt_tokens_total));
  w.scalar("generation_tokens_total", "counter", "Number of generation tokens processed.",
           static_cast<double>(s.completion_tokens_total));
  w.scalar("num_preemptions_total", "counter", "Cumulative number of preemptions from the engine.",
           static_cast<double>(s.preemptions_total));
  w.scalar("spec_decode_num_drafts_total", "counter", "Speculative decoding: verifications of one sequence's drafted tokens.",
           static_cast<double>(s.spec_drafts_total));
  w.scalar("spec_decode_num_draft_tokens_total", "counter", "Speculative decoding: tokens drafted.",
           static_cast<double>(s.spec_draft_tokens_total));
  w.scalar("spec_decode_num_accepted_tokens_total", "counter", "Speculative decoding: drafted tokens accepted.",
           static_cast<double>(s.spec_accepted_tokens_total));
  {
    std::map<std::string, uint64_t> per_pos;
    for (size_t i = 0; i < s.spec_accepted_per_pos.size(); ++i) per_pos[std::to_string(i)] = static_cast<uint64_t>(s.spec_accepted_per_pos[i]);
    w.labelled("spec_decode_num_accepted_tokens_per_pos_total", "Speculative decoding: drafted tokens accepted, by draft position (0-based).",
               "position", per_pos);
  }
  w.labelled("request_success_total", "Count of finished requests (done events), by finish reason.", "finished_reason", m.finished);
  w.labelled("request_rejected_total", "Count of error replies and rejected submits, by error code.", "code", m.rejected);
  w.scalar("request_failed_total", "counter", "Count of accepted requests that ended with an error event.", static_cast<double>(m.failed));
  for (const auto& h : m.histograms()) w.histogram(h);
  return w.take();
}

} // namespace conveyor::actors
