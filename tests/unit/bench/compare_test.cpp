// The --compare-batching report on hand-made results: the ratio, the table rows, the JSON keys
// and the SVG's bars and labels.
#include <boost/test/unit_test.hpp>

#include "tools/bench/compare.hpp"

namespace conveyor::bench {
namespace {

compare_run make_run(int32_t cap, const std::string& mode, double out_tps, double ttft_ms) {
  compare_run r;
  r.cap = cap;
  r.batching = mode;
  r.num_requests = 10;
  r.metrics.completed = 10;
  r.metrics.output_throughput = out_tps;
  r.metrics.ttft.median = ttft_ms;
  r.metrics.e2el.median = 2 * ttft_ms;
  return r;
}

const compare_setup setup{"tiny.gguf", "anyscale: 10 prompts", "--device null"};

} // namespace

BOOST_AUTO_TEST_SUITE(compare_report)

BOOST_AUTO_TEST_CASE(the_ratio_is_continuous_over_static_per_cap) {
  const std::vector<compare_run> runs{make_run(32, "static", 100, 50), make_run(32, "continuous", 150, 40),
                                      make_run(128, "static", 80, 60), make_run(128, "continuous", 200, 30)};
  BOOST_TEST(throughput_ratio(runs, 32) == 1.5);
  BOOST_TEST(throughput_ratio(runs, 128) == 2.5);
  BOOST_TEST(throughput_ratio(runs, 512) == 0.0);  // no such runs
  const auto j = compare_to_json(setup, runs);
  BOOST_TEST(j["runs"].size() == 4u);
  BOOST_TEST(j["output_throughput_ratio"]["128"].get<double>() == 2.5);
  BOOST_TEST(j["runs"][1]["batching"] == "continuous");
  BOOST_TEST(j["runs"][3]["median_ttft_ms"].get<double>() == 30.0);
  const std::string t = format_compare_table(setup, runs);
  BOOST_TEST(t.find("cap 32: 1.50x  cap 128: 2.50x") != std::string::npos, t);
  BOOST_TEST(t.find("WARNING") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_missing_or_empty_static_run_has_no_ratio_and_failures_are_flagged) {
  std::vector<compare_run> runs{make_run(32, "static", 0, 50), make_run(32, "continuous", 150, 40), make_run(64, "continuous", 9, 1)};
  runs[1].failed = 3;
  BOOST_TEST(throughput_ratio(runs, 32) == 0.0);
  BOOST_TEST(throughput_ratio(runs, 64) == 0.0);
  const std::string t = format_compare_table(setup, runs);
  BOOST_TEST(t.find("cap 32: n/a  cap 64: n/a") != std::string::npos, t);
  BOOST_TEST(t.find("WARNING: cap 32 continuous: 3 requests did not complete") != std::string::npos, t);
}

BOOST_AUTO_TEST_CASE(the_svg_has_one_bar_per_run_and_panel_and_the_ratio_labels) {
  const std::vector<compare_run> runs{make_run(32, "static", 100, 50), make_run(32, "continuous", 150, 40)};
  const std::string s = render_compare_svg(setup, runs);
  BOOST_TEST(s.find("<svg") == 0u);
  size_t bars = 0;
  for (size_t p = s.find("fill=\"#1f77b4\""); p != std::string::npos; p = s.find("fill=\"#1f77b4\"", p + 1)) ++bars;
  BOOST_TEST(bars == 4u);  // three panels and the legend
  BOOST_TEST(s.find(">1.50x<") != std::string::npos);
  BOOST_TEST(s.find(">cap 32<") != std::string::npos);
  BOOST_TEST(s.find(">150<") != std::string::npos);  // the continuous throughput bar's label
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::bench
