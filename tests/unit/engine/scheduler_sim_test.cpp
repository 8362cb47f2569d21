// Simulation fixture in the style of TensorRT-LLM's microBatchSchedulerTest: a fake executor
// generates one token per sampled sequence, and every iteration's plan is asserted.
#include <boost/test/unit_test.hpp>

#include "engine_test_util.hpp"

using namespace conveyor;
using namespace conveyor::test;

namespace {

using seq_ids = std::vector<seq_id>;

struct sim_fixture {
  scheduler_config sched;
  cache_config cache;
  int32_t num_blocks = 64;
  sim_fixture() {
    cache.block_size = 4;
    sched.max_model_len = 128;
  }
  conveyor::scheduler make() const { return {sched, cache, num_blocks}; }
};

} // namespace

BOOST_AUTO_TEST_SUITE(scheduler)

BOOST_FIXTURE_TEST_CASE(two_seq_cap_serves_fcfs_pairs, sim_fixture) {
  sched.max_num_seqs = 2;
  auto s = make();
  for (seq_id id = 1; id <= 4; ++id) s.submit(make_request(id, 10, 80, 100 * id), 0.0);
  // Req 1, 2: prompt at it 0, decode it 1..79 (80 outputs), done.
  // Req 3, 4: prompt at it 80, decode it 81..159, done. Then nothing.
  for (int it = 0; it < 170; ++it) {
    BOOST_TEST_CONTEXT("iteration " << it) {
      auto out = run_step(s, it);
      const seq_ids want = it < 80 ? seq_ids{1, 2} : it < 160 ? seq_ids{3, 4} : seq_ids{};
      BOOST_TEST(ids_of(out.plan) == want, boost::test_tools::per_element());
      const bool prompt_step = it == 0 || it == 80;
      for (const scheduled_seq& p : out.plan.seqs) {
        BOOST_TEST(p.tokens.size() == (prompt_step ? 10u : 1u));
        BOOST_TEST(p.sample);
        BOOST_TEST(p.num_computed_tokens == (prompt_step ? 0 : 10 + (it % 80) - 1));
      }
      BOOST_TEST(finished_in(out.events).size() == (it == 79 || it == 159 ? 2u : 0u));
      BOOST_TEST(s.check_invariants() == "");
    }
  }
}

BOOST_FIXTURE_TEST_CASE(chunked_prompts_share_the_budget_with_decodes, sim_fixture) {
  sched.max_num_batched_tokens = 8;
  auto s = make();
  s.submit(make_request(1, 20, 30, 100), 0.0);
  s.submit(make_request(2, 20, 30, 200), 0.0);
  // Token trace (chunk sizes per iteration):
  //   it 0: r1 8           it 1: r1 8           it 2: r1 4* r2 4
  //   it 3: r1 1  r2 7     it 4: r1 1 r2 7      it 5: r1 1  r2 2*    it 6+: r1 1 r2 1
  //   (* = chunk ends the prompt and samples)
  const std::vector<std::vector<int32_t>> trace{{8}, {8}, {4, 4}, {1, 7}, {1, 7}, {1, 2}};
  int32_t tokens_r1 = 0;
  int32_t tokens_r2 = 0;
  for (int it = 0; it < 200; ++it) {
    BOOST_TEST_CONTEXT("iteration " << it) {
      auto out = run_step(s, it);
      BOOST_TEST(out.plan.num_tokens() <= 8);
      if (it < static_cast<int>(trace.size())) {
        BOOST_REQUIRE(out.plan.seqs.size() == trace[it].size());
        for (size_t k = 0; k < trace[it].size(); ++k)
          BOOST_TEST(static_cast<int32_t>(out.plan.seqs[k].tokens.size()) == trace[it][k]);
      } else if (it < 32) {
        BOOST_TEST(ids_of(out.plan) == (seq_ids{1, 2}), boost::test_tools::per_element());
      }
      for (const scheduled_seq& p : out.plan.seqs)
        (p.id == 1 ? tokens_r1 : tokens_r2) += static_cast<int32_t>(p.tokens.size());
      BOOST_TEST(s.check_invariants() == "");
    }
  }
  // Every prompt token and every output but the last is computed once.
  BOOST_TEST(tokens_r1 == 20 + 29);
  BOOST_TEST(tokens_r2 == 20 + 29);
  BOOST_TEST(!s.has_unfinished());
}

BOOST_FIXTURE_TEST_CASE(preemption_under_a_tight_pool_recomputes_and_finishes, sim_fixture) {
  num_blocks = 12; // 48 slots for three jobs growing to 34 tokens each
  sched.max_model_len = 48;
  cache.enable_prefix_caching = false;
  auto s = make();
  for (seq_id id = 1; id <= 3; ++id) s.submit(make_request(id, 10, 24, 100 * id), 0.0);
  std::vector<int> finished_at(4, -1);
  for (int it = 0; it < 300 && s.has_unfinished(); ++it) {
    BOOST_TEST_CONTEXT("iteration " << it) {
      auto out = run_step(s, it);
      const auto ids = ids_of(out.plan);
      // The oldest job is never the victim under fcfs: it runs every step until it is done.
      if (finished_at[1] < 0) BOOST_TEST((!ids.empty() && ids.front() == 1u));
      for (const seq_event& e : finished_in(out.events)) finished_at[e.id] = it;
      BOOST_TEST(s.check_invariants() == "");
    }
  }
  BOOST_TEST(finished_at[1] == 23);
  BOOST_TEST(s.stats().num_preemptions >= 1);
  BOOST_TEST(finished_at[2] > 0);
  BOOST_TEST(finished_at[3] > finished_at[2]);
}

BOOST_AUTO_TEST_SUITE_END()
