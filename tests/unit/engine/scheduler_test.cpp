// Planning: chunked prefill, decode-first budgets, admission limits, prefix-cache hits.
#include <boost/test/unit_test.hpp>

#include "engine_test_util.hpp"

using namespace conveyor;
using namespace conveyor::test;

namespace {

using ids = std::vector<block_id>;
using seq_ids = std::vector<seq_id>;
using toks = std::vector<token_id>;

struct toy_fixture {
  scheduler_config sched;
  cache_config cache;
  int32_t num_blocks = 8;
  toy_fixture() {
    cache.block_size = 4;
    cache.enable_prefix_caching = false;
    sched.max_model_len = 32;
  }
  conveyor::scheduler make() const { return {sched, cache, num_blocks}; }
};

} // namespace

BOOST_AUTO_TEST_SUITE(scheduler)

BOOST_FIXTURE_TEST_CASE(long_prompt_is_chunked_to_the_budget, toy_fixture) {
  sched.max_num_batched_tokens = 4;
  auto s = make();
  BOOST_TEST(s.submit(make_request(1, 10, 3), 0.0).accepted);
  // Prompt 1000..1009 in chunks of 4, 4, 2; only the last samples. Then one decode token each.
  const std::vector<int32_t> chunk{4, 4, 2, 1, 1};
  const std::vector<int32_t> computed{0, 4, 8, 10, 11};
  const std::vector<bool> sample{false, false, true, true, true};
  const std::vector<ids> tables{{0}, {0, 1}, {0, 1, 2}, {0, 1, 2}, {0, 1, 2}};
  for (size_t it = 0; it < chunk.size(); ++it) {
    BOOST_TEST_CONTEXT("iteration " << it) {
      auto out = run_step(s);
      BOOST_REQUIRE(out.plan.seqs.size() == 1u);
      const scheduled_seq& p = out.plan.seqs[0];
      BOOST_TEST(static_cast<int32_t>(p.tokens.size()) == chunk[it]);
      BOOST_TEST(p.num_computed_tokens == computed[it]);
      BOOST_TEST(p.sample == sample[it]);
      BOOST_TEST(p.block_table == tables[it], boost::test_tools::per_element());
      BOOST_TEST(p.tokens.front() == (it < 3 ? 1000 + 4 * static_cast<int32_t>(it) : 7));
      BOOST_TEST(s.check_invariants() == "");
    }
  }
  BOOST_TEST(s.has_unfinished() == false);
  BOOST_TEST(run_step(s).plan.seqs.empty());
}

BOOST_FIXTURE_TEST_CASE(running_sequences_take_the_budget_first, toy_fixture) {
  sched.max_num_batched_tokens = 6;
  auto s = make();
  s.submit(make_request(1, 4, 10), 0.0);
  s.submit(make_request(2, 10, 10), 0.0);
  // step 0: seq 1 whole prompt (4), seq 2 first chunk (2)
  // step 1: seq 1 decode (1), seq 2 chunk (5)
  // step 2: seq 1 decode (1), seq 2 last chunk (3, samples)
  // step 3: both decode
  const std::vector<std::vector<int32_t>> chunks{{4, 2}, {1, 5}, {1, 3}, {1, 1}};
  for (size_t it = 0; it < chunks.size(); ++it) {
    BOOST_TEST_CONTEXT("iteration " << it) {
      auto out = run_step(s);
      BOOST_TEST(ids_of(out.plan) == (seq_ids{1, 2}), boost::test_tools::per_element());
      BOOST_TEST(static_cast<int32_t>(out.plan.seqs[0].tokens.size()) == chunks[it][0]);
      BOOST_TEST(static_cast<int32_t>(out.plan.seqs[1].tokens.size()) == chunks[it][1]);
      BOOST_TEST(out.plan.num_tokens() <= sched.max_num_batched_tokens);
    }
  }
}

BOOST_FIXTURE_TEST_CASE(admission_stops_at_max_num_seqs, toy_fixture) {
  sched.max_num_seqs = 2;
  auto s = make();
  for (seq_id id = 1; id <= 3; ++id) s.submit(make_request(id, 2, 2), 0.0);
  auto first = run_step(s);
  BOOST_TEST(ids_of(first.plan) == (seq_ids{1, 2}), boost::test_tools::per_element());
  auto second = run_step(s); // 1 and 2 finish (2 tokens each)
  BOOST_TEST(ids_of(second.plan) == (seq_ids{1, 2}), boost::test_tools::per_element());
  BOOST_TEST(finished_in(second.events).size() == 2u);
  BOOST_TEST(ids_of(run_step(s).plan) == (seq_ids{3}), boost::test_tools::per_element());
}

