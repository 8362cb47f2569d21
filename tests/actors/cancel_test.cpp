// Case 3 of the actor tier: cancel racing the job's life. Before it is scheduled (queued behind
// a full running set), while one of its steps is in the executor, and after it finished. The
// cancel reply names the state afterwards; the job has exactly one terminal event each time.
#include <boost/test/unit_test.hpp>

#include "harness.hpp"

using namespace conveyor;
using namespace conveyor::actor_test;

BOOST_AUTO_TEST_SUITE(cancel_races)

BOOST_AUTO_TEST_CASE(cancel_before_the_job_is_scheduled) {
  harness h({.max_num_seqs = 1});
  h.submit("long", 6);
  h.settle();  // "long" holds the only running slot; its first step waits for the executor
  const uint64_t sub = h.submit("queued", 6);
  h.settle();
  BOOST_TEST(h.reply(sub).value("ok", false));
  const uint64_t st = h.status("queued");
  h.settle();
  BOOST_TEST(h.reply(st).value("state", "") == "queued");

  const uint64_t c = h.cancel("queued");
  h.settle();
  BOOST_TEST(h.reply(c).value("state", "") == "cancelled");
  auto s = h.stream("queued");
  BOOST_TEST(s.events.size() == 2u);  // accepted, done
  BOOST_TEST(s.terminal.value("finish_reason", "") == "cancelled");
  BOOST_TEST(s.terminal.at("usage").value("completion_tokens", -1) == 0);

  h.run();
  BOOST_TEST(h.ex->seen.size() == 1u, "the cancelled job reached a step");
  BOOST_TEST(h.stream("long").terminal.value("finish_reason", "") == "length");
  BOOST_TEST(h.stream("queued").events.size() == 2u);
  BOOST_TEST(h.live_requests.load() == 0);
}

BOOST_AUTO_TEST_CASE(cancel_while_a_step_is_in_flight) {
  harness h;
  h.submit("inflight", 30);
  h.step();  // 'a' published; the next step is now in the executor's mailbox
  BOOST_REQUIRE(h.step_pending());

  const uint64_t c = h.cancel("inflight");
  h.settle();
  BOOST_TEST(h.reply(c).value("state", "") == "cancelled");
  BOOST_TEST(!h.stream("inflight").terminal.is_null());

  h.run();  // the in-flight step's token for the cancelled job arrives now: dropped
  BOOST_TEST(h.ex->sampled.begin()->second == 2);
  auto s = h.stream("inflight");
  BOOST_TEST(s.terminal.value("kind", "") == "done");
  BOOST_TEST(s.terminal.value("finish_reason", "") == "cancelled");
  BOOST_TEST(s.token_ids == std::vector<token_id>{'a'}, boost::test_tools::per_element());
  BOOST_TEST(s.terminal.at("usage").value("completion_tokens", -1) == 1);
  BOOST_TEST(h.live_requests.load() == 0);

  // The scheduler is not stuck on the cancelled job's step: the next job runs to its end.
  h.submit("after", 3);
  h.run();
  BOOST_TEST(h.stream("after").terminal.value("text", "") == "abc");
}

BOOST_AUTO_TEST_CASE(cancel_after_the_job_finished) {
  harness h;
  h.submit("over", 3);
  h.run();
  const size_t before = h.log.events.size();
  const uint64_t c = h.cancel("over");
  h.run();
  BOOST_TEST(h.reply(c).value("state", "") == "finished");
  BOOST_TEST(h.log.events.size() == before, "a cancel after the end published something");
  auto s = h.stream("over");
  BOOST_TEST(s.terminal.value("finish_reason", "") == "length");

  const uint64_t unknown = h.cancel("never-submitted");
  h.run();
  BOOST_TEST(h.reply(unknown).at("error").value("code", "") == "not_found");
}

BOOST_AUTO_TEST_SUITE_END()
