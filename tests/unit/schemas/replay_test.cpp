// replay(): the one reading of a job's stored events that journal recovery and NATS failover
// share: the gapless run from seq 0, its tokens, and whether it ended.
#include <boost/test/unit_test.hpp>

#include "schemas/replay.hpp"

using namespace conveyor;
using namespace conveyor::schemas;

namespace {

tokens_event tokens(uint64_t seq, std::vector<token_id> ids) {
  tokens_event t;
  t.id = "j";
  t.seq = seq;
  t.token_ids = std::move(ids);
  return t;
}

done_event done(uint64_t seq) {
  done_event d;
  d.id = "j";
  d.seq = seq;
  return d;
}

} // namespace

BOOST_AUTO_TEST_SUITE(replay_events)

BOOST_AUTO_TEST_CASE(nothing_stored_resumes_from_the_start) {
  const replayed r = replay({});
  BOOST_TEST(r.at.next_seq == 0u);
  BOOST_TEST(r.at.published.empty());
  BOOST_TEST(!r.end.has_value());
  BOOST_TEST(r.after_gap == 0u);
}

BOOST_AUTO_TEST_CASE(events_in_any_order_give_their_tokens_in_seq_order) {
  const replayed r = replay({tokens(2, {5, 6}), accepted_event{"j", 0}, tokens(1, {3, 4})});
  BOOST_TEST(r.at.next_seq == 3u);
  BOOST_TEST((r.at.published == std::vector<token_id>{3, 4, 5, 6}));
  BOOST_TEST(!r.end.has_value());
}

BOOST_AUTO_TEST_CASE(a_terminal_event_ends_the_job) {
  const replayed r = replay({accepted_event{"j", 0}, tokens(1, {3}), done(2)});
  BOOST_TEST_REQUIRE(r.end.has_value());
  BOOST_TEST(std::holds_alternative<done_event>(*r.end));
  BOOST_TEST(r.at.next_seq == 3u);
  const replayed e = replay({accepted_event{"j", 0}, error_event{"j", 1, error_code::internal, "x"}});
  BOOST_TEST_REQUIRE(e.end.has_value());
  BOOST_TEST(std::holds_alternative<error_event>(*e.end));
}

BOOST_AUTO_TEST_CASE(a_gap_stops_the_run_and_what_follows_is_counted) {
  const replayed r = replay({accepted_event{"j", 0}, tokens(1, {3}), tokens(3, {9}), done(4)});
  BOOST_TEST(r.at.next_seq == 2u);
  BOOST_TEST((r.at.published == std::vector<token_id>{3}));
  BOOST_TEST(!r.end.has_value());  // the done event lies past the gap: the job goes on from seq 2
  BOOST_TEST(r.after_gap == 2u);
}

BOOST_AUTO_TEST_CASE(a_repeated_seq_counts_once) {
  const replayed r = replay({accepted_event{"j", 0}, tokens(1, {3}), tokens(1, {3}), tokens(2, {4})});
  BOOST_TEST(r.at.next_seq == 3u);
  BOOST_TEST((r.at.published == std::vector<token_id>{3, 4}));
  BOOST_TEST(r.after_gap == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