BOOST_FIXTURE_TEST_CASE(head_of_line_blocks_smaller_prompts_behind_it, toy_fixture) {
  num_blocks = 4;
  sched.max_model_len = 16;
  auto s = make();
  s.submit(make_request(1, 9, 4), 0.0); // 3 blocks
  s.submit(make_request(2, 8, 4), 0.0); // 2 blocks: does not fit
  s.submit(make_request(3, 2, 4), 0.0); // 1 block would fit, but waits behind seq 2
  auto out = run_step(s);
  BOOST_TEST(ids_of(out.plan) == (seq_ids{1}), boost::test_tools::per_element());
  BOOST_TEST(s.stats().num_waiting == 2);
}

BOOST_FIXTURE_TEST_CASE(plan_carries_sampling_params_and_whole_block_table, toy_fixture) {
  auto s = make();
  auto req = make_request(1, 6, 4);
  req.sampling.temperature = 0.0f;
  req.sampling.seed = 99;
  s.submit(req, 0.0);
  auto out = run_step(s);
  BOOST_TEST(out.plan.seqs[0].sampling.temperature == 0.0f);
  BOOST_TEST(out.plan.seqs[0].sampling.seed == 99u);
  BOOST_TEST(out.plan.seqs[0].tokens == (toks{1000, 1001, 1002, 1003, 1004, 1005}),
             boost::test_tools::per_element());
  BOOST_TEST(out.plan.seqs[0].block_table == (ids{0, 1}), boost::test_tools::per_element());
  BOOST_TEST(out.events.size() == 1u);
  BOOST_TEST(out.events[0].token == 7);
  BOOST_TEST(out.events[0].logprob == -0.5f);
}

BOOST_FIXTURE_TEST_CASE(prefix_cache_hit_skips_cached_blocks_and_reports_usage, toy_fixture) {
  cache.enable_prefix_caching = true;
  auto s = make();
  s.submit(make_request(1, 10, 1), 0.0);
  auto first = run_step(s);
  BOOST_TEST(finished_in(first.events).at(0).num_cached_tokens == 0);
  // Same first 8 tokens: two full blocks hit, the rest is computed.
  auto req = make_request(2, 10, 1);
  req.prompt_token_ids[9] = 5;
  s.submit(req, 0.0);
  auto second = run_step(s);
  BOOST_REQUIRE(second.plan.seqs.size() == 1u);
  BOOST_TEST(second.plan.seqs[0].num_computed_tokens == 8);
  BOOST_TEST(second.plan.seqs[0].tokens == (toks{1008, 5}), boost::test_tools::per_element());
  BOOST_TEST(second.plan.seqs[0].block_table == (ids{0, 1, 2}), boost::test_tools::per_element());  // 2: seq 1's partial block
  const auto done = finished_in(second.events);
  BOOST_TEST(done.at(0).num_cached_tokens == 8);
  BOOST_TEST(s.stats().num_prefix_query_tokens == 20);
  BOOST_TEST(s.stats().num_prefix_hit_tokens == 8);
  // A prompt of other tokens misses.
  s.submit(make_request(3, 10, 1, /*first_token=*/3000), 0.0);
  BOOST_TEST(run_step(s).plan.seqs.at(0).num_computed_tokens == 0);
}

BOOST_FIXTURE_TEST_CASE(watermark_keeps_blocks_free_only_while_others_run, toy_fixture) {
  cache.kv_watermark = 0.25; // 2 of 8 blocks
  auto s = make();
  s.submit(make_request(1, 24, 4), 0.0); // 6 blocks: admitted, nothing else runs
  s.submit(make_request(2, 4, 4), 0.0);  // 1 block: 2 free - 1 < 2 reserved -> waits
  auto out = run_step(s);
  BOOST_TEST(ids_of(out.plan) == (seq_ids{1}), boost::test_tools::per_element());
  s.cancel(1);
  BOOST_TEST(ids_of(run_step(s).plan) == (seq_ids{2}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()
