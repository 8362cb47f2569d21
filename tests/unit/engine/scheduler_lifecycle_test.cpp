// A job's way in and out: deadlines, the bounded queue, invalid jobs, cancel, finish(),
// stop conditions, events reported exactly once.
#include <boost/test/unit_test.hpp>

#include "engine_test_util.hpp"

using namespace conveyor;
using namespace conveyor::test;

namespace {

using seq_ids = std::vector<seq_id>;

struct toy_fixture {
  scheduler_config sched;
  cache_config cache;
  toy_fixture() {
    cache.block_size = 4;
    sched.max_model_len = 32;
  }
  conveyor::scheduler make() const { return {sched, cache, 8}; }
};

request with_deadline(request r, double deadline_s) {
  r.deadline_s = deadline_s;
  return r;
}

} // namespace

BOOST_AUTO_TEST_SUITE(scheduler)

BOOST_FIXTURE_TEST_CASE(deadline_passing_while_waiting_finishes_without_running, toy_fixture) {
  sched.max_num_seqs = 1;
  auto s = make();
  s.submit(make_request(1, 4, 10), 0.0);
  s.submit(with_deadline(make_request(2, 4, 10), 1.0), 0.0);
  auto early = run_step(s, 0.5);
  BOOST_TEST(ids_of(early.plan) == (seq_ids{1}), boost::test_tools::per_element());
  BOOST_TEST(finished_in(early.events).empty());
  auto late = run_step(s, 1.0);
  BOOST_TEST(ids_of(late.plan) == (seq_ids{1}), boost::test_tools::per_element());
  const auto done = finished_in(late.events);
  BOOST_REQUIRE(done.size() == 1u);
  BOOST_TEST(done[0].id == 2u);
  BOOST_TEST(done[0].reason == finish_reason::deadline);
  BOOST_TEST(done[0].num_output_tokens == 0);
  BOOST_TEST(s.find(2) == nullptr);
  BOOST_TEST(s.check_invariants() == "");
}

BOOST_FIXTURE_TEST_CASE(deadline_passing_while_running_stops_it, toy_fixture) {
  auto s = make();
  s.submit(with_deadline(make_request(1, 4, 10), 2.0), 0.0);
  BOOST_TEST(run_step(s, 0.0).events.size() == 1u);
  BOOST_TEST(run_step(s, 1.0).events.size() == 1u);
  auto out = run_step(s, 2.0);
  BOOST_TEST(out.plan.seqs.empty());
  const auto done = finished_in(out.events);
  BOOST_REQUIRE(done.size() == 1u);
  BOOST_TEST(done[0].reason == finish_reason::deadline);
  BOOST_TEST(done[0].num_output_tokens == 2);
  BOOST_TEST(s.kv().num_used_blocks() == 0);
}

BOOST_FIXTURE_TEST_CASE(deadline_already_past_at_submit_finishes_at_once, toy_fixture) {
  auto s = make();
  BOOST_TEST(s.submit(with_deadline(make_request(1, 4, 10), 1.0), 5.0).accepted);
  const auto events = s.take_events();
  BOOST_REQUIRE(events.size() == 1u);
  BOOST_TEST(events[0].reason == finish_reason::deadline);
  BOOST_TEST(!s.has_unfinished());
  BOOST_TEST(s.take_events().empty());
}

BOOST_FIXTURE_TEST_CASE(submit_past_max_num_queued_reqs_is_overloaded, toy_fixture) {
  sched.max_num_queued_reqs = 2;
  auto s = make();
  BOOST_TEST(s.submit(make_request(1, 4, 2), 0.0).accepted);
  BOOST_TEST(s.submit(make_request(2, 4, 2), 0.0).accepted);
  const submit_result third = s.submit(make_request(3, 4, 2), 0.0);
  BOOST_TEST(!third.accepted);
  BOOST_TEST(third.reason == error_code::overloaded);
  BOOST_TEST(third.message.find("max_num_queued_reqs") != std::string::npos);
  BOOST_TEST(s.find(3) == nullptr);
  run_step(s); // both admitted: the queue is empty again
  BOOST_TEST(s.submit(make_request(3, 4, 2), 0.0).accepted);
  BOOST_TEST(s.check_invariants() == "");
}

BOOST_FIXTURE_TEST_CASE(submit_past_max_num_queued_tokens_is_overloaded, toy_fixture) {
  sched.max_num_queued_tokens = 10;
  auto s = make();
  BOOST_TEST(s.submit(make_request(1, 6, 2), 0.0).accepted);
  const submit_result second = s.submit(make_request(2, 5, 2), 0.0);
  BOOST_TEST(!second.accepted);
  BOOST_TEST(second.reason == error_code::overloaded);
  BOOST_TEST(s.submit(make_request(3, 4, 2), 0.0).accepted); // 6 + 4 = 10 fits
  BOOST_TEST(s.stats().num_queued_tokens == 10);
}

