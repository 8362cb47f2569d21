// Pure. Draws a window of an iteration trace as SVG, the picture used to explain continuous
// batching: rows are batch slots (tools/trace/slots.hpp), columns are steps (uniform width, not
// time), each job one colour; prompt chunks hatched over a light fill, decode tokens solid. Under
// the grid two strips: waiting jobs and KV usage, with preemptions marked. Consecutive cells of
// one job and kind in a row are one rect, so big traces stay small.
#pragma once

#include <cstddef>
#include <string>

#include "tools/trace/trace_file.hpp"

namespace conveyor::trace {

struct render_options {
  size_t first = 0;       ///< index into trace_file::steps of the first column
  size_t count = 0;       ///< columns (clamped to the steps there are)
  double width_px = 1200;  ///< whole picture
};

/// The SVG document for steps [first, first + count) of `t`.
std::string render_svg(const trace_file& t, const render_options& o);

} // namespace conveyor::trace
