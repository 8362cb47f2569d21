// The job lifecycle without CAF: admission order (duplicate before draining before the caller's
// refusal before the scheduler's checks), the id memory, states, timestamps, flow control of
// token outputs, failures, stats, and the KV fairness rule.
#include <boost/test/unit_test.hpp>

#include "engine/job_table.hpp"
#include "engine_test_util.hpp"

using namespace conveyor;
using namespace conveyor::test;

namespace conveyor {
inline std::ostream& operator<<(std::ostream& os, job_state s) { return os << to_string(s); }
inline std::ostream& operator<<(std::ostream& os, job_output::kind k) {
  return os << (k == job_output::kind::tokens ? "tokens" : "finished");
}
} // namespace conveyor

namespace {

struct table_fixture {
  scheduler_config sched;
  cache_config cache;
  table_fixture() {
    cache.block_size = 4;
    cache.enable_prefix_caching = false;
    sched.max_model_len = 32;
  }
  job_table make(size_t remembered = 100) const { return {sched, cache, 16, remembered}; }
};

seq_id accept(job_table& t, const std::string& id, int32_t prompt_len = 4, int32_t max_tokens = 3, double now = 0.0) {
  auto r = t.submit(id, make_request(0, prompt_len, max_tokens), std::nullopt, now);
  BOOST_REQUIRE_MESSAGE(std::holds_alternative<seq_id>(r), "job " << id << " refused");
  return std::get<seq_id>(r);
}

error_code refused(const std::variant<seq_id, refusal>& r) {
  BOOST_REQUIRE(std::holds_alternative<refusal>(r));
  return std::get<refusal>(r).code;
}

// One step through the fake executor; every output acknowledged at once unless `ack` is false.
std::vector<job_output> step(job_table& t, double now, bool ack = true) {
  step_plan plan = t.schedule(now);
  if (!plan.seqs.empty()) t.update(fake_step(plan), now);
  std::vector<job_output> out = t.take_outputs();
  if (ack)
    for (const auto& o : out)
      if (o.what == job_output::kind::tokens) t.on_published(o.id);
  return out;
}

} // namespace

BOOST_AUTO_TEST_SUITE(job_table_lifecycle)

BOOST_FIXTURE_TEST_CASE(ids_are_refused_while_live_and_after_they_finished, table_fixture) {
  auto t = make();
  const seq_id a = accept(t, "a", 4, 1);
  BOOST_TEST(refused(t.submit("a", make_request(0, 4, 1), std::nullopt, 0.0)) == error_code::duplicate);
  BOOST_TEST(t.status("a")->state == job_state::queued);
  step(t, 1.0);
  BOOST_TEST(t.status("a")->state == job_state::finished);
  BOOST_TEST((t.status("a")->reason == finish_reason::length));
  const auto again = t.submit("a", make_request(0, 4, 1), std::nullopt, 2.0);
  BOOST_TEST(refused(again) == error_code::duplicate);
  BOOST_TEST(std::get<refusal>(again).message.find("already ran (finished)") != std::string::npos);
  BOOST_TEST(accept(t, "b") != a);  // seq ids are never reused
  BOOST_TEST(!t.status("nobody"));
}

BOOST_FIXTURE_TEST_CASE(finished_ids_are_forgotten_oldest_first, table_fixture) {
  auto t = make(2);
  for (std::string id : {"a", "b", "c"}) {
    accept(t, id, 4, 1);
    step(t, 0.0);
  }
  BOOST_TEST(!t.status("a"));
  BOOST_TEST(t.status("b").has_value());
  BOOST_TEST(t.status("c").has_value());
  accept(t, "a", 4, 1);  // forgotten: a new job
}

BOOST_FIXTURE_TEST_CASE(admission_order_duplicate_then_draining_then_callers_refusal_then_scheduler, table_fixture) {
  auto t = make();
  accept(t, "live");
  const refusal bad{error_code::bad_request, "prompt: cannot tokenize"};
  // A known id is a duplicate whatever else is wrong: nothing about it may reach that job's topic.
  BOOST_TEST(refused(t.submit("live", {}, bad, 0.0)) == error_code::duplicate);
  BOOST_TEST(refused(t.submit("new", make_request(0, 4, 1), bad, 0.0)) == error_code::bad_request);
  BOOST_TEST(refused(t.submit("long", make_request(0, 32, 1), std::nullopt, 0.0)) == error_code::too_long);
  BOOST_TEST(refused(t.submit("empty", make_request(0, 0, 1), std::nullopt, 0.0)) == error_code::bad_request);
  t.begin_drain();
  BOOST_TEST(refused(t.submit("new2", make_request(0, 4, 1), std::nullopt, 0.0)) == error_code::shutting_down);
  BOOST_TEST(refused(t.submit("new3", {}, bad, 0.0)) == error_code::shutting_down);
  BOOST_TEST(refused(t.submit("live", make_request(0, 4, 1), std::nullopt, 0.0)) == error_code::duplicate);
  BOOST_TEST(!t.drained());
  t.cancel_all(1.0);
  BOOST_TEST(t.drained());
  BOOST_TEST(t.status("live")->state == job_state::cancelled);
}

BOOST_FIXTURE_TEST_CASE(the_one_prompt_length_rule_leaves_room_for_one_output_token, table_fixture) {
  auto t = make();
  BOOST_TEST(refused(t.submit("x", make_request(0, 32, 1), std::nullopt, 0.0)) == error_code::too_long);
  accept(t, "y", 31, 5);
  const auto out = step(t, 0.0);
  BOOST_REQUIRE(out.size() == 2u);  // one token, then the end at max_model_len
  BOOST_TEST((out[1].end.reason == finish_reason::length));
  BOOST_TEST(out[1].end.completion_tokens == 1);
}

