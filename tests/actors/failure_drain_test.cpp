// Cases 4 and 5 of the actor tier: the executor failing (every live job gets an error event,
// new jobs are refused, the runtime is told to exit 1) and the drain (running jobs finish,
// new ones are refused, the grace period's end cancels the rest, the reply waits for that).
#include <boost/test/unit_test.hpp>

#include <chrono>

#include "harness.hpp"

using namespace conveyor;
using namespace conveyor::actor_test;

BOOST_AUTO_TEST_SUITE(executor_failure)

BOOST_AUTO_TEST_CASE(failure_ends_every_live_job_and_stops_the_runtime) {
  harness h({.max_num_seqs = 1});
  h.submit("running", 30);
  h.submit("waiting", 30);
  h.step();  // "running" has its first token; "waiting" is queued behind it
  BOOST_TEST(h.control.why().empty());

  h.ex->fail_next = true;
  h.run();
  for (const char* id : {"running", "waiting"}) {
    BOOST_TEST_CONTEXT("job " << id) {
      auto s = h.stream(id);
      BOOST_TEST(s.terminal.value("kind", "") == "error");
      BOOST_TEST(s.terminal.value("code", "") == "internal");
      BOOST_TEST(s.terminal.value("message", "").find("device lost") != std::string::npos);
    }
  }
  BOOST_TEST(h.stream("running").token_ids == std::vector<token_id>{'a'}, boost::test_tools::per_element());
  BOOST_TEST_REQUIRE(!h.control.why().empty(), "runtime_control.request_stop was not called");
  BOOST_TEST(h.control.why().find("device lost") != std::string::npos);
  BOOST_TEST(h.control.wait() == 1);
  BOOST_TEST(h.registry.snapshot().failed == 2u);

  const uint64_t late = h.submit("late", 3);
  h.run();
  BOOST_TEST(h.reply(late).at("error").value("code", "") == "shutting_down");
  BOOST_TEST(h.events_naming("late") == 0u);
  BOOST_TEST(h.ex->steps == 2);
  BOOST_TEST(h.live_requests.load() == 0);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(drain)

BOOST_AUTO_TEST_CASE(drain_finishes_refuses_then_cancels_at_the_timeout) {
  using namespace std::chrono_literals;
  harness h;
  h.submit("short", 3);
  h.submit("long", 200);
  h.settle();  // both admitted; the first step waits for the executor
  h.drain(2.0);
  h.settle();
  BOOST_TEST(h.drain_replies.empty(), "the drain answered while jobs were live");

  const uint64_t late = h.submit("late", 3);
  h.settle();
  BOOST_TEST(h.reply(late).at("error").value("code", "") == "shutting_down");

  for (int i = 0; i < 10 && h.stream("short", false).terminal.is_null(); ++i) h.step();
  auto s = h.stream("short");
  BOOST_TEST(s.terminal.value("finish_reason", "") == "length");
  BOOST_TEST(s.terminal.value("text", "") == "abc");
  BOOST_TEST(h.stream("long", false).terminal.is_null());
  BOOST_TEST(h.drain_replies.empty(), "the drain answered while a job was live");

  h.sched.advance_time(1999ms);  // just before the grace period ends
  h.step();
  BOOST_TEST(h.stream("long", false).terminal.is_null(), "cancelled before the drain's timeout");
  BOOST_TEST(h.drain_replies.empty());

  BOOST_TEST(h.sched.advance_time(1ms) >= 1u);  // the timeout: s_drained
  h.settle();
  auto l = h.stream("long");
  BOOST_TEST(l.terminal.value("kind", "") == "done");
  BOOST_TEST(l.terminal.value("finish_reason", "") == "cancelled");
  BOOST_TEST(h.drain_replies == std::vector<bool>{true}, boost::test_tools::per_element());

  h.run();  // the step that was in flight comes back: nothing more for the cancelled job
  BOOST_TEST(h.stream("long").events.size() == l.events.size());
  BOOST_TEST(h.drain_replies.size() == 1u);
  BOOST_TEST(h.events_naming("late") == 0u);
  BOOST_TEST(h.live_requests.load() == 0);
}

BOOST_AUTO_TEST_SUITE_END()
