#include "tools/trace/svg.hpp"

#include <algorithm>
#include <cstdio>
#include <span>

#include "tools/bench/svg.hpp"
#include "tools/trace/slots.hpp"

namespace conveyor::trace {
namespace {

// Tableau 10 and ten darker companions: neighbours in the palette differ in hue.
constexpr const char* palette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                                   "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#e6550d", "#31a354", "#ad494a",
                                   "#756bb1", "#843c39", "#d6616b", "#636363", "#8c6d31", "#3182bd"};
constexpr size_t palette_size = sizeof palette / sizeof palette[0];

std::string f(double v, int decimals = 1) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

using svg::escape;
using svg::text;

// The palette colour mixed 60% with white: the background of a hatched prompt cell.
std::string light(const char* hex) {
  unsigned r = 0, g = 0, b = 0;
  std::sscanf(hex + 1, "%02x%02x%02x", &r, &g, &b);
  auto mix = [](unsigned c) { return static_cast<unsigned>(c + (255 - c) * 0.6); };
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", mix(r), mix(g), mix(b));
  return buf;
}

// One hatch pattern per palette colour: <rect fill="url(#h3)"> is a prompt cell of colour 3.
std::string defs() {
  std::string d = "<defs>\n";
  for (size_t i = 0; i < palette_size; ++i)
    d += "<pattern id=\"h" + std::to_string(i) +
         "\" patternUnits=\"userSpaceOnUse\" width=\"4\" height=\"4\" patternTransform=\"rotate(45)\"><rect width=\"4\" "
         "height=\"4\" fill=\"" + light(palette[i]) + "\"/><line x1=\"1\" y1=\"0\" x2=\"1\" y2=\"4\" stroke=\"" +
         palette[i] + "\" stroke-width=\"1.5\"/></pattern>\n";
  return d + "</defs>\n";
}

struct grid {
  double left, top, col_w, row_h;
};

// A run of consecutive cells of one job and kind in one row.
struct run {
  int32_t job = -1;
  bool prompt = false;
  size_t begin = 0, end = 0;
  int64_t tokens = 0, drafts = 0;
};

void draw_run(std::string& out, const grid& g, int32_t slot, const run& r, const trace_file& t,
              std::span<const step_record> win) {
  const size_t colour = static_cast<size_t>(r.job) % palette_size;
  const double gap = g.row_h >= 5 ? 1.0 : 0.0;
  const std::string fill = r.prompt ? "url(#h" + std::to_string(colour) + ")" : palette[colour];
  const int64_t a = win[r.begin].step, b = win[r.end - 1].step;
  out += "<rect x=\"" + f(g.left + g.col_w * r.begin, 2) + "\" y=\"" + f(g.top + g.row_h * slot, 2) + "\" width=\"" +
         f(g.col_w * (r.end - r.begin), 2) + "\" height=\"" + f(g.row_h - gap, 2) + "\" fill=\"" + fill + "\"><title>" +
         escape(t.jobs[r.job]) + (r.prompt ? " prompt" : " decode") + ", step " + std::to_string(a) +
         (b != a ? "-" + std::to_string(b) : "") + ", " + std::to_string(r.tokens) + " tokens" +
         (r.drafts > 0 ? " (" + std::to_string(r.drafts) + " drafted)" : "") + "</title></rect>\n";
}

void draw_cells(std::string& out, const grid& g, const trace_file& t, std::span<const step_record> win,
                const slot_layout& lay) {
  std::vector<run> open(lay.num_slots);
  for (size_t i = 0; i < win.size(); ++i) {
    for (size_t k = 0; k < win[i].seqs.size(); ++k) {
      const seq_record& s = win[i].seqs[k];
      run& r = open[lay.slot[i][k]];
      if (r.job == s.job && r.prompt == s.prompt && r.end == i) {
        r.end = i + 1;
        r.tokens += s.num_tokens;
        r.drafts += s.drafts;
        continue;
      }
      if (r.job >= 0) draw_run(out, g, lay.slot[i][k], r, t, win);
      r = {s.job, s.prompt, i, i + 1, s.num_tokens, s.drafts};
    }
  }
  for (size_t slot = 0; slot < open.size(); ++slot)
    if (open[slot].job >= 0) draw_run(out, g, static_cast<int32_t>(slot), open[slot], t, win);
}

// A strip under the grid: value(i) in [0, max] per column, drawn as a filled step curve.
template <typename Value>
void strip(std::string& out, const grid& g, double y, double w, double h, size_t n, double max, const char* colour,
           const std::string& label, const std::string& max_label, Value value) {
  out += "<rect x=\"" + f(g.left) + "\" y=\"" + f(y) + "\" width=\"" + f(w) + "\" height=\"" + f(h) +
         "\" fill=\"#fafafa\" stroke=\"#999\"/>\n";
  const double base = y + h;
  std::string path = "M" + f(g.left, 2) + "," + f(base, 2);
  double prev = base;
  for (size_t i = 0; i < n; ++i) {
    const double v = std::clamp(value(i) / max, 0.0, 1.0), py = base - h * v, x = g.left + g.col_w * i;
    if (i > 0 && py == prev) continue;
    path += " L" + f(x, 2) + "," + f(prev, 2) + " L" + f(x, 2) + "," + f(py, 2);
    prev = py;
  }
  path += " L" + f(g.left + w, 2) + "," + f(prev, 2) + " L" + f(g.left + w, 2) + "," + f(base, 2) + " Z";
  out += "<path d=\"" + path + "\" fill=\"" + colour + "\" fill-opacity=\"0.5\" stroke=\"" + colour + "\"/>\n";
  text(out, g.left - 6, y + h / 2 + 4, label, "end", 11);
  text(out, g.left + w, y - 3, max_label, "end", 10, " fill=\"#444\"");
}

std::string title_of(const trace_file& t, std::span<const step_record> win) {
  std::string s = t.header.batching + " batching: " + std::to_string(win.size()) + " steps";
  if (win.size() < t.steps.size())
    s += " (" + std::to_string(win.front().step) + "-" + std::to_string(win.back().step) + " of " +
         std::to_string(t.steps.size()) + ")";
  if (!win.empty()) {
    const double secs = win.back().start_s + win.back().duration_ms / 1000.0 - win.front().start_s;
    s += secs < 1 ? ", " + f(secs * 1000.0, 1) + " ms" : ", " + f(secs, secs < 10 ? 2 : 1) + " s";
  }
  return s;
}

} // namespace