BOOST_FIXTURE_TEST_CASE(timestamps_are_recorded_by_submit_schedule_and_update, table_fixture) {
  auto t = make();
  request r = make_request(0, 4, 2);
  r.arrival_time_s = 0.5;
  BOOST_REQUIRE(std::holds_alternative<seq_id>(t.submit("a", r, std::nullopt, 1.0)));
  step(t, 2.0);
  const auto out = step(t, 3.0);
  BOOST_REQUIRE(out.size() == 2u);
  const job_times& ts = out[1].end.times;
  BOOST_TEST(ts.arrival_s == 0.5);
  BOOST_TEST(ts.queued_s == 1.0);
  BOOST_TEST(ts.first_scheduled_s == 2.0);
  BOOST_TEST(ts.first_token_s == 2.0);
  BOOST_TEST(ts.last_token_s == 3.0);
  BOOST_TEST(ts.finished_s == 3.0);
  BOOST_TEST(out[0].tokens.times_s == std::vector<double>{3.0});
}

BOOST_FIXTURE_TEST_CASE(one_token_batch_in_flight_per_job_the_rest_coalesces, table_fixture) {
  auto t = make();
  const seq_id a = accept(t, "a", 4, 5);
  auto out = step(t, 0.0, /*ack=*/false);
  BOOST_REQUIRE(out.size() == 1u);
  BOOST_TEST(out[0].tokens.tokens.size() == 1u);
  // Unacknowledged: the next steps' tokens wait.
  BOOST_TEST(step(t, 1.0, false).empty());
  BOOST_TEST(step(t, 2.0, false).empty());
  t.on_published(a);
  out = t.take_outputs();
  BOOST_REQUIRE(out.size() == 1u);
  BOOST_TEST(out[0].tokens.tokens.size() == 2u);  // both waiting tokens in one batch
  BOOST_TEST(out[0].tokens.times_s == (std::vector<double>{1.0, 2.0}));
  // The job ends while a batch is in flight: its waiting tokens go at once, then its end.
  step(t, 3.0, false);
  out = step(t, 4.0, false);
  BOOST_REQUIRE(out.size() == 2u);
  BOOST_TEST(out[0].what == job_output::kind::tokens);
  BOOST_TEST(out[0].tokens.tokens.size() == 2u);
  BOOST_TEST(out[1].what == job_output::kind::finished);
  BOOST_TEST(out[1].end.completion_tokens == 5);
  t.on_published(a);  // a late acknowledgement of an ended job changes nothing
  BOOST_TEST(t.take_outputs().empty());
}

BOOST_FIXTURE_TEST_CASE(cancel_and_stop_string_end_a_job_once, table_fixture) {
  auto t = make();
  accept(t, "a", 4, 10);
  const seq_id b = accept(t, "b", 4, 10);
  step(t, 0.0);
  BOOST_TEST((t.cancel("a", 1.0) == job_state::cancelled));
  BOOST_TEST((t.cancel("a", 1.0) == job_state::cancelled));  // idempotent
  BOOST_TEST(!t.cancel("nobody", 1.0));
  t.finish_stop(b, 1.0);
  t.finish_stop(b, 1.0);
  const auto out = t.take_outputs();
  int ends = 0;
  for (const auto& o : out) ends += o.what == job_output::kind::finished;
  BOOST_TEST(ends == 2);
  BOOST_TEST(t.status("b")->state == job_state::finished);
  BOOST_TEST((t.status("b")->reason == finish_reason::stop));
}

BOOST_FIXTURE_TEST_CASE(an_executor_failure_fails_every_live_job_and_closes_admission, table_fixture) {
  auto t = make();
  accept(t, "a");
  accept(t, "b");
  t.schedule(0.0);
  t.fail_all("executor failed: boom", 1.0);
  const auto out = t.take_outputs();
  BOOST_REQUIRE(out.size() == 2u);
  for (const auto& o : out) {
    BOOST_TEST(o.end.state == job_state::failed);
    BOOST_TEST(o.end.error == "executor failed: boom");
  }
  BOOST_TEST(t.status("a")->state == job_state::failed);
  BOOST_TEST(!t.status("a")->reason);
  BOOST_TEST(refused(t.submit("c", make_request(0, 4, 1), std::nullopt, 2.0)) == error_code::shutting_down);
  BOOST_TEST(t.drained());
}

BOOST_FIXTURE_TEST_CASE(stats_count_jobs_tokens_and_rate, table_fixture) {
  auto t = make();
  BOOST_TEST(t.stats(0.0).tokens_per_s == 0.0);
  accept(t, "a", 4, 2);
  accept(t, "b", 6, 2);
  step(t, 0.5);
  step(t, 1.0);
  const serving_stats s = t.stats(2.0);
  BOOST_TEST(s.jobs_accepted == 2);
  BOOST_TEST(s.jobs_finished == 2);
  BOOST_TEST(s.prompt_tokens_total == 10);
  BOOST_TEST(s.completion_tokens_total == 4);
  BOOST_TEST(s.tokens_per_s == 2.0);  // 4 tokens over [0, 2]
  BOOST_TEST(s.kv_blocks_total == 16);
  BOOST_TEST(s.steps_total == 2);
  BOOST_TEST(!s.draining);
}

BOOST_AUTO_TEST_CASE(fairness_rule_caps_a_default_sequence_at_a_quarter_of_the_pool) {
  BOOST_TEST(default_max_model_len(8192, 8704) == 2176);
  BOOST_TEST(default_max_model_len(1024, 100000) == 1024);
  BOOST_TEST(default_max_model_len(8192, 2) == 1);
}

BOOST_AUTO_TEST_SUITE_END()
