// In-order delivery of one job's events: holes wait for fetch, duplicates drop, the terminal
// event ends the stream.
#include <boost/test/unit_test.hpp>

#include "tools/bench/sequencer.hpp"

namespace conveyor::bench {
namespace {

event_view ev(int64_t seq, event_kind kind = event_kind::tokens) {
  event_view e;
  e.id = "run/0";
  e.seq = seq;
  e.kind = kind;
  e.num_tokens = kind == event_kind::tokens ? 1 : 0;
  return e;
}

struct fixture {
  sequencer s;
  std::vector<int64_t> got;
  bool live(int64_t seq, event_kind kind = event_kind::tokens) {
    return s.on_live(ev(seq, kind), [&](const event_view& e) { got.push_back(e.seq); });
  }
  int fetched(std::vector<event_view> events) {
    return s.on_fetched(events, [&](const event_view& e) { got.push_back(e.seq); });
  }
};

} // namespace

BOOST_AUTO_TEST_SUITE(bench_sequencer)

BOOST_FIXTURE_TEST_CASE(in_order_events_are_delivered_at_once, fixture) {
  BOOST_TEST(!live(0, event_kind::accepted));
  BOOST_TEST(!live(1));
  BOOST_TEST(!live(2));
  BOOST_TEST(got == (std::vector<int64_t>{0, 1, 2}), boost::test_tools::per_element());
  BOOST_TEST(s.next_seq() == 3);
  BOOST_TEST(!s.has_hole());
}

BOOST_FIXTURE_TEST_CASE(a_hole_holds_later_events_until_fetch_fills_it, fixture) {
  live(0, event_kind::accepted);
  BOOST_TEST(live(3));  // 1 and 2 were lost
  BOOST_TEST(live(4));
  BOOST_TEST(s.has_hole());
  BOOST_TEST(got.size() == 1u);
  // fetch(from_seq=1) returns 1..4; 3 and 4 are delivered once.
  BOOST_TEST(fetched({ev(1), ev(2), ev(3), ev(4)}) == 4);
  BOOST_TEST(got == (std::vector<int64_t>{0, 1, 2, 3, 4}), boost::test_tools::per_element());
  BOOST_TEST(!s.has_hole());
  BOOST_TEST(s.next_seq() == 5);
}

BOOST_FIXTURE_TEST_CASE(a_fetch_that_stops_short_still_releases_what_follows, fixture) {
  live(0, event_kind::accepted);
  live(3);
  BOOST_TEST(fetched({ev(1), ev(2)}) == 3);  // 1, 2 fetched, then 3 from the buffer
  BOOST_TEST(got == (std::vector<int64_t>{0, 1, 2, 3}), boost::test_tools::per_element());
}

BOOST_FIXTURE_TEST_CASE(duplicates_live_or_fetched_are_dropped, fixture) {
  live(0, event_kind::accepted);
  live(1);
  BOOST_TEST(!live(1));
  BOOST_TEST(!live(0));
  BOOST_TEST(fetched({ev(0), ev(1)}) == 0);
  BOOST_TEST(got.size() == 2u);
}

BOOST_FIXTURE_TEST_CASE(nothing_follows_the_terminal_event, fixture) {
  live(0, event_kind::accepted);
  live(3, event_kind::tokens);  // held
  BOOST_TEST(fetched({ev(1), ev(2, event_kind::done)}) == 2);
  BOOST_TEST(s.ended());
  BOOST_TEST(!s.has_hole());  // the held event after done is dropped
  BOOST_TEST(!live(3));
  BOOST_TEST(!live(4));
  BOOST_TEST(got == (std::vector<int64_t>{0, 1, 2}), boost::test_tools::per_element());
}

BOOST_FIXTURE_TEST_CASE(an_error_event_is_terminal_too, fixture) {
  live(0, event_kind::error);
  BOOST_TEST(s.ended());
  BOOST_TEST(!live(1));
  BOOST_TEST(got.size() == 1u);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::bench
