// The SVG: merged cells, hatched prompts, strips, legend, windows, and size on a big trace.
#include <boost/test/unit_test.hpp>

#include <sstream>

#include "tools/trace/svg.hpp"
#include "trace_lines.hpp"

namespace conveyor::trace {
namespace {

using namespace testing;

size_t count_of(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

trace_file parse(const std::string& text) {
  std::istringstream in(text);
  return parse_trace(in, "t");
}

// Job "a": a prompt in two chunks, then four decodes; job "b" joins in step 3 with one prompt
// chunk and decodes until step 6. A preemption is recorded in step 4.
trace_file small_trace() {
  return parse(header_line() + step_line(1, {{"a", 64, true}}, 1, 4) + step_line(2, {{"a", 20, true}}, 1, 6) +
               step_line(3, {{"a", 1, false}, {"b", 30, true}}) + step_line(4, {{"a", 1, false}, {"b", 1, false}}, 0, 9, 1) +
               step_line(5, {{"a", 1, false}, {"b", 1, false}}) + step_line(6, {{"a", 1, false}, {"b", 1, false}}));
}

} // namespace

BOOST_AUTO_TEST_SUITE(svg)

BOOST_AUTO_TEST_CASE(draws_one_rect_per_run_of_a_job_and_kind) {
  const trace_file t = small_trace();
  const std::string svg = render_svg(t, {0, 100, 1000});
  BOOST_TEST(svg.rfind("<svg ", 0) == 0);
  BOOST_TEST(svg.find("</svg>") != std::string::npos);
  // a: the two prompt chunks merge into one hatched rect, the four decodes into one solid rect.
  BOOST_TEST(count_of(svg, "<title>a prompt, step 1-2, 84 tokens</title>") == 1u);
  BOOST_TEST(count_of(svg, "<title>a decode, step 3-6, 4 tokens</title>") == 1u);
  BOOST_TEST(count_of(svg, "<title>b prompt, step 3, 30 tokens</title>") == 1u);
  BOOST_TEST(count_of(svg, "<title>b decode, step 4-6, 3 tokens</title>") == 1u);
  BOOST_TEST(count_of(svg, "<title>a ") + count_of(svg, "<title>b ") == 4u);
  // Job colours by order: a is palette 0 (hatch h0 for its prompt), b palette 1.
  BOOST_TEST(svg.find("fill=\"url(#h0)\"><title>a prompt") != std::string::npos);
  BOOST_TEST(svg.find("fill=\"#1f77b4\"><title>a decode") != std::string::npos);
  BOOST_TEST(svg.find("fill=\"url(#h1)\"><title>b prompt") != std::string::npos);
  BOOST_TEST(svg.find("fill=\"#ff7f0e\"><title>b decode") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(has_title_strips_preemptions_and_legend) {
  const std::string svg = render_svg(small_trace(), {0, 100, 1000});
  BOOST_TEST(svg.find("continuous batching: 6 steps, ") != std::string::npos);
  BOOST_TEST(svg.find("2 slots used, 1 preemptions") != std::string::npos);
  BOOST_TEST(svg.find(">waiting</text>") != std::string::npos);
  BOOST_TEST(svg.find(">KV used</text>") != std::string::npos);
  BOOST_TEST(svg.find("<title>step 4: 1 preempted</title>") != std::string::npos);
  BOOST_TEST(svg.find(">prompt chunk (or recompute)</text>") != std::string::npos);
  BOOST_TEST(svg.find(">decode token</text>") != std::string::npos);
  BOOST_TEST(svg.find(">preemption</text>") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_window_draws_only_its_steps) {
  const std::string svg = render_svg(small_trace(), {3, 2, 1000});
  BOOST_TEST(svg.find("continuous batching: 2 steps (4-5 of 6)") != std::string::npos);
  BOOST_TEST(count_of(svg, "<title>a decode, step 4-5, 2 tokens</title>") == 1u);
  BOOST_TEST(svg.find("prompt, step") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(an_empty_trace_still_draws) {
  const std::string svg = render_svg(parse(header_line("static")), {0, 400, 1000});
  BOOST_TEST(svg.find("static batching: 0 steps") != std::string::npos);
  BOOST_TEST(svg.find("no steps recorded") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(five_thousand_steps_of_256_slots_stay_a_few_megabytes) {
  // Continuous batching at its fullest: 256 running jobs, each a 512-token prompt and 300
  // decodes, a new one entering whenever one leaves.
  trace_file t;
  t.header = {"continuous", 256, 2048, 20000, 16, "synthetic"};
  std::vector<int32_t> job(256), age(256);
  for (int32_t s = 0; s < 256; ++s) {
    job[s] = s;
    age[s] = -(s * 300 / 256);  // staggered, so jobs leave one or two at a time
    t.jobs.push_back("job-" + std::to_string(s));
  }
  for (int64_t i = 0; i < 5000; ++i) {
    step_record r;
    r.step = i + 1;
    r.start_s = 0.02 * static_cast<double>(i);
    r.duration_ms = 20;
    for (int32_t s = 0; s < 256; ++s) {
      if (++age[s] > 300) {
        job[s] = static_cast<int32_t>(t.jobs.size());
        t.jobs.push_back("job-" + std::to_string(job[s]));
        age[s] = 0;
      }
      r.seqs.push_back({job[s], age[s] <= 0 ? 512 : 1, age[s] <= 0, true});
    }
    r.kv_blocks_used = 15000;
    r.running = 256;
    t.steps.push_back(std::move(r));
  }
  const std::string svg = render_svg(t, {0, t.steps.size(), 1600});
  BOOST_TEST_MESSAGE("5000 x 256 trace: " << svg.size() << " bytes, " << t.jobs.size() << " jobs");
  BOOST_TEST(svg.size() < size_t{4} << 20);
  BOOST_TEST(count_of(svg, "<rect") < 3 * t.jobs.size() + 100);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::trace
