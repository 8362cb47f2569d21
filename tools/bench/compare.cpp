#include "tools/bench/compare.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>

#include "tools/bench/svg.hpp"

namespace conveyor::bench {
namespace {

const compare_run* find_run(const std::vector<compare_run>& runs, int32_t cap, const std::string& mode) {
  for (const auto& r : runs)
    if (r.cap == cap && r.batching == mode) return &r;
  return nullptr;
}

std::vector<int32_t> caps_of(const std::vector<compare_run>& runs) {
  std::vector<int32_t> caps;
  for (const auto& r : runs)
    if (std::find(caps.begin(), caps.end(), r.cap) == caps.end()) caps.push_back(r.cap);
  return caps;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

const char* const k_modes[] = {"static", "continuous"};
const char* const k_colours[] = {"#9e9e9e", "#1f77b4"};

// One bar chart: for each cap a static and a continuous bar of value(run); `ratio` labels
// continuous/static above each group when set.
void bar_panel(std::string& out, const svg::box& b, const std::vector<compare_run>& runs, const std::string& title,
               const std::string& y_label, const std::function<double(const compare_run&)>& value, bool ratio) {
  svg::text(out, b.x + b.w / 2, b.y - 10, title, "middle", 12, " font-weight=\"bold\"");
  const std::vector<int32_t> caps = caps_of(runs);
  double hi = 0.0;
  for (const auto& r : runs) hi = std::max(hi, value(r));
  const double y_max = svg::nice_max(hi > 0 ? hi * 1.12 : 1.0);
  svg::y_axis(out, b, y_max, svg::nice_step(y_max), y_label);
  const double group = b.w / static_cast<double>(std::max<size_t>(1, caps.size())), bar = group * 0.3;
  for (size_t i = 0; i < caps.size(); ++i) {
    const double gx = b.x + group * static_cast<double>(i);
    for (int m = 0; m < 2; ++m) {
      const compare_run* r = find_run(runs, caps[i], k_modes[m]);
      if (!r) continue;
      const double v = value(*r), h = b.h * v / y_max, x = gx + group * 0.2 + bar * m;
      svg::rect(out, x, b.y + b.h - h, bar, h, k_colours[m]);
      svg::text(out, x + bar / 2, b.y + b.h - h - 3, svg::short_num(v), "middle", 9);
    }
    svg::text(out, gx + group / 2, b.y + b.h + 14, "cap " + std::to_string(caps[i]), "middle", 10);
    const double q = ratio ? throughput_ratio(runs, caps[i]) : 0.0;
    if (q > 0) svg::text(out, gx + group / 2, b.y + 14, fmt("%.2fx", q), "middle", 11, " font-weight=\"bold\"");
  }
}

} // namespace

double throughput_ratio(const std::vector<compare_run>& runs, int32_t cap) {
  const compare_run* s = find_run(runs, cap, "static");
  const compare_run* c = find_run(runs, cap, "continuous");
  if (!s || !c || !(s->metrics.output_throughput > 0.0)) return 0.0;
  return c->metrics.output_throughput / s->metrics.output_throughput;
}

std::string format_compare_table(const compare_setup& s, const std::vector<compare_run>& runs) {
  std::string t = "============ Static vs continuous batching ============\n";
  t += "model:    " + s.model + "\nworkload: " + s.workload + "\n";
  if (!s.server_args.empty()) t += "server:   " + s.server_args + "\n";
  char line[256];
  std::snprintf(line, sizeof line, "%5s %-11s %6s %9s %8s %10s %10s %10s %10s %10s %8s\n", "cap", "batching", "done",
                "dur (s)", "req/s", "out tok/s", "TTFT p50", "TTFT p99", "TPOT mean", "E2EL p50", "preempt");
  t += line;
  for (const auto& r : runs) {
    const bench_metrics& m = r.metrics;
    std::snprintf(line, sizeof line, "%5d %-11s %3d/%-3d %8.2f %8.2f %10.1f %8.0fms %8.0fms %8.1fms %8.0fms %8s\n", r.cap,
                  r.batching.c_str(), m.completed, r.num_requests, m.duration_s, m.request_throughput,
                  m.output_throughput, m.ttft.median, m.ttft.percentiles.empty() ? 0.0 : m.ttft.percentiles.back().second,
                  m.tpot.mean, m.e2el.median, r.preemptions < 0 ? "?" : std::to_string(r.preemptions).c_str());
    t += line;
  }
  t += "continuous / static output throughput:";
  for (int32_t cap : caps_of(runs)) {
    const double q = throughput_ratio(runs, cap);
    t += "  cap " + std::to_string(cap) + ": " + (q > 0 ? fmt("%.2fx", q) : std::string("n/a"));
  }
  t += "\n";
  for (const auto& r : runs)
    if (r.failed > 0)
      t += "WARNING: cap " + std::to_string(r.cap) + " " + r.batching + ": " + std::to_string(r.failed) +
           " requests did not complete; that row is not comparable\n";
  return t + "=======================================================\n";
}

nlohmann::ordered_json compare_to_json(const compare_setup& s, const std::vector<compare_run>& runs) {
  nlohmann::ordered_json j;
  j["model"] = s.model;
  j["workload"] = s.workload;
  j["server_args"] = s.server_args;
  auto& rows = j["runs"] = nlohmann::ordered_json::array();
  for (const auto& r : runs) {
    const bench_metrics& m = r.metrics;
    rows.push_back({{"cap", r.cap}, {"batching", r.batching}, {"num_requests", r.num_requests}, {"completed", m.completed},
                    {"failed", r.failed}, {"preemptions", r.preemptions}, {"duration", m.duration_s}, {"total_input_tokens", m.total_input_tokens},
                    {"total_output_tokens", m.total_output_tokens}, {"request_throughput", m.request_throughput},
                    {"output_throughput", m.output_throughput}, {"total_token_throughput", m.total_token_throughput},
                    {"mean_ttft_ms", m.ttft.mean}, {"median_ttft_ms", m.ttft.median}, {"mean_tpot_ms", m.tpot.mean},
                    {"median_tpot_ms", m.tpot.median}, {"mean_e2el_ms", m.e2el.mean}, {"median_e2el_ms", m.e2el.median}});
  }
  auto& ratios = j["output_throughput_ratio"] = nlohmann::ordered_json::object();
  for (int32_t cap : caps_of(runs)) ratios[std::to_string(cap)] = throughput_ratio(runs, cap);
  return j;
}

std::string render_compare_svg(const compare_setup& s, const std::vector<compare_run>& runs) {
  const double width = 1000, height = 420;
  std::string out = svg::begin(width, height);
  svg::text(out, width / 2, 22, "Static vs continuous batching: " + s.model, "middle", 14, " font-weight=\"bold\"");
  svg::text(out, width / 2, 40, s.workload, "middle", 11);
  const double pw = 250, gap = 330, top = 80, ph = 260;
  bar_panel(out, {70, top, pw, ph}, runs, "Output throughput (ratio above)", "output tokens/s",
            [](const compare_run& r) { return r.metrics.output_throughput; }, true);
  bar_panel(out, {70 + gap, top, pw, ph}, runs, "Median TTFT", "seconds",
            [](const compare_run& r) { return r.metrics.ttft.median / 1000.0; }, false);
  bar_panel(out, {70 + 2 * gap, top, pw, ph}, runs, "Median end-to-end latency", "seconds",
            [](const compare_run& r) { return r.metrics.e2el.median / 1000.0; }, false);
  for (int m = 0; m < 2; ++m) {
    const double x = width / 2 - 110 + 130 * m;
    svg::rect(out, x, height - 40, 14, 14, k_colours[m]);
    svg::text(out, x + 20, height - 29, k_modes[m], "start", 12);
  }
  out += "</svg>\n";
  return out;
}

} // namespace conveyor::bench
