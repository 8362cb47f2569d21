// Case 6 of the actor tier: the front actor. A PUSHed frame that did not decode may publish an
// error event only on a topic no job owns (the job table decides: a known id is `duplicate`,
// never published); over ROUTER every request gets exactly one reply.
#include <boost/test/unit_test.hpp>

#include "harness.hpp"

using namespace conveyor;
using namespace conveyor::actor_test;

namespace {

schemas::decode_error bad_max_tokens(const std::string& id) {
  return {schemas::error_code::bad_request, "max_tokens", "must be >= 1", id, true};
}

} // namespace

BOOST_AUTO_TEST_SUITE(front_actor)

BOOST_AUTO_TEST_CASE(pushed_decode_error_publishes_only_for_an_unknown_id) {
  harness h;
  h.submit("live", 20);
  h.step();
  const size_t before = h.events_naming("live");
  h.push(bad_max_tokens("live"));  // a stranger must not publish on a live job's topic
  h.push(make_job("live", 3));     // nor may a PUSHed duplicate submit
  h.settle();
  BOOST_TEST(h.events_naming("live") == before);
  BOOST_TEST(h.unlogged("live").empty());

  h.run();
  auto s = h.stream("live");  // seq still gap-free: nothing was inserted
  BOOST_TEST(s.terminal.value("finish_reason", "") == "length");
  const size_t after = h.events_naming("live");
  h.push(bad_max_tokens("live"));  // finished, but remembered: still its topic
  h.run();
  BOOST_TEST(h.events_naming("live") == after);

  h.push(bad_max_tokens("stranger"));
  h.run();
  auto u = h.unlogged("stranger");
  BOOST_REQUIRE_EQUAL(u.size(), 1u);
  BOOST_TEST(u[0].value("kind", "") == "error");
  BOOST_TEST(u[0].value("seq", uint64_t(99)) == 0u);
  BOOST_TEST(u[0].value("id", "") == "stranger");
  BOOST_TEST(u[0].value("code", "") == "bad_request");
  BOOST_TEST(u[0].value("message", "").find("max_tokens") != std::string::npos);
  BOOST_TEST(h.events_naming("stranger") == 1u);

  const size_t total = h.log.events.size();
  h.push(schemas::cancel_request{"live"});  // PULL takes only submits; nobody to tell
  h.run();
  BOOST_TEST(h.log.events.size() == total);
  BOOST_TEST(h.total_replies() == 1u);  // the ROUTER submit of "live" only
  BOOST_TEST(h.live_requests.load() == 0);
}

BOOST_AUTO_TEST_CASE(every_router_request_gets_exactly_one_reply) {
  harness h;
  schemas::submit_request outside = make_job("outside", 3);
  outside.input = std::vector<token_id>{999};
  const uint64_t submit = h.submit("r1", 4), dup = h.submit("r1", 4), cancel = h.cancel("nobody"),
                 status = h.status("r1"), fetch = h.send(schemas::fetch_request{"r1", 0, 10}),
                 stats = h.send(schemas::stats_request{}), health = h.send(schemas::health_request{}),
                 bad = h.send(schemas::decode_error{schemas::error_code::bad_request, "op", "unknown op", "", false}),
                 vocab = h.send(outside);
  h.run();
  BOOST_TEST(h.total_replies() == 9u);
  for (uint64_t t : {submit, dup, cancel, status, fetch, stats, health, bad, vocab}) h.reply(t);  // exactly one each
  BOOST_TEST(h.reply(submit).value("ok", false));
  BOOST_TEST(h.reply(dup).at("error").value("code", "") == "duplicate");
  BOOST_TEST(h.reply(cancel).at("error").value("code", "") == "not_found");
  BOOST_TEST(h.reply(stats).value("ok", false));
  BOOST_TEST(h.reply(health).value("status", "") == "serving");
  BOOST_TEST(h.reply(bad).at("error").value("code", "") == "bad_request");
  BOOST_TEST(h.reply(vocab).at("error").value("code", "") == "bad_request");
  BOOST_TEST(h.events_naming("outside") == 0u);

  // Once the job ran: status and fetch report it.
  const uint64_t status2 = h.status("r1"), fetch2 = h.send(schemas::fetch_request{"r1", 0, 10});
  h.run();
  BOOST_TEST(h.total_replies() == 11u);
  const json st = h.reply(status2);
  BOOST_TEST(st.value("state", "") == "finished");
  const size_t n = h.stream("r1").events.size();
  BOOST_TEST(st.value("next_seq", uint64_t(0)) == n);
  const json f = h.reply(fetch2);
  BOOST_TEST(f.at("events").size() == n);
  BOOST_TEST(f.value("complete", false));
  BOOST_TEST(h.live_requests.load() == 0);
}

// Once a stop is requested (SIGTERM), a new job is refused as shutting_down at the front door,
// before the drain reaches the job table (the HTTP /health already says 503 by then); a job
// already running goes on.
BOOST_AUTO_TEST_CASE(a_requested_stop_refuses_new_jobs_at_once) {
  harness h;
  h.submit("running", 4);
  h.settle();
  h.control.request_stop(0, "SIGTERM");
  const uint64_t tag = h.submit("late", 4);
  h.settle();
  const json r = h.reply(tag);
  BOOST_TEST(r["ok"] == false);
  BOOST_TEST(r["error"]["code"] == "shutting_down");
  BOOST_TEST(h.events_naming("late") == 0u);
  h.run();
  BOOST_TEST(h.stream("running").terminal.value("finish_reason", "") == "length");
}

BOOST_AUTO_TEST_SUITE_END()
