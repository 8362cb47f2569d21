// engine/sim: workloads, the cost model, metrics, and small end-to-end simulations.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>

#include "engine/sim/metrics.hpp"
#include "engine/sim/simulator.hpp"
#include "engine/sim/workload.hpp"

using namespace conveyor;
using namespace conveyor::sim;

namespace {

sim_config small_config(batching_mode mode) {
  sim_config cfg;
  cfg.sched.max_num_seqs = 32;
  cfg.sched.max_num_batched_tokens = 2048;
  cfg.sched.max_model_len = 1024;
  cfg.sched.batching = mode;
  cfg.num_kv_blocks = 1024;
  return cfg;
}

workload_params anyscale(int32_t cap, int32_t n = 200) {
  workload_params p;
  p.num_prompts = n;
  p.input_len = 256;
  p.cap = cap;
  p.seed = 7;
  return p;
}

} // namespace

BOOST_AUTO_TEST_SUITE(simulator)

BOOST_AUTO_TEST_CASE(anyscale_outputs_are_capped_exponential_and_all_at_time_zero) {
  auto p = anyscale(32, 2000);
  const auto reqs = make_workload(p);
  BOOST_TEST(reqs.size() == 2000u);
  double sum = 0.0;
  for (const auto& r : reqs) {
    BOOST_TEST(r.arrival_s == 0.0);
    BOOST_TEST(r.prompt.size() == 256u);
    BOOST_TEST((r.output_len >= 1 && r.output_len <= 32));
    sum += r.output_len;
  }
  // Exponential(mean 128) conditioned on <= 32 is close to uniform: mean ~15.
  BOOST_TEST(sum / 2000 > 13.0);
  BOOST_TEST(sum / 2000 < 17.5);
  // Same seed, same workload.
  BOOST_TEST(make_workload(p)[5].prompt == reqs[5].prompt);
}

