// Out of KV blocks mid-run: preemption by recompute, victims under fcfs and priority.
#include <boost/test/unit_test.hpp>

#include "engine_test_util.hpp"

using namespace conveyor;
using namespace conveyor::test;

namespace {

using ids = std::vector<block_id>;
using seq_ids = std::vector<seq_id>;
using toks = std::vector<token_id>;

// 4 blocks of 4 tokens: three 4-token prompts fill three blocks, and the first decode of each
// needs a second block, so the second one to grow finds the pool empty.
struct tiny_pool {
  scheduler_config sched;
  cache_config cache;
  tiny_pool() {
    cache.block_size = 4;
    cache.enable_prefix_caching = false;
    sched.max_model_len = 16;
  }
  conveyor::scheduler make() const { return {sched, cache, 4}; }
};

request with_priority(request r, int32_t priority, double arrival_s) {
  r.priority = priority;
  r.arrival_time_s = arrival_s;
  return r;
}

} // namespace

BOOST_AUTO_TEST_SUITE(scheduler)

BOOST_FIXTURE_TEST_CASE(fcfs_preempts_the_newest_running_sequence, tiny_pool) {
  auto s = make();
  for (seq_id id = 1; id <= 3; ++id) s.submit(make_request(id, 4, 10, 100 * id), 0.0);
  auto first = run_step(s); // blocks 0 1 2
  BOOST_TEST(ids_of(first.plan) == (seq_ids{1, 2, 3}), boost::test_tools::per_element());
  // step 1: seq 1 takes block 3; seq 2 finds none -> seq 3 (newest) is preempted.
  auto second = run_step(s);
  BOOST_TEST(ids_of(second.plan) == (seq_ids{1, 2}), boost::test_tools::per_element());
  BOOST_TEST(second.plan.seqs[0].block_table == (ids{0, 3}), boost::test_tools::per_element());
  BOOST_TEST(second.plan.seqs[1].block_table == (ids{1, 2}), boost::test_tools::per_element());
  BOOST_TEST(s.stats().num_preemptions == 1);
  const sequence* victim = s.find(3);
  BOOST_REQUIRE(victim != nullptr);
  BOOST_TEST(victim->status == seq_status::waiting);
  BOOST_TEST(victim->num_computed_tokens == 0);
  BOOST_TEST(victim->num_output_tokens() == 1); // keeps its sampled token for the recompute
  BOOST_TEST(s.check_invariants() == "");
}

BOOST_FIXTURE_TEST_CASE(preempted_sequence_recomputes_prompt_and_output, tiny_pool) {
  auto t = make();
  t.submit(make_request(1, 8, 10, 100), 0.0); // 2 blocks
  t.submit(make_request(2, 8, 10, 200), 0.0); // 2 blocks: pool full
  run_step(t);
  // seq 1 needs a third block at its first decode: seq 2 is preempted.
  auto out = run_step(t);
  BOOST_TEST(ids_of(out.plan) == (seq_ids{1}), boost::test_tools::per_element());
  t.cancel(1); // frees the pool; seq 2 comes back and recomputes 8 prompt + 1 output tokens
  auto back = run_step(t);
  BOOST_REQUIRE(back.plan.seqs.size() == 1u);
  const scheduled_seq& p = back.plan.seqs[0];
  BOOST_TEST(p.id == 2u);
  BOOST_TEST(p.num_computed_tokens == 0);
  BOOST_TEST(p.tokens == (toks{200, 201, 202, 203, 204, 205, 206, 207, 7}),
             boost::test_tools::per_element());
  BOOST_TEST(p.sample);
  BOOST_TEST(t.find(2)->num_output_tokens() == 2);
}

BOOST_FIXTURE_TEST_CASE(no_admission_in_a_step_that_preempted, tiny_pool) {
  auto s = make();
  for (seq_id id = 1; id <= 3; ++id) s.submit(make_request(id, 4, 10, 100 * id), 0.0);
  run_step(s);
  s.submit(make_request(4, 1, 10, 900), 0.0);
  auto out = run_step(s); // preempts seq 3; seq 4 must not be admitted in the same step
  BOOST_TEST(ids_of(out.plan) == (seq_ids{1, 2}), boost::test_tools::per_element());
  BOOST_TEST(s.find(4)->status == seq_status::waiting);
}

BOOST_FIXTURE_TEST_CASE(priority_preempts_the_lowest_priority_sequence, tiny_pool) {
  sched.policy = scheduling_policy::priority;
  auto s = make();
  s.submit(with_priority(make_request(1, 4, 10, 100), 2, 0.0), 0.0);
  s.submit(with_priority(make_request(2, 4, 10, 200), 0, 1.0), 0.0);
  s.submit(with_priority(make_request(3, 4, 10, 300), 1, 2.0), 0.0);
  auto first = run_step(s); // queue order by priority: 2, 3, 1
  BOOST_TEST(ids_of(first.plan) == (seq_ids{2, 3, 1}), boost::test_tools::per_element());
  // step 1: seq 2 takes the last block; seq 3 finds none -> seq 1 (priority 2) is preempted.
  auto second = run_step(s);
  BOOST_TEST(ids_of(second.plan) == (seq_ids{2, 3}), boost::test_tools::per_element());
  BOOST_TEST(s.find(1)->status == seq_status::waiting);
}

