// Case 1 and 2 of the actor tier: flow control and coalescing of token batches on the event path
// (the fake publisher holds the acknowledgements), and a stop string ending the job.
#include <boost/test/unit_test.hpp>

#include "harness.hpp"

using namespace conveyor;
using namespace conveyor::actor_test;

namespace {

std::vector<token_id> letters(const std::string& s) { return {s.begin(), s.end()}; }

} // namespace

BOOST_AUTO_TEST_SUITE(flow_control)

// While the first tokens event is unacknowledged, later steps' tokens wait in the job table;
// the acknowledgement releases them to the request actor as one batch (one tokens event).
BOOST_AUTO_TEST_CASE(held_acknowledgement_coalesces_later_steps_into_one_batch) {
  harness h;
  h.log.hold = true;
  const uint64_t tag = h.submit("flow", 12);
  h.settle();
  BOOST_TEST(h.reply(tag).value("ok", false));

  h.step();  // 'a': out at once, its acknowledgement held
  auto s = h.stream("flow", false);
  BOOST_TEST(s.tokens_events == 1u);
  BOOST_TEST(s.token_ids == letters("a"), boost::test_tools::per_element());
  BOOST_TEST(h.log.held == 1u);
  BOOST_TEST(h.log.events.back().requested, "a tokens event must arrive as a request (its reply is the ack)");

  h.step();
  h.step();
  h.step();  // 'b' 'c' 'd' wait in the table
  BOOST_TEST(h.ex->sampled.begin()->second == 4);
  s = h.stream("flow", false);
  BOOST_TEST(s.tokens_events == 1u, "nothing may be published while the last batch is unacknowledged");

  h.release();
  h.settle();  // the ack reaches the scheduler, which sends b, c, d as one batch
  s = h.stream("flow", false);
  BOOST_REQUIRE_EQUAL(s.tokens_events, 2u);
  BOOST_TEST(s.events.back().at("token_ids").get<std::vector<token_id>>() == letters("bcd"), boost::test_tools::per_element());
  BOOST_TEST(s.events.back().value("text", "") == "bcd");
  BOOST_TEST(h.log.held == 1u);

  h.log.hold = false;  // from now on every event is acknowledged at once
  h.release();
  h.run();
  s = h.stream("flow");
  BOOST_TEST(s.token_ids == letters("abcdefghijkl"), boost::test_tools::per_element());
  BOOST_TEST(s.text == "abcdefghijkl");
  BOOST_TEST(s.terminal.value("kind", "") == "done");
  BOOST_TEST(s.terminal.value("finish_reason", "") == "length");
  BOOST_TEST(s.terminal.value("text", "") == "abcdefghijkl");
  BOOST_TEST(s.terminal.at("usage").value("completion_tokens", -1) == 12);
  BOOST_TEST(h.live_requests.load() == 0);
}

// A job that finishes while its last batch is unacknowledged: the waiting tokens go out at
// once, before the done event, without waiting for the acknowledgement.
BOOST_AUTO_TEST_CASE(finishing_job_flushes_waiting_tokens_before_done) {
  harness h;
  h.log.hold = true;
  h.submit("finish", 5);
  h.run();  // every step runs; only the first batch's ack is held
  auto s = h.stream("finish");
  BOOST_REQUIRE_EQUAL(s.events.size(), 4u);  // accepted, tokens [a], tokens [b c d e], done
  BOOST_TEST(s.events[1].at("token_ids").get<std::vector<token_id>>() == letters("a"), boost::test_tools::per_element());
  BOOST_TEST(s.events[2].at("token_ids").get<std::vector<token_id>>() == letters("bcde"), boost::test_tools::per_element());
  BOOST_TEST(s.terminal.value("text", "") == "abcde");
  BOOST_TEST(h.log.held == 2u);

  h.release();  // late acknowledgements of a finished job change nothing
  h.run();
  BOOST_TEST(h.stream("finish").events.size() == 4u);
  BOOST_TEST(h.live_requests.load() == 0);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(stop_strings)

// Tokens a b c d ...: stop "cd" matches at d. The text ends before it, no client sees "c", and
// the request actor's s_stop ends the sequence in the scheduler (reason stop in the table, a
// few steps after the match, never at max_tokens).
BOOST_AUTO_TEST_CASE(stop_string_cuts_the_text_and_ends_the_sequence) {
  harness h;
  const uint64_t tag = h.submit("stop", 40, {"cd"});
  h.run();
  BOOST_TEST(h.reply(tag).value("ok", false));
  auto s = h.stream("stop");
  BOOST_TEST(s.terminal.value("kind", "") == "done");
  BOOST_TEST(s.terminal.value("finish_reason", "") == "stop");
  BOOST_TEST(s.terminal.value("text", "") == "ab");
  BOOST_TEST(s.text == "ab", "the tokens events showed a held-back stop-string prefix");
  BOOST_TEST(s.token_ids == letters("abcd"), boost::test_tools::per_element());
  // The usage counts the tokens up to the match, the ones the events carried, not those the
  // scheduler made before it learnt of the stop.
  BOOST_TEST(s.terminal.at("usage").value("completion_tokens", -1) == 4);

  // s_stop follows the match by a few steps (the request actor sees 'd' only once the batch
  // before it is acknowledged, and one step may be in flight), never by the 36 left.
  BOOST_TEST(h.ex->sampled.begin()->second < 10);
  const json st = [&] {
    const uint64_t t = h.status("stop");
    h.run();
    return h.reply(t);
  }();
  BOOST_TEST(st.value("state", "") == "finished");
  BOOST_TEST(st.value("finish_reason", "") == "stop", "the scheduler did not end the sequence for the stop string");
  BOOST_TEST(st.value("completion_tokens", -1) < 10);
  BOOST_TEST(h.live_requests.load() == 0);
}

BOOST_AUTO_TEST_SUITE_END()