BOOST_AUTO_TEST_CASE(poisson_arrivals_have_the_requested_rate) {
  workload_params p;
  p.kind = workload_kind::poisson;
  p.num_prompts = 4000;
  p.request_rate = 10.0;
  BOOST_TEST(p.validate() == "");
  const auto reqs = make_workload(p);
  BOOST_TEST(std::is_sorted(reqs.begin(), reqs.end(),
                            [](const auto& a, const auto& b) { return a.arrival_s < b.arrival_s; }));
  const double rate = 4000 / reqs.back().arrival_s;
  BOOST_TEST(rate > 9.5);
  BOOST_TEST(rate < 10.5);
  p.request_rate = std::numeric_limits<double>::infinity();
  BOOST_TEST(p.validate().find("request_rate") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(cost_model_counts_tokens_and_attended_context) {
  cost_model c;
  c.fixed_ms = 10.0;
  c.per_token_ms = 1.0;
  c.per_context_token_us = 1000.0; // 1 ms per pair, to make the sum visible
  step_plan plan;
  scheduled_seq prefill;
  prefill.tokens = {1, 2, 3}; // positions 0..2 attend to 1 + 2 + 3 = 6
  scheduled_seq decode;
  decode.num_computed_tokens = 9;
  decode.tokens = {4}; // position 9 attends to 10
  plan.seqs = {prefill, decode};
  BOOST_TEST(c.step_s(plan) == (10.0 + 4.0 + 16.0) / 1000.0, boost::test_tools::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(percentile_interpolates_like_numpy) {
  BOOST_TEST(percentile({1.0, 2.0, 3.0, 4.0}, 50.0) == 2.5);
  BOOST_TEST(percentile({1.0, 2.0, 3.0, 4.0}, 99.0) == 3.97, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(percentile({}, 50.0) == 0.0);
}

BOOST_AUTO_TEST_CASE(every_request_completes_with_its_output_length) {
  const auto reqs = make_workload(anyscale(128));
  const sim_result r = run_simulation(small_config(batching_mode::continuous), reqs);
  int64_t want = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    BOOST_TEST(r.requests[i].num_output_tokens == reqs[i].output_len);
    BOOST_TEST(r.requests[i].first_token_s > 0.0);
    BOOST_TEST(r.requests[i].finish_s >= r.requests[i].first_token_s);
    want += reqs[i].output_len;
  }
  const sim_metrics m = summarize(r);
  BOOST_TEST(m.completed == 200);
  BOOST_TEST(m.total_output_tokens == want);
  BOOST_TEST(m.duration_s == r.end_s);
  BOOST_TEST(m.output_throughput == want / m.duration_s, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(m.median_ttft_ms <= m.p99_ttft_ms);
}

BOOST_AUTO_TEST_CASE(single_request_timings_follow_the_cost_model) {
  workload_params p;
  p.kind = workload_kind::fixed;
  p.num_prompts = 1;
  p.input_len = 10;
  p.output_len = 4;
  sim_config cfg = small_config(batching_mode::continuous);
  cfg.cost = {/*fixed_ms=*/10.0, /*per_token_ms=*/1.0, /*per_context_token_us=*/0.0};
  const sim_metrics m = summarize(run_simulation(cfg, make_workload(p)));
  // Prefill step: 10 + 10 ms; then three decode steps of 11 ms.
  BOOST_TEST(m.mean_ttft_ms == 20.0, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(m.mean_tpot_ms == 11.0, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(m.duration_s == 0.053, boost::test_tools::tolerance(1e-9));
}

BOOST_AUTO_TEST_CASE(continuous_beats_static_more_as_the_cap_grows) {
  double previous_gain = 0.0;
  for (int32_t cap : {32, 512}) {
    BOOST_TEST_CONTEXT("cap " << cap) {
      const auto reqs = make_workload(anyscale(cap));
      const auto cont = summarize(run_simulation(small_config(batching_mode::continuous), reqs));
      const auto stat = summarize(run_simulation(small_config(batching_mode::static_batch), reqs));
      const double gain = cont.total_token_throughput / stat.total_token_throughput;
      BOOST_TEST(gain > 1.0);
      BOOST_TEST(gain > previous_gain);
      BOOST_TEST(cont.kv_utilization >= 0.95);
      BOOST_TEST(stat.kv_utilization < cont.kv_utilization);
      previous_gain = gain;
    }
  }
}

BOOST_AUTO_TEST_CASE(cost_model_presets_are_the_cpu_fit_and_the_h100_roofline) {
  const auto cpu = cost_model_preset("cpu");
  BOOST_REQUIRE(cpu.has_value());
  BOOST_TEST(cpu->fixed_ms == cost_model{}.fixed_ms);
  BOOST_TEST(cpu->per_token_ms == cost_model{}.per_token_ms);
  const auto h100 = cost_model_preset("h100-llama8b");
  BOOST_REQUIRE(h100.has_value());
  BOOST_TEST(h100->validate().empty());
  // 16.06 GB / 3.35 TB/s; 16.06 GFLOP / (0.6 x 989 TFLOP/s); 131072 B / 3.35 TB/s.
  BOOST_TEST(h100->fixed_ms == 4.794, boost::test_tools::tolerance(1e-3));
  BOOST_TEST(h100->per_token_ms == 0.02706, boost::test_tools::tolerance(1e-3));
  BOOST_TEST(h100->per_context_token_us == 0.03913, boost::test_tools::tolerance(1e-3));
  BOOST_TEST(!cost_model_preset("a100").has_value());
}

BOOST_AUTO_TEST_CASE(on_the_h100_roofline_the_gain_grows_from_cap_32_to_1536) {
  double previous_gain = 0.0;
  for (int32_t cap : {32, 128, 512, 1536}) {
    BOOST_TEST_CONTEXT("cap " << cap) {
      sim_config c = small_config(batching_mode::continuous), s = small_config(batching_mode::static_batch);
      c.cost = s.cost = *cost_model_preset("h100-llama8b");
      c.sched.max_model_len = s.sched.max_model_len = 2048;
      c.num_kv_blocks = s.num_kv_blocks = 2048;
      const auto reqs = make_workload(anyscale(cap));
      const double gain = summarize(run_simulation(c, reqs)).total_token_throughput /
                          summarize(run_simulation(s, reqs)).total_token_throughput;
      BOOST_TEST(gain > previous_gain);
      previous_gain = gain;
    }
  }
  BOOST_TEST(previous_gain > 1.3);
}

BOOST_AUTO_TEST_SUITE_END()