BOOST_FIXTURE_TEST_CASE(submit_rejects_jobs_that_can_never_run, toy_fixture) {
  auto s = make();
  BOOST_TEST(s.submit(make_request(1, 0, 2), 0.0).reason == error_code::bad_request);
  BOOST_TEST(s.submit(make_request(1, 33, 2), 0.0).reason == error_code::too_long);
  // One prompt-length rule: the prompt must leave room for one output token.
  BOOST_TEST(s.submit(make_request(1, 32, 2), 0.0).reason == error_code::too_long);
  auto bad_stop = make_request(1, 4, 0);
  BOOST_TEST(s.submit(bad_stop, 0.0).reason == error_code::bad_request);
  auto bad_sampling = make_request(1, 4, 2);
  bad_sampling.sampling.top_p = 0.0f;
  BOOST_TEST(s.submit(bad_sampling, 0.0).reason == error_code::bad_request);
  BOOST_TEST(s.submit(make_request(1, 31, 2), 0.0).accepted);
  BOOST_TEST(s.submit(make_request(1, 4, 2), 0.0).reason == error_code::duplicate);
  BOOST_TEST(s.stats().num_waiting == 1);
}

BOOST_FIXTURE_TEST_CASE(cancel_is_idempotent_and_frees_at_once, toy_fixture) {
  auto s = make();
  s.submit(make_request(1, 10, 10), 0.0);
  s.submit(make_request(2, 4, 10), 0.0);
  run_step(s);
  BOOST_TEST(s.kv().num_used_blocks() == 4);
  BOOST_TEST(s.cancel(1));
  BOOST_TEST(s.kv().num_used_blocks() == 1);
  BOOST_TEST(!s.cancel(1));
  BOOST_TEST(s.cancel(2));
  BOOST_TEST(!s.cancel(99));
  const auto events = s.take_events();
  BOOST_REQUIRE(events.size() == 2u);
  BOOST_TEST(events[0].reason == finish_reason::cancelled);
  BOOST_TEST(events[1].id == 2u);
  BOOST_TEST(s.kv().num_used_blocks() == 0);
  BOOST_TEST(s.check_invariants() == "");
}

BOOST_FIXTURE_TEST_CASE(cancel_during_a_step_drops_its_result, toy_fixture) {
  auto s = make();
  s.submit(make_request(1, 4, 10), 0.0);
  s.submit(make_request(2, 4, 10), 0.0);
  const step_plan plan = s.schedule(0.0);
  BOOST_TEST(s.cancel(1));
  BOOST_TEST(s.kv().num_used_blocks() == 1);
  const auto events = s.update(fake_step(plan), 0.0);
  BOOST_REQUIRE(events.size() == 2u); // the cancel, then seq 2's token; nothing for seq 1
  BOOST_TEST(events[0].kind == event_kind::finished);
  BOOST_TEST(events[0].id == 1u);
  BOOST_TEST(events[1].kind == event_kind::token);
  BOOST_TEST(events[1].id == 2u);
  BOOST_TEST(s.check_invariants() == "");
  // The id may be reused at once; the new job starts clean.
  BOOST_TEST(s.submit(make_request(1, 4, 10, 500), 0.0).accepted);
  BOOST_TEST(find_in(run_step(s).plan, 1)->num_computed_tokens == 0);
}

BOOST_FIXTURE_TEST_CASE(finish_hook_ends_a_job_with_the_given_reason, toy_fixture) {
  auto s = make();
  s.submit(make_request(1, 4, 10), 0.0);
  run_step(s);
  BOOST_TEST(s.finish(1, finish_reason::stop));
  BOOST_TEST(!s.finish(1, finish_reason::stop));
  const auto events = s.take_events();
  BOOST_REQUIRE(events.size() == 1u);
  BOOST_TEST(events[0].reason == finish_reason::stop);
  BOOST_TEST(events[0].num_output_tokens == 1);
}

BOOST_FIXTURE_TEST_CASE(eos_stops_and_is_reported_as_a_token, toy_fixture) {
  auto s = make();
  auto req = make_request(1, 4, 10);
  req.stop.eos_token_ids = {7};
  s.submit(req, 0.0);
  const auto events = run_step(s).events;
  BOOST_REQUIRE(events.size() == 2u);
  BOOST_TEST(events[0].kind == event_kind::token);
  BOOST_TEST(events[1].reason == finish_reason::stop);
}

BOOST_FIXTURE_TEST_CASE(max_tokens_and_max_model_len_stop_with_length, toy_fixture) {
  sched.max_model_len = 16;
  auto s = make();
  s.submit(make_request(1, 4, 3), 0.0);
  s.submit(make_request(2, 14, 10), 0.0); // 16 = max_model_len after 2 outputs
  std::vector<seq_event> done;
  for (int it = 0; it < 5; ++it) {
    auto events = finished_in(run_step(s).events);
    done.insert(done.end(), events.begin(), events.end());
  }
  BOOST_REQUIRE(done.size() == 2u);
  BOOST_TEST(done[0].id == 2u);
  BOOST_TEST(done[0].reason == finish_reason::length);
  BOOST_TEST(done[0].num_output_tokens == 2);
  BOOST_TEST(done[1].id == 1u);
  BOOST_TEST(done[1].num_output_tokens == 3);
}

BOOST_AUTO_TEST_SUITE_END()
