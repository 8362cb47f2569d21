// The job table's part of a restart from the journal: remembered and reserved ids, a resumed
// job's continuation (its published output becomes prompt and counts as output again), a job
// whose output was complete, poison jobs, and the retention of finished ids.
#include <boost/test/unit_test.hpp>

#include "engine/job_table.hpp"
#include "engine_test_util.hpp"

using namespace conveyor;
using namespace conveyor::test;

namespace {

struct restart_fixture {
  scheduler_config sched;
  cache_config cache;
  restart_fixture() {
    cache.block_size = 4;
    cache.enable_prefix_caching = false;
    sched.max_model_len = 32;
  }
  job_table make(double retention_s = 1e9) const { return {sched, cache, 16, 100, retention_s}; }
};

error_code code_of(const std::variant<seq_id, refusal>& r) {
  BOOST_REQUIRE(std::holds_alternative<refusal>(r));
  return std::get<refusal>(r).code;
}

// Runs the table until nothing is live; returns the finished outputs' ends.
std::vector<job_end> run_all(job_table& t) {
  std::vector<job_end> ends;
  for (int i = 0; i < 100; ++i) {
    step_plan plan = t.schedule(i);
    if (plan.seqs.empty()) break;
    t.update(fake_step(plan), i);
    for (auto& o : t.take_outputs()) {
      if (o.what == job_output::kind::tokens) t.on_published(o.id);
      else ends.push_back(o.end);
    }
  }
  return ends;
}

} // namespace

BOOST_AUTO_TEST_SUITE(job_table_restart)

BOOST_FIXTURE_TEST_CASE(remembered_ids_are_duplicates_and_reserved_ids_wait_for_their_resume, restart_fixture) {
  auto t = make();
  t.restore_finished("old", job_info{job_state::finished, 4, 3, finish_reason::length}, 0.0);
  t.reserve("open");
  BOOST_TEST((code_of(t.submit("old", make_request(0, 4, 3), std::nullopt, 1.0)) == error_code::duplicate));
  BOOST_TEST((code_of(t.submit("open", make_request(0, 4, 3), std::nullopt, 1.0)) == error_code::duplicate));
  BOOST_TEST((t.status("open")->state == job_state::queued));
  BOOST_TEST((t.status("old")->state == job_state::finished));
  BOOST_TEST(std::holds_alternative<seq_id>(t.submit("open", make_request(0, 4, 3), std::nullopt, 1.0, /*resume=*/true)));
  BOOST_TEST((code_of(t.submit("open", make_request(0, 4, 3), std::nullopt, 1.0, true)) == error_code::duplicate));
}

BOOST_FIXTURE_TEST_CASE(a_resumed_job_owes_only_the_rest_and_counts_its_earlier_output, restart_fixture) {
  auto t = make();
  request r = make_request(0, 4, 10);
  r.stop.min_tokens = 5;
  BOOST_TEST(!job_table::resume_request(r, {7, 8, 9}).has_value());
  BOOST_TEST(r.prompt_token_ids.size() == 7u);
  BOOST_TEST(r.stop.max_tokens == 7);
  BOOST_TEST(r.stop.min_tokens == 2);
  BOOST_TEST(r.resumed_output == 3);
  t.reserve("r");
  BOOST_REQUIRE(std::holds_alternative<seq_id>(t.submit("r", std::move(r), std::nullopt, 0.0, true)));
  const auto running = t.status("r");
  BOOST_TEST(running->prompt_tokens == 4);
  BOOST_TEST(running->completion_tokens == 3);
  const auto ends = run_all(t);
  BOOST_TEST_REQUIRE(ends.size() == 1u);
  BOOST_TEST(ends[0].prompt_tokens == 4);
  BOOST_TEST(ends[0].completion_tokens == 10);
  BOOST_TEST(t.status("r")->completion_tokens == 10);
}

BOOST_FIXTURE_TEST_CASE(a_job_whose_output_was_complete_is_not_run_again, restart_fixture) {
  request full = make_request(0, 4, 3);
  BOOST_TEST((job_table::resume_request(full, {5, 6, 7}) == finish_reason::length));
  request eos = make_request(0, 4, 8);
  eos.stop.eos_token_ids = {2};
  BOOST_TEST((job_table::resume_request(eos, {5, 2}) == finish_reason::stop));
  eos.stop.ignore_eos = true;
  BOOST_TEST(!job_table::resume_request(eos, {5, 2}).has_value());
  request early = make_request(0, 4, 8);
  early.stop.stop_token_ids = {9};
  early.stop.min_tokens = 3;
  BOOST_TEST(!job_table::resume_request(early, {9}).has_value());  // stop ids count from min_tokens on
  auto t = make();
  t.reserve("done-before");
  t.end_resumed("done-before", job_info{job_state::finished, 4, 3, finish_reason::length}, 0.0);
  BOOST_TEST((t.status("done-before")->state == job_state::finished));
  BOOST_TEST((code_of(t.submit("done-before", make_request(0, 4, 3), std::nullopt, 1.0)) == error_code::duplicate));
}

BOOST_FIXTURE_TEST_CASE(a_resumed_job_past_max_model_len_had_ended_by_length, restart_fixture) {
  auto t = make();
  request r = make_request(0, 20, 30);
  std::vector<token_id> out(12, 5);
  BOOST_TEST(!job_table::resume_request(r, out).has_value());
  t.reserve("long");
  BOOST_TEST((code_of(t.submit("long", std::move(r), std::nullopt, 0.0, true)) == error_code::too_long));
  const auto info = t.status("long");
  BOOST_TEST((info->state == job_state::finished));
  BOOST_TEST((info->reason == finish_reason::length));
  BOOST_TEST(info->completion_tokens == 12);
}

BOOST_AUTO_TEST_CASE(poison_after_counts_consecutive_crashes) {
  BOOST_TEST(!job_table::is_poison(1, 2));
  BOOST_TEST(job_table::is_poison(2, 2));
  BOOST_TEST(!job_table::is_poison(50, 0));  // 0: never
}

BOOST_FIXTURE_TEST_CASE(finished_ids_are_forgotten_after_the_retention_period, restart_fixture) {
  auto t = make(/*retention_s=*/10.0);
  t.restore_finished("a", job_info{job_state::finished, 4, 3, finish_reason::length}, 0.0);
  t.restore_finished("b", job_info{job_state::finished, 4, 3, finish_reason::length}, 5.0);
  t.forget_expired(12.0);
  BOOST_TEST(!t.status("a").has_value());
  BOOST_TEST(t.status("b").has_value());
  BOOST_TEST(std::holds_alternative<seq_id>(t.submit("a", make_request(0, 4, 3), std::nullopt, 12.0)));
}

BOOST_AUTO_TEST_SUITE_END()
