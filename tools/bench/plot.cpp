#include "tools/bench/plot.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace conveyor::bench {
namespace {

struct box {
  double x, y, w, h;  // the plotting area, in SVG pixels (y grows downwards)
};

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

// Appends " x,y" (no leading space for the first point).
void point(std::string& pts, double x, double y) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s%.1f,%.1f", pts.empty() ? "" : " ", x, y);
  pts += buf;
}

std::string short_num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v >= 100.0 ? "%.0f" : "%.3g", v);
  return buf;
}

std::string tick_label(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '&') out += "&amp;";
    else if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else out += c;
  }
  return out;
}

void text(std::string& svg, double x, double y, const std::string& s, const char* anchor, int size = 11,
          const char* extra = "") {
  svg += "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\" font-size=\"" + std::to_string(size) +
         "\" text-anchor=\"" + anchor + "\"" + extra + ">" + escape(s) + "</text>\n";
}

// Axes, ticks and labels for x in [0, x_max] and y in [0, y_max]; returns nothing, draws into svg.
void axes(std::string& svg, const box& b, double x_max, double x_step, double y_max, double y_step,
          const std::string& x_label, const std::string& y_label) {
  svg += "<rect x=\"" + num(b.x) + "\" y=\"" + num(b.y) + "\" width=\"" + num(b.w) + "\" height=\"" + num(b.h) +
         "\" fill=\"none\" stroke=\"#444\"/>\n";
  for (double v = 0; v <= x_max * (1 + 1e-9); v += x_step) {
    const double px = b.x + b.w * v / x_max;
    svg += "<line x1=\"" + num(px) + "\" y1=\"" + num(b.y) + "\" x2=\"" + num(px) + "\" y2=\"" + num(b.y + b.h) +
           "\" stroke=\"#ddd\"/>\n";
    text(svg, px, b.y + b.h + 14, tick_label(v), "middle", 10);
  }
  size_t widest = 1;
  for (double v = 0; v <= y_max * (1 + 1e-9); v += y_step) {
    const double py = b.y + b.h - b.h * v / y_max;
    svg += "<line x1=\"" + num(b.x) + "\" y1=\"" + num(py) + "\" x2=\"" + num(b.x + b.w) + "\" y2=\"" + num(py) +
           "\" stroke=\"#ddd\"/>\n";
    widest = std::max(widest, tick_label(v).size());
    text(svg, b.x - 4, py + 3, tick_label(v), "end", 10);
  }
  text(svg, b.x + b.w / 2, b.y + b.h + 30, x_label, "middle");
  const double lx = b.x - 14 - 6.0 * static_cast<double>(widest);  // clear of the tick labels
  const std::string rot = " transform=\"rotate(-90 " + num(lx) + " " + num(b.y + b.h / 2) + ")\"";
  text(svg, lx, b.y + b.h / 2, y_label, "middle", 11, rot.c_str());
}

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

double nice_step(double max) {
  if (!(max > 0.0) || !std::isfinite(max)) return 1.0;
  const double raw = max / 4.0, mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (raw <= m * mag * (1 + 1e-9)) return m * mag;
  return 10.0 * mag;
}

std::string render_svg(const plot_input& in) {
  const double width = 1000, height = 640;
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(width) + "\" height=\"" + num(height) +
                    "\" font-family=\"sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
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
