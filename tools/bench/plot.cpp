#include "tools/bench/plot.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "tools/bench/svg.hpp"

namespace conveyor::bench {
namespace {

using namespace svg;

void cdf_panel(std::string& svg, const box& b, std::vector<double> v, const std::string& name, const std::string& what) {
  text(svg, b.x + b.w / 2, b.y - 8, name + " CDF (" + std::to_string(v.size()) + " " + what + ")", "middle", 12,
       " font-weight=\"bold\"");
  if (v.empty()) {
    axes(svg, b, 1.0, 0.5, 1.0, 0.25, name + " (ms)", "fraction");
    text(svg, b.x + b.w / 2, b.y + b.h / 2, "no samples", "middle");
    return;
  }
  std::sort(v.begin(), v.end());
  // A long tail would squeeze the body into one pixel column: then the axis ends at p99 and the
  // curve runs along the right edge beyond it.
  const double p99 = v[static_cast<size_t>(std::ceil(0.99 * static_cast<double>(v.size() - 1)))];
  const bool clipped = v.back() > 1.5 * p99;
  const double hi = clipped ? p99 : v.back();
  const double step = nice_step(hi);
  const double x_max = std::max(step, std::ceil(hi / step) * step);
  axes(svg, b, x_max, step, 1.0, 0.25, name + (clipped ? " (ms), axis to p99" : " (ms)"), "fraction");
  if (clipped) text(svg, b.x + b.w - 4, b.y + b.h - 6, "max " + short_num(v.back()), "end", 10);
  for (double& x : v) x = std::min(x, x_max);
  // At most ~400 points: every k-th sample, and always the last.
  const size_t n = v.size(), stride = std::max<size_t>(1, n / 400);
  std::string pts;
  point(pts, b.x + b.w * v[0] / x_max, b.y + b.h);
  for (size_t i = 0; i < n; i += stride) {
    const size_t k = std::min(n - 1, i + stride - 1);
    point(pts, b.x + b.w * v[k] / x_max, b.y + b.h - b.h * static_cast<double>(k + 1) / n);
  }
  svg += "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\" points=\"" + pts + "\"/>\n";
}

void rate_panel(std::string& svg, const box& b, const std::vector<double>& rate, double bin_s) {
  text(svg, b.x + b.w / 2, b.y - 8, "Output throughput over time", "middle", 12, " font-weight=\"bold\"");
  const double t_max_raw = bin_s * static_cast<double>(rate.size());
  if (rate.empty() || !(t_max_raw > 0.0)) {
    axes(svg, b, 1.0, 0.5, 1.0, 0.5, "time since the first send (s)", "output tokens/s");
    text(svg, b.x + b.w / 2, b.y + b.h / 2, "no samples", "middle");
    return;
  }
  const double r_max_raw = std::max(1.0, *std::max_element(rate.begin(), rate.end()));
  const double ts = nice_step(t_max_raw), rs = nice_step(r_max_raw);
  const double t_max = std::ceil(t_max_raw / ts) * ts, r_max = std::ceil(r_max_raw / rs) * rs;
  axes(svg, b, t_max, ts, r_max, rs, "time since the first send (s)", "output tokens/s");
  std::string pts;
  for (size_t i = 0; i < rate.size(); ++i) {
    const double y = b.y + b.h - b.h * rate[i] / r_max;
    point(pts, b.x + b.w * (i * bin_s) / t_max, y);
    point(pts, b.x + b.w * ((i + 1) * bin_s) / t_max, y);
  }
  svg += "<polyline fill=\"none\" stroke=\"#d62728\" stroke-width=\"1.5\" points=\"" + pts + "\"/>\n";
}

} // namespace

std::string render_svg(const plot_input& in) {
  const double width = 1000, height = 640;
  std::string svg = begin(width, height);
  text(svg, width / 2, 22, in.title, "middle", 14, " font-weight=\"bold\"");
  const latency_samples& s = in.samples;
  const double pw = 180, gap = 245;
  cdf_panel(svg, {70, 60, pw, 180}, s.ttft_ms, "TTFT", "requests");
  cdf_panel(svg, {70 + gap, 60, pw, 180}, s.tpot_ms, "TPOT", "requests");
  cdf_panel(svg, {70 + 2 * gap, 60, pw, 180}, s.itl_ms, "ITL", "gaps");
  cdf_panel(svg, {70 + 3 * gap, 60, pw, 180}, s.e2el_ms, "E2EL", "requests");
  rate_panel(svg, {70, 330, 3 * gap + pw, 250}, in.output_rate, in.bin_s);
  svg += "</svg>\n";
  return svg;
}

} // namespace conveyor::bench
