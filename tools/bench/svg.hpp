// Pure. The few SVG primitives conveyor's charts share (bench --plot, bench --compare-batching,
// trace): number formatting, XML escaping, text, rectangles, and a plotting box with 0-based
// axes, grid lines and tick labels.
#pragma once

#include <string>

namespace conveyor::svg {

struct box {
  double x, y, w, h;  // the plotting area, in SVG pixels (y grows downwards)
};

/// "%.1f": coordinates.
std::string num(double v);
/// "%.0f" from 100 up, else 3 significant digits: values printed on a chart.
std::string short_num(double v);
/// "%g": tick labels.
std::string tick_label(double v);
/// Escapes &, < and > for text content (attribute values here never hold quotes).
std::string escape(const std::string& s);
/// Appends " x,y" to a polyline's points (no leading space for the first point).
void point(std::string& pts, double x, double y);

/// `<svg>` header with a white background.
std::string begin(double width, double height);
void text(std::string& svg, double x, double y, const std::string& s, const char* anchor, int size = 11,
          const char* extra = "");
void rect(std::string& svg, double x, double y, double w, double h, const std::string& fill, const char* extra = "");

/// Frame, grid, ticks and labels for x in [0, x_max] and y in [0, y_max].
void axes(std::string& svg, const box& b, double x_max, double x_step, double y_max, double y_step,
          const std::string& x_label, const std::string& y_label);
/// Only the y axis (a bar chart labels its own x positions).
void y_axis(std::string& svg, const box& b, double y_max, double y_step, const std::string& y_label);

/// Tick step for an axis from 0 to `max`: 1, 2 or 5 x 10^k giving about four ticks.
double nice_step(double max);
/// `max` rounded up to a whole number of nice_step(max) (at least one step).
double nice_max(double max);

} // namespace conveyor::svg
