#include "tools/bench/svg.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "engine/text_escape.hpp"

namespace conveyor::svg {

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
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

std::string escape(const std::string& s) { return escape_chars(s, {{'&', "&amp;"}, {'<', "&lt;"}, {'>', "&gt;"}}); }

void point(std::string& pts, double x, double y) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s%.1f,%.1f", pts.empty() ? "" : " ", x, y);
  pts += buf;
}

std::string begin(double width, double height) {
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(width) + "\" height=\"" + num(height) +
         "\" font-family=\"sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
}

void text(std::string& svg, double x, double y, const std::string& s, const char* anchor, int size, const char* extra) {
  svg += "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\" font-size=\"" + std::to_string(size) +
         "\" text-anchor=\"" + anchor + "\"" + extra + ">" + escape(s) + "</text>\n";
}

void rect(std::string& svg, double x, double y, double w, double h, const std::string& fill, const char* extra) {
  svg += "<rect x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"" + num(w) + "\" height=\"" + num(h) +
         "\" fill=\"" + fill + "\"" + extra + "/>\n";
}

void y_axis(std::string& svg, const box& b, double y_max, double y_step, const std::string& y_label) {
  rect(svg, b.x, b.y, b.w, b.h, "none", " stroke=\"#444\"");
  size_t widest = 1;
  for (double v = 0; v <= y_max * (1 + 1e-9); v += y_step) {
    const double py = b.y + b.h - b.h * v / y_max;
    svg += "<line x1=\"" + num(b.x) + "\" y1=\"" + num(py) + "\" x2=\"" + num(b.x + b.w) + "\" y2=\"" + num(py) +
           "\" stroke=\"#ddd\"/>\n";
    widest = std::max(widest, tick_label(v).size());
    text(svg, b.x - 4, py + 3, tick_label(v), "end", 10);
  }
  const double lx = b.x - 14 - 6.0 * static_cast<double>(widest);  // clear of the tick labels
  const std::string rot = " transform=\"rotate(-90 " + num(lx) + " " + num(b.y + b.h / 2) + ")\"";
  text(svg, lx, b.y + b.h / 2, y_label, "middle", 11, rot.c_str());
}

void axes(std::string& svg, const box& b, double x_max, double x_step, double y_max, double y_step,
          const std::string& x_label, const std::string& y_label) {
  y_axis(svg, b, y_max, y_step, y_label);
  for (double v = 0; v <= x_max * (1 + 1e-9); v += x_step) {
    const double px = b.x + b.w * v / x_max;
    svg += "<line x1=\"" + num(px) + "\" y1=\"" + num(b.y) + "\" x2=\"" + num(px) + "\" y2=\"" + num(b.y + b.h) +
           "\" stroke=\"#ddd\"/>\n";
    text(svg, px, b.y + b.h + 14, tick_label(v), "middle", 10);
  }
  text(svg, b.x + b.w / 2, b.y + b.h + 30, x_label, "middle");
}

double nice_step(double max) {
  if (!(max > 0.0) || !std::isfinite(max)) return 1.0;
  const double raw = max / 4.0, mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (raw <= m * mag * (1 + 1e-9)) return m * mag;
  return 10.0 * mag;
}

double nice_max(double max) {
  const double step = nice_step(max);
  return std::max(step, std::ceil(max / step) * step);
}

} // namespace conveyor::svg