std::string render_svg(const trace_file& t, const render_options& o) {
  const size_t first = std::min(o.first, t.steps.size());
  const size_t count = std::min(o.count, t.steps.size() - first);
  const std::span<const step_record> win(t.steps.data() + first, count);
  const slot_layout lay = assign_slots(win, t.jobs.size());

  const double width = std::max(o.width_px, 400.0), left = 70, right = 20, top = 62;
  const int32_t rows = std::max(1, lay.num_slots);
  const double row_h = std::clamp(480.0 / rows, 2.0, 18.0), grid_w = width - left - right;
  const grid g{left, top, grid_w / static_cast<double>(std::max<size_t>(count, 1)), row_h};
  const double grid_h = row_h * rows, strip_h = 46;
  const double queue_y = top + grid_h + 36, kv_y = queue_y + strip_h + 16, legend_y = kv_y + strip_h + 28;
  const double height = legend_y + 16;

  std::string out = svg::begin(width, height) + defs();
  text(out, width / 2, 22, title_of(t, win), "middle", 15, " font-weight=\"bold\"");
  int64_t preempted = 0;
  for (const auto& s : win) preempted += s.preemptions;
  const trace_header& h = t.header;
  text(out, width / 2, 42,
       h.model + " | max_num_seqs " + std::to_string(h.max_num_seqs) + ", max_num_batched_tokens " +
           std::to_string(h.max_num_batched_tokens) + ", " + std::to_string(h.num_kv_blocks) + " KV blocks x " +
           std::to_string(h.block_size) + " | " + std::to_string(lay.num_slots) + " slots used, " +
           std::to_string(preempted) + " preemptions" + (t.truncated_tail ? " | last line cut short" : ""),
       "middle", 11, " fill=\"#444\"");

  out += "<rect x=\"" + f(left) + "\" y=\"" + f(top) + "\" width=\"" + f(grid_w) + "\" height=\"" + f(grid_h) +
         "\" fill=\"#f4f4f4\" stroke=\"#999\"/>\n";
  const std::string rot = " transform=\"rotate(-90 " + f(left - 14) + " " + f(top + grid_h / 2) + ")\"";
  text(out, left - 14, top + grid_h / 2, "batch slot", "middle", 11, rot.c_str());
  text(out, left - 4, top + std::min(row_h, 12.0) - 1, "0", "end", 9);
  text(out, left - 4, top + grid_h, std::to_string(rows - 1), "end", 9);
  if (count == 0) text(out, left + grid_w / 2, top + grid_h / 2, "no steps recorded", "middle", 13);
  draw_cells(out, g, t, win, lay);

  // Step axis: about ten ticks, at step ids that are multiples of a 1/2/5 x 10^k step.
  const int64_t tick = static_cast<int64_t>(std::max(1.0, svg::nice_step(static_cast<double>(count) / 2.5)));
  for (size_t i = 0; i < count; ++i) {
    if (win[i].step % tick != 0 && !(i == 0 && count < 3)) continue;
    const double x = left + g.col_w * (static_cast<double>(i) + 0.5);
    out += "<line x1=\"" + f(x) + "\" y1=\"" + f(top + grid_h) + "\" x2=\"" + f(x) + "\" y2=\"" + f(top + grid_h + 4) +
           "\" stroke=\"#444\"/>\n";
    text(out, x, top + grid_h + 15, std::to_string(win[i].step), "middle", 10);
  }
  text(out, left + grid_w / 2, top + grid_h + 28, "step (one column each; time is not to scale)", "middle", 11);

  int32_t max_waiting = 1;
  for (const auto& s : win) max_waiting = std::max(max_waiting, s.waiting);
  strip(out, g, queue_y, grid_w, strip_h, count, max_waiting, "#7f7f7f", "waiting", "max " + std::to_string(max_waiting),
        [&](size_t i) { return static_cast<double>(win[i].waiting); });
  for (size_t i = 0; i < count; ++i)
    if (win[i].preemptions > 0) {
      const double x = left + g.col_w * (static_cast<double>(i) + 0.5);
      out += "<line x1=\"" + f(x, 2) + "\" y1=\"" + f(queue_y) + "\" x2=\"" + f(x, 2) + "\" y2=\"" + f(queue_y + 8) +
             "\" stroke=\"#d62728\" stroke-width=\"2\"><title>step " + std::to_string(win[i].step) + ": " +
             std::to_string(win[i].preemptions) + " preempted</title></line>\n";
    }
  // KV usage as a fraction of the pool; the axis ends at the next of 1, 2, 5, 10, 20, 50, 100%
  // above the peak, so a big pool's small use still shows, and the label says the scale.
  const double blocks = std::max(1, h.num_kv_blocks);
  double peak = 0.0;
  for (const auto& s : win) peak = std::max(peak, s.kv_blocks_used / blocks);
  double kv_top = 1.0;
  for (double top : {0.01, 0.02, 0.05, 0.1, 0.2, 0.5})
    if (peak <= top) {
      kv_top = top;
      break;
    }
  strip(out, g, kv_y, grid_w, strip_h, count, kv_top, "#2ca02c", "KV used",
        "peak " + f(100.0 * peak, 1) + "%, axis 0-" + f(100.0 * kv_top, 0) + "% of " + std::to_string(h.num_kv_blocks) +
            " blocks",
        [&](size_t i) { return win[i].kv_blocks_used / blocks; });

  // Legend.
  double x = left;
  auto swatch = [&](const std::string& fill, const std::string& label) {
    out += "<rect x=\"" + f(x) + "\" y=\"" + f(legend_y - 10) + "\" width=\"22\" height=\"12\" fill=\"" + fill + "\"/>\n";
    text(out, x + 28, legend_y, label, "start");
    x += 40 + 6.2 * static_cast<double>(label.size());
  };
  swatch("url(#h0)", "prompt chunk (or recompute)");
  swatch(palette[0], "decode token");
  if (preempted > 0) {
    out += "<line x1=\"" + f(x + 11) + "\" y1=\"" + f(legend_y - 12) + "\" x2=\"" + f(x + 11) + "\" y2=\"" +
           f(legend_y + 2) + "\" stroke=\"#d62728\" stroke-width=\"2\"/>\n";
    text(out, x + 28, legend_y, "preemption", "start");
    x += 40 + 6.2 * 10;
  }
  text(out, x, legend_y, "one colour per job; a job keeps its row from its first to its last step", "start", 11,
       " fill=\"#444\"");
  out += "</svg>\n";
  return out;
}

} // namespace conveyor::trace
