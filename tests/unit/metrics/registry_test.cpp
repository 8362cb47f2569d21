// The metrics registry and its Prometheus text: bucket placement at the bounds, label escaping,
// the exact exposition of a small case, and counts from many threads at once.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <limits>
#include <thread>

#include "actors/metrics.hpp"

namespace conveyor::actors {
namespace {

// The lines of `text` that start with `prefix`, joined by newlines.
std::string lines_starting(const std::string& text, const std::string& prefix) {
  std::string out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(pos, end - pos);
    if (line.rfind(prefix, 0) == 0) out += line + "\n";
    pos = end + 1;
  }
  return out;
}

BOOST_AUTO_TEST_CASE(a_value_on_a_bound_goes_into_that_bucket) {
  histogram_data h({0.1, 1.0});
  for (double v : {0.05, 0.1, 0.1000001, 1.0, 1.5, 100.0}) h.observe(v);
  BOOST_TEST(h.counts == (std::vector<uint64_t>{2, 2, 2}), boost::test_tools::per_element());
  BOOST_TEST(h.count == 6u);
  BOOST_TEST(h.sum == 0.05 + 0.1 + 0.1000001 + 1.0 + 1.5 + 100.0, boost::test_tools::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(bucket_bounds_are_vllms) {
  BOOST_TEST(metric_buckets::ttft.size() == 22u);
  BOOST_TEST(metric_buckets::ttft.front() == 0.001);
  BOOST_TEST(metric_buckets::ttft.back() == 2560.0);
  BOOST_TEST(metric_buckets::per_token.size() == 19u);
  BOOST_TEST(metric_buckets::per_token.back() == 80.0);
  BOOST_TEST(metric_buckets::request_latency.size() == 21u);
  BOOST_TEST(metric_buckets::request_latency.back() == 7680.0);
  for (const auto* b : {&metric_buckets::ttft, &metric_buckets::per_token, &metric_buckets::request_latency})
    BOOST_TEST(std::is_sorted(b->begin(), b->end()));
}

BOOST_AUTO_TEST_CASE(label_values_are_escaped) {
  BOOST_TEST(escape_label_value("plain") == "plain");
  BOOST_TEST(escape_label_value("a\"b") == "a\\\"b");
  BOOST_TEST(escape_label_value("back\\slash") == "back\\\\slash");
  BOOST_TEST(escape_label_value("two\nlines") == "two\\nlines");
  metrics m;
  m.count_rejection("we\"ird\\code\n");
  const std::string text = render_prometheus(m.snapshot(), {});
  BOOST_TEST(text.find("conveyor_request_rejected_total{code=\"we\\\"ird\\\\code\\n\"} 1\n") != std::string::npos, text);
}

BOOST_AUTO_TEST_CASE(values_are_written_as_prometheus_reads_them) {
  BOOST_TEST(format_value(3.0) == "3");
  BOOST_TEST(format_value(0.25) == "0.25");
  BOOST_TEST(format_value(0.1) == "0.1");
  BOOST_TEST(format_value(1e21) == "1e+21");
  BOOST_TEST(format_value(std::numeric_limits<double>::infinity()) == "+Inf");
  BOOST_TEST(format_value(std::numeric_limits<double>::quiet_NaN()) == "NaN");
}

BOOST_AUTO_TEST_CASE(every_code_and_reason_exists_from_the_start) {
  const metrics_snapshot s = metrics().snapshot();
  for (const char* code : {"bad_request", "too_long", "overloaded", "duplicate", "not_found", "shutting_down", "internal"})
    BOOST_TEST(s.rejected.at(code) == 0u);
  for (const char* reason : {"stop", "length", "cancelled", "deadline"}) BOOST_TEST(s.finished.at(reason) == 0u);
  BOOST_TEST(s.histograms().size() == 5u);
}

BOOST_AUTO_TEST_CASE(the_exposition_of_a_small_case_is_exact) {
  metrics m;
  m.count_rejection("bad_request");
  m.count_rejection("bad_request");
  m.count_rejection("overloaded");
  request_latencies a;
  a.ttft_s = 0.05;
  a.tpot_s = 0.02;
  a.e2e_s = 0.4;
  a.queue_s = 0.001;
  m.count_finished("length", a);
  request_latencies b;  // cancelled before its first token: no TTFT
  b.e2e_s = 2.0;
  b.queue_s = 2.0;
  m.count_finished("cancelled", b);
  m.observe_itl_gaps({0.02});
  m.observe_itl_gaps({0.5});
  m.observe_itl_gaps({});  // nothing
  m.count_failed();
  serving_stats n;
  n.running = 3;
  n.queued = 4;
  n.kv_usage = 0.25;
  n.prompt_tokens_total = 100;
  n.completion_tokens_total = 20;
  n.preemptions_total = 1;
  n.spec_drafts_total = 5;
  n.spec_draft_tokens_total = 12;
  n.spec_accepted_tokens_total = 7;
  n.spec_accepted_per_pos = {4, 2, 1};
  const std::string text = render_prometheus(m.snapshot(), n);

  BOOST_TEST(lines_starting(text, "conveyor_num_requests_") == "conveyor_num_requests_running 3\nconveyor_num_requests_waiting 4\n");
  BOOST_TEST(lines_starting(text, "conveyor_kv_cache_usage_perc") == "conveyor_kv_cache_usage_perc 0.25\n");
  BOOST_TEST(lines_starting(text, "conveyor_prompt_tokens_total") == "conveyor_prompt_tokens_total 100\n");
  BOOST_TEST(lines_starting(text, "conveyor_generation_tokens_total") == "conveyor_generation_tokens_total 20\n");
  BOOST_TEST(lines_starting(text, "conveyor_num_preemptions_total") == "conveyor_num_preemptions_total 1\n");
  BOOST_TEST(lines_starting(text, "conveyor_request_failed_total") == "conveyor_request_failed_total 1\n");
  BOOST_TEST(lines_starting(text, "conveyor_spec_decode_num_dr") ==
             "conveyor_spec_decode_num_drafts_total 5\nconveyor_spec_decode_num_draft_tokens_total 12\n");
  BOOST_TEST(lines_starting(text, "conveyor_spec_decode_num_accepted_tokens_total") == "conveyor_spec_decode_num_accepted_tokens_total 7\n");
  BOOST_TEST(lines_starting(text, "conveyor_spec_decode_num_accepted_tokens_per_pos_total") ==
             "conveyor_spec_decode_num_accepted_tokens_per_pos_total{position=\"0\"} 4\n"
             "conveyor_spec_decode_num_accepted_tokens_per_pos_total{position=\"1\"} 2\n"
             "conveyor_spec_decode_num_accepted_tokens_per_pos_total{position=\"2\"} 1\n");
  BOOST_TEST(lines_starting(text, "conveyor_request_success_total") ==
             "conveyor_request_success_total{finished_reason=\"cancelled\"} 1\n"
             "conveyor_request_success_total{finished_reason=\"deadline\"} 0\n"
             "conveyor_request_success_total{finished_reason=\"length\"} 1\n"
             "conveyor_request_success_total{finished_reason=\"stop\"} 0\n");
  BOOST_TEST(lines_starting(text, "conveyor_request_rejected_total{code=\"bad_request\"}") ==
             "conveyor_request_rejected_total{code=\"bad_request\"} 2\n");
  BOOST_TEST(lines_starting(text, "conveyor_request_rejected_total{code=\"overloaded\"}") ==
             "conveyor_request_rejected_total{code=\"overloaded\"} 1\n");
  BOOST_TEST(lines_starting(text, "# TYPE conveyor_request_rejected_total") == "# TYPE conveyor_request_rejected_total counter\n");

  // The whole E2E family, cumulative buckets: 0.4 falls in le=0.5, 2.0 in le=2.0.
  const std::string e2e = lines_starting(text, "conveyor_e2e_request_latency_seconds") +
                          lines_starting(text, "# TYPE conveyor_e2e");
  BOOST_TEST(e2e ==
             "conveyor_e2e_request_latency_seconds_bucket{le=\"0.3\"} 0\n"
             "conveyor_e2e_request_latency_seconds_bucket{le=\"0.5\"} 1\n"
             "conveyor_e2e_request_latency_seconds_bucket{le=\"0.8\"} 1\n"
             "conveyor_e2e_request_latency_seconds_bucket{le=\"1.0\"} 1\n"
             "conveyor_e2e_request_latency_seconds_bucket{le=\"1.5\"} 1\n"
             "conveyor_e2e_request_latency_seconds_bucket{le=\"2.0\"} 2\n"
             "conveyor_e2e_request_latency_seconds_bucket{le=\"2.5\"} 2\n"
             "conveyor_e2e_request_latency_seconds_bucket{le=\"5.0\"} 2\n"
             "conveyor_e2e_request_latency_seconds_bucket{le=\"10.0\"} 2\n"
             "conveyor_e2e_request_latency_seconds_bucket{le=\"15.0\"} 2\n"
             "conveyor_e2e_request_latency_seconds_bucket{le=\"20.0\"} 2\n"
             "conveyor_e2e_request_latency_seconds_bucket{le=\"30.0\"} 2\n"
             "conveyor_e2e_request_latency_seconds_bucket{le=\"40.0\"} 2\n"
             "conveyor_e2e_request_latency_seconds_bucket{le=\"50.0\"} 2\n"
             "conveyor_e2e_request_latency_seconds_bucket{le=\"60.0\"} 2\n"
             "conveyor_e2e_request_latency_seconds_bucket{le=\"120.0\"} 2\n"
             "conveyor_e2e_request_latency_seconds_bucket{le=\"240.0\"} 2\n"
             "conveyor_e2e_request_latency_seconds_bucket{le=\"480.0\"} 2\n"
             "conveyor_e2e_request_latency_seconds_bucket{le=\"960.0\"} 2\n"
             "conveyor_e2e_request_latency_seconds_bucket{le=\"1920.0\"} 2\n"
             "conveyor_e2e_request_latency_seconds_bucket{le=\"7680.0\"} 2\n"
             "conveyor_e2e_request_latency_seconds_bucket{le=\"+Inf\"} 2\n"
             "conveyor_e2e_request_latency_seconds_sum 2.4\n"
             "conveyor_e2e_request_latency_seconds_count 2\n"
             "# TYPE conveyor_e2e_request_latency_seconds histogram\n");
  // TTFT skips the request without a first token; TPOT and queue time count both.
  BOOST_TEST(lines_starting(text, "conveyor_time_to_first_token_seconds_count") == "conveyor_time_to_first_token_seconds_count 1\n");
  BOOST_TEST(lines_starting(text, "conveyor_time_to_first_token_seconds_bucket{le=\"0.06\"}") ==
             "conveyor_time_to_first_token_seconds_bucket{le=\"0.06\"} 1\n");
  BOOST_TEST(lines_starting(text, "conveyor_time_per_output_token_seconds_count") == "conveyor_time_per_output_token_seconds_count 2\n");
  BOOST_TEST(lines_starting(text, "conveyor_request_queue_time_seconds_count") == "conveyor_request_queue_time_seconds_count 2\n");
  BOOST_TEST(lines_starting(text, "conveyor_inter_token_latency_seconds_bucket{le=\"0.025\"}") ==
             "conveyor_inter_token_latency_seconds_bucket{le=\"0.025\"} 1\n");
  BOOST_TEST(lines_starting(text, "conveyor_inter_token_latency_seconds_sum") == "conveyor_inter_token_latency_seconds_sum 0.52\n");
}

BOOST_AUTO_TEST_CASE(a_batch_of_tokens_counts_one_gap_per_token) {
  metrics m;
  m.observe_itl_gaps({0.1, 0.1, 0.1});  // three tokens, each 0.1 s after the one before
  const metrics_snapshot s = m.snapshot();
  BOOST_TEST(s.itl.count == 3u);
  BOOST_TEST(s.itl.sum == 0.3, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(s.itl.counts[4] == 3u);  // bucket le=0.1
}

BOOST_AUTO_TEST_CASE(a_rejected_submit_counts_by_code_and_in_total) {
  metrics m;
  m.count_rejected_submit("duplicate");
  m.count_rejection("not_found");  // an error reply that was not a submit
  const metrics_snapshot s = m.snapshot();
  BOOST_TEST(s.rejected.at("duplicate") == 1u);
  BOOST_TEST(s.rejected.at("not_found") == 1u);
  BOOST_TEST(s.rejected_submits == 1u);
}

BOOST_AUTO_TEST_CASE(every_family_has_help_and_type_before_its_samples) {
  const std::string text = render_prometheus(metrics().snapshot(), {});
  std::string last_type;
  size_t pos = 0;
  int families = 0;
  while (pos < text.size()) {
    const size_t end = text.find('\n', pos);
    BOOST_REQUIRE(end != std::string::npos);  // every line ends with \n, the last one too
    const std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.rfind("# HELP ", 0) == 0) continue;
    if (line.rfind("# TYPE ", 0) == 0) {
      last_type = line.substr(7, line.find(' ', 7) - 7);
      ++families;
      continue;
    }
    BOOST_TEST(line.rfind(last_type, 0) == 0, line << " follows TYPE " << last_type);
  }
  BOOST_TEST(families == 18);
}

BOOST_AUTO_TEST_CASE(counts_from_many_threads_all_arrive) {
  metrics m;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&m] {
      for (int i = 0; i < 1000; ++i) {
        m.observe_itl_gaps({0.01});
        m.count_rejection("overloaded");
        m.count_finished("stop", request_latencies{0.1, 0.01, 0.5, 0.0});
      }
    });
  for (auto& t : threads) t.join();
  const metrics_snapshot s = m.snapshot();
  BOOST_TEST(s.itl.count == 4000u);
  BOOST_TEST(s.itl.counts[0] == 4000u);
  BOOST_TEST(s.rejected.at("overloaded") == 4000u);
  BOOST_TEST(s.finished.at("stop") == 4000u);
  BOOST_TEST(s.e2e.count == 4000u);
}

} // namespace
} // namespace conveyor::actors
