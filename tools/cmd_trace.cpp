// `conveyor trace FILE -o OUT.svg`: draws an iteration trace written by `conveyor serve --trace`
// (rows = batch slots, columns = steps, one colour per job, prompt chunks hatched, decode solid,
// waiting jobs and KV usage underneath). Long traces default to their first 400 steps; --from and
// --steps pick a window. A file that is not a trace of this version: one-line error, exit 2.
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>
#include <optional>

#include "tools/command.hpp"
#include "tools/commands.hpp"
#include "tools/trace/svg.hpp"
#include "tools/trace/trace_file.hpp"

namespace conveyor::tools {
namespace {

constexpr size_t default_steps = 400;

struct trace_opts {
  std::string in, out;
  std::optional<int64_t> from, steps;
  double width = 1200;
};

int run_trace(const trace_opts& o) {
  trace::trace_file t;
  try {
    t = trace::read_trace(o.in);
  } catch (const trace::trace_format_error& e) {
    spdlog::error("conveyor trace: {}", e.what());
    return 2;
  }
  if (t.truncated_tail) spdlog::warn("conveyor trace: {}: the last line is cut short (the server was killed, or a write failed); it is left out", o.in);
  size_t first = 0;
  if (o.from) {
    auto it = std::lower_bound(t.steps.begin(), t.steps.end(), *o.from,
                               [](const trace::step_record& s, int64_t v) { return s.step < v; });
    if (it == t.steps.end()) {
      spdlog::error("conveyor trace: --from {}: {} has no step at or after it ({})", *o.from, o.in,
                    t.steps.empty() ? "no steps at all"
                                    : "steps " + std::to_string(t.steps.front().step) + ".." + std::to_string(t.steps.back().step));
      return 2;
    }
    first = static_cast<size_t>(it - t.steps.begin());
  }
  size_t count = t.steps.size() - first;
  if (o.steps) {
    count = std::min(count, static_cast<size_t>(*o.steps));
  } else if (count > default_steps) {
    spdlog::info("conveyor trace: {} has {} steps{}; drawing the first {} (--steps N draws more)", o.in, count,
                 o.from ? " from step " + std::to_string(t.steps[first].step) : std::string(), default_steps);
    count = default_steps;
  }
  const std::string svg = trace::render_svg(t, {first, count, o.width});
  if (!write_output("trace", error_sink::log, "-o", o.out, svg)) return 2;
  spdlog::info("conveyor trace: wrote {} ({} bytes; {} steps, {} jobs in the trace)", o.out, svg.size(), count,
               t.jobs.size());
  return 0;
}

} // namespace

void register_trace(CLI::App& app, int& exit_code) {
  auto [cmd, o] = add_command<trace_opts>(app, exit_code, "trace", "Draw an iteration trace (`conveyor serve --trace FILE`) as SVG",
                                          run_trace);
  cmd->add_option("file", o->in, "The trace (JSON Lines)")->required();
  cmd->add_option("-o,--output", o->out, "SVG file to write")->required();
  cmd->add_option("--from", o->from, "First step to draw (the trace's step numbers)");
  cmd->add_option("--steps", o->steps, "Steps to draw (default: all, at most 400)")->check(CLI::PositiveNumber);
  cmd->add_option("--width", o->width, "Picture width in pixels")->check(CLI::Range(400.0, 100000.0))->capture_default_str();
}

} // namespace conveyor::tools
