// The bench's JSON (vLLM key names), table, progress line and SVG plot.
#include <boost/property_tree/ptree.hpp>
#include <boost/property_tree/xml_parser.hpp>
#include <boost/test/unit_test.hpp>

#include <sstream>

#include "tools/bench/plot.hpp"
#include "tools/bench/report.hpp"
#include "tools/bench/svg.hpp"

namespace conveyor::bench {
namespace {

driver_result two_requests() {
  driver_result d;
  d.run_prefix = "bench-test";
  d.model = "smollm2";
  request_timeline a;
  a.sent = a.completed = true;
  a.chunks = {{0.125, 1}, {0.25, 2}};
  a.end_s = 0.5;
  a.prompt_tokens = 8;
  a.output_tokens = 3;
  request_timeline b;
  b.sent = true;
  b.end_s = 0.25;
  d.timelines = {a, b};
  d.rejected = 1;
  d.streamed_output_tokens = 3;
  d.finish_reasons["length"] = 1;
  return d;
}

} // namespace

BOOST_AUTO_TEST_SUITE(bench_report)

BOOST_AUTO_TEST_CASE(percentile_keys_follow_vllm) {
  BOOST_TEST(percentile_key(99.0) == "p99");
  BOOST_TEST(percentile_key(50.0) == "p50");
  BOOST_TEST(percentile_key(99.9) == "p99.9");
}

BOOST_AUTO_TEST_CASE(json_has_vllm_keys_and_conveyor_extras) {
  run_settings s;
  const driver_result d = two_requests();
  const bench_metrics m = compute_metrics(d.timelines, s.slo, s.percentiles);
  const auto j = to_json(s, d, m, false);
  for (const char* key : {"date", "backend", "model_id", "num_prompts", "request_rate", "burstiness", "max_concurrency", "duration",
                          "completed", "total_input_tokens", "total_output_tokens", "request_throughput", "request_goodput",
                          "output_throughput", "total_token_throughput", "rejected", "failed", "num_gaps", "workload", "arrivals", "seed"})
    BOOST_TEST(j.contains(key), key);
  for (const char* metric : {"ttft", "tpot", "itl", "e2el"})
    for (const char* stat : {"mean", "median", "std", "p90", "p99"})
      BOOST_TEST(j.contains(std::string(stat) + "_" + metric + "_ms"), stat << "_" << metric);
  BOOST_TEST(j["completed"] == 1);
  BOOST_TEST(j["rejected"] == 1);
  BOOST_TEST(j["total_output_tokens"] == 3);
  BOOST_TEST(j["duration"].get<double>() == 0.5);
  BOOST_TEST(j["mean_ttft_ms"].get<double>() == 125.0);
  BOOST_TEST(j["mean_tpot_ms"].get<double>() == 187.5);  // (500 - 125) / 2
  BOOST_TEST(j["request_goodput"].is_null());  // no SLO given
  BOOST_TEST(j["request_rate"] == "inf");
  BOOST_TEST(j["max_concurrency"].is_null());
  BOOST_TEST(j["arrivals"] == "all-at-once");
  BOOST_TEST(!j.contains("ttfts"));

  s.slo.ttft_ms = 200.0;
  s.max_concurrency = 4;
  s.arrivals.request_rate = 10.0;
  s.percentiles = {99.9};
  const auto k = to_json(s, d, compute_metrics(d.timelines, s.slo, s.percentiles), true);
  BOOST_TEST(k["request_goodput"].get<double>() == 2.0);  // 1 good request in 0.5 s
  BOOST_TEST(k["goodput_slo_ms"]["ttft"].get<double>() == 200.0);
  BOOST_TEST(k["max_concurrency"] == 4);
  BOOST_TEST(k["request_rate"].get<double>() == 10.0);
  BOOST_TEST(k["arrivals"] == "poisson");
  BOOST_TEST(k.contains("p99.9_itl_ms"));
  BOOST_TEST(!k.contains("p99_itl_ms"));
  BOOST_TEST(k["ttfts"].size() == 2u);
  BOOST_TEST(k["itls"][0].size() == 1u);
  BOOST_TEST(k["itls"][0][0].get<double>() == 0.125);
  BOOST_TEST(k["output_lens"][1] == 0);
}

BOOST_AUTO_TEST_CASE(table_has_the_vllm_sections) {
  run_settings s;
  const driver_result d = two_requests();
  const std::string t = format_table(s, d, compute_metrics(d.timelines, s.slo, s.percentiles));
  for (const char* needle : {"Serving Benchmark Result", "Successful requests:", "Rejected (overloaded):", "Time to First Token",
                             "Mean TTFT (ms):", "P99 TPOT (ms):", "P90 ITL (ms):", "Median E2EL (ms):", "Output token throughput (tok/s):"})
    BOOST_TEST(t.find(needle) != std::string::npos, needle);
  BOOST_TEST(t.find("Request goodput") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(progress_line_shows_the_fraction_done) {
  const std::string half = progress_line({5, 8, 10, 1000, 2.0}, 10);
  BOOST_TEST(half.substr(0, 12) == "[=====>    ]");
  BOOST_TEST(half.find("5/10 done") != std::string::npos);
  BOOST_TEST(half.find("500 tok/s") != std::string::npos);
  BOOST_TEST(progress_line({10, 10, 10, 0, 1.0}, 4).substr(0, 6) == "[====]");
}

BOOST_AUTO_TEST_CASE(nice_steps_are_1_2_5_times_a_power_of_ten) {
  BOOST_TEST(svg::nice_step(10.0) == 5.0);
  BOOST_TEST(svg::nice_step(1.0) == 0.5, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(svg::nice_step(400.0) == 100.0);
  BOOST_TEST(svg::nice_step(7.0) == 2.0);
  BOOST_TEST(svg::nice_step(0.0) == 1.0);
}

BOOST_AUTO_TEST_CASE(svg_is_well_formed_with_five_labelled_panels) {
  plot_input in;
  in.title = "bench <null> & co";
  in.samples.ttft_ms = {1.0, 2.0, 3.0};
  in.samples.e2el_ms = {10.0, 20.0};
  for (int i = 0; i < 5000; ++i) in.samples.itl_ms.push_back(i * 0.01);
  in.output_rate = {100.0, 250.0, 50.0};
  in.bin_s = 0.5;
  const std::string svg = render_svg(in);
  std::istringstream s(svg);
  boost::property_tree::ptree tree;
  BOOST_REQUIRE_NO_THROW(boost::property_tree::read_xml(s, tree));
  BOOST_TEST(tree.count("svg") == 1u);
  for (const char* needle : {"TTFT CDF (3 requests)", "TPOT CDF (0 requests)", "ITL CDF (5000 gaps)", "E2EL CDF (2 requests)",
                             "Output throughput over time", "TTFT (ms)", "output tokens/s", "no samples", "&lt;null&gt; &amp; co"})
    BOOST_TEST(svg.find(needle) != std::string::npos, needle);
  BOOST_TEST(svg.size() < 200000u);  // 5000 ITL samples are thinned to a few hundred points
}

BOOST_AUTO_TEST_CASE(a_long_tail_ends_the_axis_at_p99) {
  plot_input in;
  in.samples.ttft_ms.assign(300, 2.0);
  in.samples.ttft_ms.push_back(1000.0);
  in.samples.e2el_ms = {1.0, 2.0, 3.0};
  const std::string svg = render_svg(in);
  BOOST_TEST(svg.find("TTFT (ms), axis to p99") != std::string::npos);
  BOOST_TEST(svg.find("max 1000") != std::string::npos);
  BOOST_TEST(svg.find("E2EL (ms), axis") == std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::bench
