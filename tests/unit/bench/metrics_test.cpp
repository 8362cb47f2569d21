// vLLM-style serving metrics on hand-made timelines with known answers. Times are binary
// fractions (0.125 s, ...) so every expected millisecond value is exact.
#include <boost/test/unit_test.hpp>

#include <cmath>

#include "tools/bench/metrics.hpp"

namespace conveyor::bench {
namespace {

namespace tt = boost::test_tools;

request_timeline completed(double send, std::vector<token_chunk> chunks, double done, int64_t prompt, int64_t output) {
  request_timeline r;
  r.sent = true;
  r.send_s = send;
  r.completed = true;
  r.chunks = std::move(chunks);
  r.end_s = done;
  r.prompt_tokens = prompt;
  r.output_tokens = output;
  return r;
}

request_timeline refused(double send, double end) {
  request_timeline r;
  r.sent = true;
  r.send_s = send;
  r.end_s = end;
  return r;
}

// A: sent at 0; tokens events at 0.125 (1), 0.25 (1), 0.5 (2 tokens in one event); done 0.625.
//    TTFT 125, E2EL 625, TPOT (625 - 125) / 3, ITL 125 and 250 (the 2-token event is one gap).
// B: sent at 0.25; a one-token stream at 0.5; done 0.75. TTFT 250, E2EL 500, no TPOT, no ITL.
// C: sent at 0.125, refused at 0.25: counted in the duration only.
std::vector<request_timeline> three() {
  return {completed(0.0, {{0.125, 1}, {0.25, 1}, {0.5, 2}}, 0.625, 10, 4),
          completed(0.25, {{0.5, 1}}, 0.75, 6, 1), refused(0.125, 0.25)};
}

const std::vector<double> p90_p99{90.0, 99.0};

} // namespace

BOOST_AUTO_TEST_SUITE(bench_metrics_suite)

BOOST_AUTO_TEST_CASE(describe_matches_numpy) {
  const metric_stats s = describe({4.0, 1.0, 3.0, 2.0}, {50.0, 90.0, 99.0});
  BOOST_TEST(s.mean == 2.5);
  BOOST_TEST(s.median == 2.5);
  BOOST_TEST(s.std == std::sqrt(1.25), tt::tolerance(1e-12));  // np.std, ddof 0
  BOOST_REQUIRE(s.percentiles.size() == 3u);
  BOOST_TEST(s.percentiles[0].second == 2.5);
  BOOST_TEST(s.percentiles[1].second == 3.7, tt::tolerance(1e-12));
  BOOST_TEST(s.percentiles[2].second == 3.97, tt::tolerance(1e-12));
  const metric_stats one = describe({7.0}, {99.0});
  BOOST_TEST(one.mean == 7.0);
  BOOST_TEST(one.std == 0.0);
  BOOST_TEST(one.percentiles[0].second == 7.0);
}

BOOST_AUTO_TEST_CASE(empty_sample_gives_zeros_like_vllm) {
  const metric_stats s = describe({}, p90_p99);
  BOOST_TEST(s.mean == 0.0);
  BOOST_TEST(s.median == 0.0);
  BOOST_TEST(s.std == 0.0);
  BOOST_TEST(s.percentiles.size() == 2u);
  BOOST_TEST(s.percentiles[1].second == 0.0);
}

BOOST_AUTO_TEST_CASE(hand_made_timelines_give_the_known_metrics) {
  const bench_metrics m = compute_metrics(three(), {}, p90_p99);
  BOOST_TEST(m.completed == 2);
  BOOST_TEST(m.total_input_tokens == 16);
  BOOST_TEST(m.total_output_tokens == 5);
  BOOST_TEST(m.duration_s == 0.75);  // first send 0 to last end 0.75
  BOOST_TEST(m.request_throughput == 2.0 / 0.75, tt::tolerance(1e-12));
  BOOST_TEST(m.output_throughput == 5.0 / 0.75, tt::tolerance(1e-12));
  BOOST_TEST(m.total_token_throughput == 28.0, tt::tolerance(1e-12));

  BOOST_TEST(m.samples.ttft_ms == (std::vector<double>{125.0, 250.0}), tt::per_element());
  BOOST_TEST(m.ttft.mean == 187.5);
  BOOST_TEST(m.ttft.median == 187.5);
  BOOST_TEST(m.ttft.std == 62.5);
  BOOST_TEST(m.ttft.percentiles[0].second == 237.5, tt::tolerance(1e-12));
  BOOST_TEST(m.ttft.percentiles[1].second == 248.75, tt::tolerance(1e-12));

  BOOST_TEST(m.samples.tpot_ms.size() == 1u);  // B has one output token: no TPOT
  BOOST_TEST(m.tpot.mean == 500.0 / 3.0, tt::tolerance(1e-12));
  BOOST_TEST(m.tpot.percentiles[1].second == 500.0 / 3.0, tt::tolerance(1e-12));
  BOOST_TEST(m.tpot.std == 0.0);

  BOOST_TEST(m.samples.itl_ms == (std::vector<double>{125.0, 250.0}), tt::per_element());
  BOOST_TEST(m.itl.mean == 187.5);

  BOOST_TEST(m.samples.e2el_ms == (std::vector<double>{625.0, 500.0}), tt::per_element());
  BOOST_TEST(m.e2el.median == 562.5);
  BOOST_TEST(m.e2el.percentiles[1].second == 623.75, tt::tolerance(1e-12));
  BOOST_TEST(!m.request_goodput.has_value());
}

BOOST_AUTO_TEST_CASE(one_token_streams_have_ttft_and_e2el_but_no_tpot_or_itl) {
  const bench_metrics m = compute_metrics({completed(0.0, {{0.25, 1}}, 0.5, 3, 1), completed(0.0, {{0.125, 1}}, 0.125, 3, 1)}, {}, p90_p99);
  BOOST_TEST(m.completed == 2);
  BOOST_TEST(m.samples.ttft_ms == (std::vector<double>{250.0, 125.0}), tt::per_element());
  BOOST_TEST(m.samples.tpot_ms.empty());
  BOOST_TEST(m.samples.itl_ms.empty());
  BOOST_TEST(m.tpot.mean == 0.0);
  BOOST_TEST(m.itl.percentiles[1].second == 0.0);
  BOOST_TEST(m.e2el.mean == 312.5);
  BOOST_TEST(m.output_throughput == 4.0);  // 2 tokens over 0.5 s
}

BOOST_AUTO_TEST_CASE(zero_completed_run_reports_zeros_and_its_duration) {
  const goodput_slo slo{100.0, std::nullopt, std::nullopt};
  const bench_metrics m = compute_metrics({refused(0.0, 0.25), refused(0.125, 0.5)}, slo, p90_p99);
  BOOST_TEST(m.completed == 0);
  BOOST_TEST(m.total_output_tokens == 0);
  BOOST_TEST(m.duration_s == 0.5);
  BOOST_TEST(m.request_throughput == 0.0);
  BOOST_TEST(m.ttft.mean == 0.0);
  BOOST_TEST(m.e2el.percentiles[1].second == 0.0);
  BOOST_REQUIRE(m.request_goodput.has_value());
  BOOST_TEST(*m.request_goodput == 0.0);

  const bench_metrics none = compute_metrics({request_timeline{}}, slo, p90_p99);  // never sent
  BOOST_TEST(none.duration_s == 0.0);
  BOOST_TEST(none.request_throughput == 0.0);
  BOOST_TEST(*none.request_goodput == 0.0);
}

BOOST_AUTO_TEST_CASE(goodput_counts_requests_meeting_every_slo_inclusive) {
  const auto g = [](goodput_slo slo) { return compute_metrics(three(), slo, p90_p99); };
  // No SLO: no goodput at all (vLLM writes null).
  BOOST_TEST(!g({}).request_goodput.has_value());
  BOOST_TEST(g({}).good_completed == 0);
  // TTFT exactly at the SLO counts as met: A (125) is good, B (250) is not.
  BOOST_TEST(g({125.0, std::nullopt, std::nullopt}).good_completed == 1);
  BOOST_TEST(*g({125.0, std::nullopt, std::nullopt}).request_goodput == 1.0 / 0.75, tt::tolerance(1e-12));
  // TPOT 0: only B, whose single token makes its TPOT 0 for goodput.
  BOOST_TEST(g({std::nullopt, 0.0, std::nullopt}).good_completed == 1);
  // E2EL exactly met by B (500), missed by A (625).
  BOOST_TEST(g({std::nullopt, std::nullopt, 500.0}).good_completed == 1);
  // All miss.
  const bench_metrics miss = g({100.0, std::nullopt, std::nullopt});
  BOOST_TEST(miss.good_completed == 0);
  BOOST_REQUIRE(miss.request_goodput.has_value());
  BOOST_TEST(*miss.request_goodput == 0.0);
  // Every SLO must hold: A's TPOT (166.67) misses 150 although its TTFT is fine.
  BOOST_TEST(g({250.0, 150.0, std::nullopt}).good_completed == 1);
  BOOST_TEST(g({250.0, 170.0, 625.0}).good_completed == 2);
  // The refused request C never counts.
  BOOST_TEST(g({1e9, 1e9, 1e9}).good_completed == 2);
}

BOOST_AUTO_TEST_CASE(a_request_without_tokens_has_no_ttft_sample_and_its_e2el_stands_in_for_goodput) {
  const std::vector<request_timeline> r{completed(0.0, {}, 0.25, 4, 0)};
  const bench_metrics m = compute_metrics(r, {250.0, std::nullopt, std::nullopt}, p90_p99);
  BOOST_TEST(m.completed == 1);
  BOOST_TEST(m.samples.ttft_ms.empty());
  BOOST_TEST(m.samples.e2el_ms.size() == 1u);
  BOOST_TEST(m.good_completed == 1);
  BOOST_TEST(compute_metrics(r, {249.0, std::nullopt, std::nullopt}, p90_p99).good_completed == 0);
}

BOOST_AUTO_TEST_CASE(parse_goodput_reads_vllm_items) {
  goodput_slo slo;
  BOOST_TEST(parse_goodput({"ttft:500", "tpot:50.5", "e2el:0"}, slo) == "");
  BOOST_TEST(*slo.ttft_ms == 500.0);
  BOOST_TEST(*slo.tpot_ms == 50.5);
  BOOST_TEST(*slo.e2el_ms == 0.0);
  for (const std::string bad : {"itl:5", "ttft", "ttft:", "ttft:-1", "ttft:5ms", "tpot:nan"}) {
    goodput_slo s;
    BOOST_TEST(parse_goodput({bad}, s).find(bad) != std::string::npos, bad);
  }
}

BOOST_AUTO_TEST_CASE(output_rate_series_bins_tokens_by_delivery_time) {
  double bin_s = 0.0;
  const std::vector<double> rate = output_rate_series(three(), 3, bin_s);
  BOOST_TEST(bin_s == 0.25);
  // 0.125 -> bin 0 (1 token); 0.25 -> bin 1 (1); 0.5 -> bin 2 (2 + 1). Per second: / 0.25.
  BOOST_TEST(rate == (std::vector<double>{4.0, 4.0, 12.0}), tt::per_element());
  BOOST_TEST(output_rate_series({}, 3, bin_s).empty());
  BOOST_TEST(bin_s == 0.0);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::bench
