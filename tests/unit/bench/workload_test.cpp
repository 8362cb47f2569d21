// Seeded workloads and arrivals of `conveyor bench`.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <sstream>

#include "engine/sim/workload.hpp"
#include "tools/bench/workload.hpp"

namespace conveyor::bench {
namespace {

workload_options random_opts(length_dist in, length_dist out) {
  workload_options o;
  o.num_prompts = 500;
  o.input_len = 32;
  o.output_len = 128;
  o.input_dist = in;
  o.output_dist = out;
  o.cap = 300;
  o.vocab_size = 49152;
  o.seed = 7;
  return o;
}

double mean_of(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0) / v.size(); }

} // namespace

BOOST_AUTO_TEST_SUITE(bench_workload)

BOOST_AUTO_TEST_CASE(random_fixed_lengths_are_exact_ids_safe_and_seeded) {
  const auto o = random_opts(length_dist::fixed, length_dist::fixed);
  const auto a = make_requests(o);
  BOOST_REQUIRE(a.size() == 500u);
  for (const bench_request& r : a) {
    BOOST_TEST(r.prompt_tokens.size() == 32u);
    BOOST_TEST(r.max_tokens == 128);
    BOOST_TEST(r.force_length);
    BOOST_TEST(r.messages.empty());
    for (int32_t id : r.prompt_tokens) BOOST_TEST((id >= 100 && id < 49152), id);
  }
  BOOST_TEST(make_requests(o)[17].prompt_tokens == a[17].prompt_tokens, boost::test_tools::per_element());
  auto other = o;
  other.seed = 8;
  BOOST_TEST(make_requests(other)[17].prompt_tokens != a[17].prompt_tokens);
}

BOOST_AUTO_TEST_CASE(length_distributions_stay_in_their_bounds) {
  std::mt19937_64 rng(1);
  std::vector<double> exp, logn;
  for (int i = 0; i < 5000; ++i) {
    const int32_t u = draw_length(rng, length_dist::uniform, 100, 0.25, 0.5, 1000);
    BOOST_TEST((u >= 75 && u <= 125), u);
    const int32_t e = draw_length(rng, length_dist::capped_exponential, 128, 0.0, 0.5, 512);
    BOOST_TEST((e >= 1 && e <= 512), e);
    exp.push_back(e);
    const int32_t l = draw_length(rng, length_dist::lognormal, 128, 0.0, 0.5, 200);
    BOOST_TEST((l >= 1 && l <= 200), l);
    logn.push_back(l);
  }
  // Capped at 4x the mean, the exponential keeps a mean a little under 128 (about 120).
  BOOST_TEST(mean_of(exp) > 110.0);
  BOOST_TEST(mean_of(exp) < 128.0);
  BOOST_TEST(std::count(logn.begin(), logn.end(), 200.0) > 0);  // clamped at the cap, not redrawn
  BOOST_TEST(draw_length(rng, length_dist::fixed, 9, 0.5, 0.5, 1) == 9);
}

BOOST_AUTO_TEST_CASE(anyscale_matches_the_simulator_workload) {
  workload_options o;
  o.name = workload_name::anyscale;
  o.num_prompts = 200;
  o.cap = 128;
  o.seed = 0xCADE;
  o.vocab_size = 49152;
  const auto reqs = make_requests(o);
  sim::workload_params p;
  p.kind = sim::workload_kind::anyscale;
  p.num_prompts = 200;
  p.input_len = 512;
  p.output_len = 128;
  p.cap = 128;
  p.seed = 0xCADE;
  const auto sim_reqs = sim::make_workload(p);
  BOOST_REQUIRE(reqs.size() == sim_reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    BOOST_TEST(reqs[i].prompt_tokens.size() == 512u);
    BOOST_TEST(reqs[i].max_tokens == sim_reqs[i].output_len);
    BOOST_TEST(reqs[i].max_tokens <= 128);
    BOOST_TEST(reqs[i].force_length);
    BOOST_TEST(std::all_of(reqs[i].prompt_tokens.begin(), reqs[i].prompt_tokens.end(), [](int32_t id) { return id >= 100 && id < 49152; }));
  }
}

BOOST_AUTO_TEST_CASE(chat_requests_are_system_then_alternating_turns_ending_with_user) {
  workload_options o;
  o.name = workload_name::chat;
  o.num_prompts = 100;
  o.input_len = 120;
  o.output_len = 64;
  o.cap = 100;
  std::set<size_t> turn_counts;
  for (const bench_request& r : make_requests(o)) {
    BOOST_REQUIRE(r.messages.size() >= 2u);
    BOOST_TEST(r.prompt_tokens.empty());
    BOOST_TEST(r.messages.front().role == "system");
    BOOST_TEST(r.messages.back().role == "user");
    for (size_t i = 1; i < r.messages.size(); ++i) BOOST_TEST(r.messages[i].role == (i % 2 == 1 ? "user" : "assistant"));
    BOOST_TEST((r.max_tokens >= 1 && r.max_tokens <= 100));
    BOOST_TEST(!r.force_length);
    turn_counts.insert(r.messages.size());
  }
  BOOST_TEST(turn_counts.size() == 3u);  // 0, 1 or 2 earlier exchanges
  o.ignore_eos = true;
  BOOST_TEST(make_requests(o)[0].force_length);
}

