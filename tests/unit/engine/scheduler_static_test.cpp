// batching = static: a batch runs until every member finishes; only then is the next admitted.
#include <boost/test/unit_test.hpp>

#include "engine_test_util.hpp"

using namespace conveyor;
using namespace conveyor::test;

namespace {

using seq_ids = std::vector<seq_id>;

struct static_fixture {
  scheduler_config sched;
  cache_config cache;
  int32_t num_blocks = 16;
  static_fixture() {
    cache.block_size = 4;
    cache.enable_prefix_caching = false;
    sched.max_model_len = 32;
    sched.batching = batching_mode::static_batch;
  }
  conveyor::scheduler make() const { return {sched, cache, num_blocks}; }
};

} // namespace

BOOST_AUTO_TEST_SUITE(scheduler)

BOOST_FIXTURE_TEST_CASE(static_batch_admits_nothing_until_every_member_finishes,
                        static_fixture) {
  auto s = make();
  s.submit(make_request(1, 4, 3), 0.0);
  s.submit(make_request(2, 4, 6), 0.0);
  auto first = run_step(s);
  BOOST_TEST(ids_of(first.plan) == (seq_ids{1, 2}), boost::test_tools::per_element());
  s.submit(make_request(3, 4, 2), 0.0);
  // Steps 1..5: seq 1 finishes after step 2, seq 2 after step 5; seq 3 waits throughout.
  for (int it = 1; it <= 5; ++it) {
    BOOST_TEST_CONTEXT("iteration " << it) {
      auto out = run_step(s);
      BOOST_TEST(find_in(out.plan, 3) == nullptr);
      BOOST_TEST(out.plan.seqs.size() == (it <= 2 ? 2u : 1u));
    }
  }
  BOOST_TEST(s.find(2) == nullptr);
  BOOST_TEST(ids_of(run_step(s).plan) == (seq_ids{3}), boost::test_tools::per_element());
}

BOOST_FIXTURE_TEST_CASE(continuous_mode_admits_the_same_job_at_once, static_fixture) {
  sched.batching = batching_mode::continuous;
  auto s = make();
  s.submit(make_request(1, 4, 3), 0.0);
  s.submit(make_request(2, 4, 6), 0.0);
  run_step(s);
  s.submit(make_request(3, 4, 2), 0.0);
  BOOST_TEST(ids_of(run_step(s).plan) == (seq_ids{1, 2, 3}), boost::test_tools::per_element());
}

BOOST_FIXTURE_TEST_CASE(static_batch_paces_prefill_with_the_budget, static_fixture) {
  sched.max_num_batched_tokens = 4;
  auto s = make();
  s.submit(make_request(1, 6, 5), 0.0);
  s.submit(make_request(2, 6, 5), 0.0);
  // step 0: seq 1 chunk 4; seq 2 joins the batch with no tokens this step
  // step 1: seq 1 last chunk 2 (samples), seq 2 chunk 2
  // step 2: seq 1 decode, seq 2 last chunk 3 (samples)
  auto first = run_step(s);
  BOOST_TEST(ids_of(first.plan) == (seq_ids{1}), boost::test_tools::per_element());
  BOOST_TEST(s.stats().num_running == 2);
  BOOST_TEST(s.kv().num_used_blocks() == 6); // 6 + 5 tokens reserved each: 3 blocks
  const std::vector<std::vector<int32_t>> chunks{{2, 2}, {1, 3}, {1, 1}};
  for (size_t it = 0; it < chunks.size(); ++it) {
    BOOST_TEST_CONTEXT("iteration " << it + 1) {
      auto out = run_step(s);
      BOOST_REQUIRE(out.plan.seqs.size() == 2u);
      BOOST_TEST(static_cast<int32_t>(out.plan.seqs[0].tokens.size()) == chunks[it][0]);
      BOOST_TEST(static_cast<int32_t>(out.plan.seqs[1].tokens.size()) == chunks[it][1]);
    }
  }
}

BOOST_FIXTURE_TEST_CASE(static_members_reserve_prompt_plus_max_tokens, static_fixture) {
  num_blocks = 6;
  sched.max_model_len = 24;
  auto s = make();
  // Each job lives 4 + 8 = 12 tokens = 3 blocks: two fit, though all three prompts would.
  for (seq_id id = 1; id <= 3; ++id) s.submit(make_request(id, 4, 8, 100 * id), 0.0);
  auto first = run_step(s);
  BOOST_TEST(ids_of(first.plan) == (seq_ids{1, 2}), boost::test_tools::per_element());
  BOOST_TEST(first.plan.seqs[0].block_table.size() == 3u);
  BOOST_TEST(s.kv().num_used_blocks() == 6);
  for (int it = 1; it < 8; ++it) {
    BOOST_TEST_CONTEXT("iteration " << it) {
      auto out = run_step(s);
      BOOST_TEST(ids_of(out.plan) == (seq_ids{1, 2}), boost::test_tools::per_element());
      BOOST_TEST(s.check_invariants() == "");
    }
  }
  BOOST_TEST(s.stats().num_preemptions == 0);
  BOOST_TEST(ids_of(run_step(s).plan) == (seq_ids{3}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()
