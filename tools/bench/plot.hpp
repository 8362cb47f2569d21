// Pure. A hand-written SVG of a `conveyor bench` run: four small panels with the empirical
// CDFs of TTFT, TPOT, ITL and E2EL (milliseconds), and below them output tokens per second over
// the run. Axes start at 0, ticks at 1/2/5 x 10^k steps; a CDF with a long tail (max > 1.5 x
// p99) has its axis end at p99; a panel with no samples says so.
#pragma once

#include <string>
#include <vector>

#include "tools/bench/metrics.hpp"

namespace conveyor::bench {

struct plot_input {
  std::string title;
  latency_samples samples;
  /// Output tokens/s per bin of `bin_s` seconds from the run's start.
  std::vector<double> output_rate;
  double bin_s = 0.0;
};

std::string render_svg(const plot_input& in);

} // namespace conveyor::bench
