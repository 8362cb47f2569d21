// A job whose deadline has already passed when the scheduler takes it ends inside the scheduler's
// submit handler, so its end reaches the request actor before the submit's answer does. The
// producer must still get exactly one reply, and the stream must still start with `accepted`
// (seq 0) and end once (issue 26, defect 1: before the fix the actor quit on the early end and
// the reply never came, which also stalled every later reply of that DEALER).
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <thread>

#include "harness.hpp"

using namespace conveyor;
using namespace conveyor::actor_test;

namespace {

// A job with a deadline of 1 ms that has passed before the scheduler sees it.
schemas::submit_request expired_job(const std::string& id) {
  auto job = make_job(id, 8);
  job.deadline_ms = 1;
  return job;
}

void past_the_deadline() { std::this_thread::sleep_for(std::chrono::milliseconds(5)); }

} // namespace

BOOST_AUTO_TEST_SUITE(deadline_at_submit)

BOOST_AUTO_TEST_CASE(a_job_past_its_deadline_at_submit_gets_one_reply_and_one_end) {
  harness h;
  const uint64_t tag = h.send(expired_job("late"));
  past_the_deadline();
  h.run();
  BOOST_TEST(h.reply(tag).value("ok", false), "the submit must be answered (accepted) although the job ended at once");
  const auto s = h.stream("late");  // accepted at seq 0, one terminal event
  BOOST_TEST(s.terminal.value("kind", "") == "done");
  BOOST_TEST(s.terminal.value("finish_reason", "") == "deadline");
  BOOST_TEST(h.live_requests.load() == 0);
}

// The same with the journal's commit held: the reply waits for the commit, the end for the reply.
BOOST_AUTO_TEST_CASE(an_expired_job_waits_for_its_commit_and_still_gets_its_reply) {
  harness h;
  h.log.hold_accepts = true;
  const uint64_t tag = h.send(expired_job("late-journal"));
  past_the_deadline();
  h.run();
  BOOST_TEST(h.replies(tag).empty(), "the reply must wait for the commit");
  h.release();
  h.run();
  BOOST_TEST(h.reply(tag).value("ok", false));
  BOOST_TEST(h.stream("late-journal").terminal.value("finish_reason", "") == "deadline");
  BOOST_TEST(h.live_requests.load() == 0);
}

// Many of them from one producer, mixed with jobs that run: every request gets its reply.
BOOST_AUTO_TEST_CASE(every_request_of_a_mixed_burst_is_answered) {
  harness h;
  std::vector<uint64_t> tags;
  for (int i = 0; i < 30; ++i) {
    if (i % 3 == 0) tags.push_back(h.send(expired_job("burst-" + std::to_string(i))));
    else tags.push_back(h.submit("burst-" + std::to_string(i), 3));
  }
  past_the_deadline();
  h.run();
  for (uint64_t t : tags) BOOST_TEST(h.replies(t).size() == 1u, "request tag " << t);
  for (int i = 0; i < 30; ++i) h.stream("burst-" + std::to_string(i));
  BOOST_TEST(h.live_requests.load() == 0);
}

BOOST_AUTO_TEST_SUITE_END()
