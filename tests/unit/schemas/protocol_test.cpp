#include <boost/test/unit_test.hpp>

#include "schemas/protocol.hpp"

using namespace conveyor::schemas;

BOOST_AUTO_TEST_SUITE(protocol)

BOOST_AUTO_TEST_CASE(valid_id_accepts_the_documented_alphabet_and_length) {
  BOOST_TEST(valid_id("a"));
  BOOST_TEST(valid_id("AZaz09._:/-"));
  BOOST_TEST(valid_id(std::string(128, 'x')));
  BOOST_TEST(!valid_id(""));
  BOOST_TEST(!valid_id(std::string(129, 'x')));
  for (char c : std::string(" #*?\"'\\\n\t+=,;!@$%^&()[]{}<>|~`"))
    BOOST_TEST(!valid_id(std::string("a") + c), "char " << int(c));
  BOOST_TEST(!valid_id("j\xc3\xb6"));
  BOOST_TEST(!valid_id(std::string("a\0b", 3)));
}

BOOST_AUTO_TEST_CASE(topic_wraps_the_id_in_job_and_a_slash) {
  BOOST_TEST(topic_for("job-1") == "job/job-1/");
  BOOST_TEST(topic_for("batch-7/item-3") == "job/batch-7/item-3/");
  BOOST_TEST(std::string(heartbeat_topic) == "sys/");
}

BOOST_AUTO_TEST_CASE(error_codes_round_trip_through_their_wire_names) {
  const char* names[] = {"bad_request", "too_long", "overloaded", "duplicate",
                         "not_found", "shutting_down", "internal"};
  for (const char* name : names) {
    auto code = error_code_from_string(name);
    BOOST_TEST_REQUIRE(code.has_value(), name);
    BOOST_TEST(std::string(to_string(*code)) == name);
  }
  BOOST_TEST(!error_code_from_string("busy").has_value());
  BOOST_TEST(!error_code_from_string("").has_value());
}

BOOST_AUTO_TEST_CASE(states_and_statuses_have_wire_names) {
  BOOST_TEST(std::string(to_string(job_state::queued)) == "queued");
  BOOST_TEST(std::string(to_string(job_state::running)) == "running");
  BOOST_TEST(std::string(to_string(job_state::finished)) == "finished");
  BOOST_TEST(std::string(to_string(job_state::cancelled)) == "cancelled");
  BOOST_TEST(std::string(to_string(job_state::failed)) == "failed");
  BOOST_TEST(std::string(to_string(server_status::serving)) == "serving");
  BOOST_TEST(std::string(to_string(server_status::draining)) == "draining");
}

BOOST_AUTO_TEST_SUITE_END()