BOOST_AUTO_TEST_CASE(jsonl_file_reads_each_prompt_form_and_cycles) {
  workload_options o;
  o.name = workload_name::file;
  o.num_prompts = 5;
  o.output_len = 33;
  std::istringstream in(R"({"prompt": "hello", "max_tokens": 4}

{"messages": [{"role": "user", "content": "hi"}]}
{"prompt_tokens": [101, 102]}
)");
  const auto reqs = read_requests(in, o);
  BOOST_REQUIRE(reqs.size() == 5u);
  BOOST_TEST(reqs[0].prompt == "hello");
  BOOST_TEST(reqs[0].max_tokens == 4);
  BOOST_TEST(reqs[1].messages.size() == 1u);
  BOOST_TEST(reqs[1].messages[0].content == "hi");
  BOOST_TEST(reqs[1].max_tokens == 33);
  BOOST_TEST(reqs[2].prompt_tokens == (std::vector<int32_t>{101, 102}), boost::test_tools::per_element());
  BOOST_TEST(reqs[3].prompt == "hello");  // cycled
  BOOST_TEST(reqs[4].messages.size() == 1u);
}

BOOST_AUTO_TEST_CASE(jsonl_errors_name_the_line) {
  workload_options o;
  const auto error_of = [&](const std::string& text) {
    std::istringstream in(text);
    try {
      read_requests(in, o);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  BOOST_TEST(error_of("{\"prompt\": \"a\"}\nnot json\n").find("line 2") != std::string::npos);
  BOOST_TEST(error_of("{\"prompt\": \"a\", \"messages\": []}\n").find("exactly one") != std::string::npos);
  BOOST_TEST(error_of("{\"prompt\": \"a\", \"max_tokens\": 0}\n").find("max_tokens") != std::string::npos);
  BOOST_TEST(error_of("{\"prompt\": 5}\n").find("line 1") != std::string::npos);
  BOOST_TEST(error_of("{\"messages\": [{\"role\": \"user\"}]}\n").find("line 1") != std::string::npos);
  BOOST_TEST(error_of("\n\n").find("no prompts") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(arrivals_all_at_once_poisson_and_bursty) {
  BOOST_TEST(arrival_times(4, {}, 0) == (std::vector<double>{0, 0, 0, 0}), boost::test_tools::per_element());
  arrival_options poisson;
  poisson.request_rate = 50.0;
  const auto t = arrival_times(5000, poisson, 3);
  BOOST_TEST(t[0] == 0.0);
  BOOST_TEST(std::is_sorted(t.begin(), t.end()));
  std::vector<double> gaps;
  for (size_t i = 1; i < t.size(); ++i) gaps.push_back(t[i] - t[i - 1]);
  BOOST_TEST(mean_of(gaps) == 0.02, boost::test_tools::tolerance(0.05));  // within 5%
  const auto cv = [&](const std::vector<double>& g) {
    const double m = mean_of(g);
    double sq = 0;
    for (double x : g) sq += (x - m) * (x - m);
    return std::sqrt(sq / g.size()) / m;
  };
  BOOST_TEST(cv(gaps) == 1.0, boost::test_tools::tolerance(0.1));  // exponential: CV 1
  arrival_options bursty = poisson;
  bursty.burstiness = 0.25;  // gamma shape 0.25: CV 2
  const auto b = arrival_times(5000, bursty, 3);
  std::vector<double> bgaps;
  for (size_t i = 1; i < b.size(); ++i) bgaps.push_back(b[i] - b[i - 1]);
  BOOST_TEST(mean_of(bgaps) == 0.02, boost::test_tools::tolerance(0.1));
  BOOST_TEST(cv(bgaps) == 2.0, boost::test_tools::tolerance(0.1));
  BOOST_TEST(arrival_times(5000, poisson, 3) == t, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(validate_names_the_option) {
  workload_options o;
  BOOST_TEST(o.validate() == "");
  o.cap = 0;
  BOOST_TEST(o.validate().find("--cap") != std::string::npos);
  o = {};
  o.range_ratio = 1.0;
  BOOST_TEST(o.validate().find("--range-ratio") != std::string::npos);
  o = {};
  o.vocab_size = 50;
  BOOST_TEST(o.validate().find("--vocab-size") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::bench