BOOST_FIXTURE_TEST_CASE(priority_ties_preempt_the_newest_arrival, tiny_pool) {
  sched.policy = scheduling_policy::priority;
  auto s = make();
  s.submit(with_priority(make_request(1, 4, 10, 100), 1, 0.0), 0.0);
  s.submit(with_priority(make_request(2, 4, 10, 200), 1, 2.0), 0.0);
  s.submit(with_priority(make_request(3, 4, 10, 300), 1, 1.0), 0.0);
  auto first = run_step(s); // arrival order: 1, 3, 2
  BOOST_TEST(ids_of(first.plan) == (seq_ids{1, 3, 2}), boost::test_tools::per_element());
  auto second = run_step(s); // seq 3 cannot grow -> seq 2 (arrived last) goes
  BOOST_TEST(ids_of(second.plan) == (seq_ids{1, 3}), boost::test_tools::per_element());
  BOOST_TEST(s.find(2)->status == seq_status::waiting);
}

BOOST_FIXTURE_TEST_CASE(priority_victim_already_scheduled_returns_its_budget, tiny_pool) {
  sched.policy = scheduling_policy::priority;
  auto s = make();
  s.submit(with_priority(make_request(1, 4, 10, 100), 5, 0.0), 0.0);
  run_step(s); // seq 1: block 0
  s.submit(with_priority(make_request(2, 8, 10, 200), 0, 1.0), 0.0);
  auto admit = run_step(s); // seq 1 decode takes block 1; seq 2 takes blocks 2 3
  BOOST_TEST(ids_of(admit.plan) == (seq_ids{1, 2}), boost::test_tools::per_element());
  // seq 1 (scheduled first, fits) then seq 2 needs a third block: the victim is seq 1, which is
  // already in this step's plan; it is taken out and seq 2 gets its block.
  auto out = run_step(s);
  BOOST_TEST(ids_of(out.plan) == (seq_ids{2}), boost::test_tools::per_element());
  BOOST_TEST(out.plan.seqs[0].block_table == (ids{2, 3, 0}), boost::test_tools::per_element());  // seq 1's, freed first
  BOOST_TEST(s.find(1)->status == seq_status::waiting);
  BOOST_TEST(s.check_invariants() == "");
}

BOOST_FIXTURE_TEST_CASE(fcfs_preempts_the_growing_sequence_when_it_is_newest, tiny_pool) {
  auto s = make();
  s.submit(make_request(1, 4, 10, 100), 0.0);
  run_step(s);
  s.submit(make_request(2, 8, 10, 200), 0.0);
  run_step(s);
  // Same layout as above under fcfs: the newest is seq 2 itself, so it yields.
  auto out = run_step(s);
  BOOST_TEST(ids_of(out.plan) == (seq_ids{1}), boost::test_tools::per_element());
  BOOST_TEST(s.find(2)->status == seq_status::waiting);
  BOOST_TEST(s.check_invariants() == "");
}

BOOST_FIXTURE_TEST_CASE(recompute_after_preemption_reuses_its_own_cached_blocks, tiny_pool) {
  cache.enable_prefix_caching = true;
  auto s = make();
  s.submit(make_request(1, 4, 10, 100), 0.0);  // block 0
  s.submit(make_request(2, 12, 10, 200), 0.0); // blocks 1 2 3, all full and cached
  run_step(s);
  // seq 1 grows, seq 2 (newest) is preempted: release puts 3 2 1 on the queue, tail first,
  // so seq 1's new block is 3 and blocks 1 and 2 stay cached.
  auto out = run_step(s);
  BOOST_TEST(out.plan.seqs.at(0).block_table == (ids{0, 3}), boost::test_tools::per_element());
  s.cancel(1);
  auto back = run_step(s);
  const scheduled_seq* p = find_in(back.plan, 2);
  BOOST_REQUIRE(p != nullptr);
  BOOST_TEST(p->num_computed_tokens == 8);
  BOOST_TEST(p->tokens == (toks{208, 209, 210, 211, 7}), boost::test_tools::per_element());
  // Hits 1 2 revived; cancel released seq 1's table {0, 3} tail first, so 3 then 0 follow.
  BOOST_TEST(p->block_table == (ids{1, 2, 3, 0}), boost::test_tools::per_element());
  BOOST_TEST(s.check_invariants() == "");
}

BOOST_AUTO_TEST_SUITE_END()
