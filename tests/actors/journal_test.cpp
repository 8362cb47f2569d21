// The request actor with the journal's write-ahead: the `accepted` reply waits for the commit
// (the fake publisher holds it), the scheduler runs the job meanwhile, and a job that ends
// before the commit still gets its one reply; the request the publisher stores decodes back to
// the job, with the seed the job samples with.
#include <boost/test/unit_test.hpp>

#include "harness.hpp"
#include "schemas/requests.hpp"

using namespace conveyor;
using namespace conveyor::actor_test;

BOOST_AUTO_TEST_SUITE(journal_write_ahead)

BOOST_AUTO_TEST_CASE(a_job_that_ends_before_its_commit_still_gets_its_reply) {
  harness h;
  h.log.hold_accepts = true;
  const uint64_t tag = h.submit("quick", 3);
  h.run();  // every step runs while the `accepted` reply waits
  const auto s = h.stream("quick");
  BOOST_TEST(s.terminal.value("kind", "") == "done");
  BOOST_TEST(h.replies(tag).empty(), "the reply must wait for the commit");
  BOOST_TEST(h.live_requests.load() == 1, "the request actor must live until its reply is out");
  h.release();
  h.run();
  BOOST_TEST(h.reply(tag).value("ok", false));
  BOOST_TEST(h.live_requests.load() == 0);
}

BOOST_AUTO_TEST_CASE(the_stored_request_decodes_to_the_job_with_its_seed) {
  harness h;
  auto job = make_job("stored", 4);
  job.seed.reset();  // the server picks one; it must be stored
  job.temperature = 0.8f;
  const uint64_t tag = h.send(job);
  h.run();
  BOOST_TEST(h.reply(tag).value("ok", false));
  BOOST_TEST_REQUIRE(h.log.requests.count("stored") == 1u);
  const auto decoded = schemas::decode_request(h.log.requests.at("stored"), schemas::decode_limits{});
  const auto* back = std::get_if<schemas::submit_request>(&decoded);
  BOOST_TEST_REQUIRE(back != nullptr);
  BOOST_TEST(back->id == "stored");
  BOOST_TEST(back->max_tokens == 4);
  BOOST_TEST(back->temperature == 0.8f);
  BOOST_TEST(back->seed.has_value(), "a job without a seed must be stored with the one it samples with");
  BOOST_TEST(std::get<std::string>(back->input) == "hi");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(journal_cancel)

// The cancel reply waits for the publisher's commit of the cancel (p_cancel's reply).
BOOST_AUTO_TEST_CASE(an_acknowledged_cancel_was_first_stored) {
  harness h;
  h.submit("long", 50);
  h.step();
  h.step();
  const uint64_t tag = h.cancel("long");
  h.run();
  BOOST_TEST(h.reply(tag).value("state", "") == "cancelled");
  BOOST_TEST_REQUIRE(h.log.cancels.size() == 1u);
  BOOST_TEST(h.log.cancels[0] == "long");
  BOOST_TEST(h.stream("long").terminal.value("finish_reason", "") == "cancelled");
}

BOOST_AUTO_TEST_SUITE_END()
