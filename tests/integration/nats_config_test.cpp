// The NATS settings' checks (each refusal names the setting) and the subject of a job's events,
// the same strings the Python client's events_subject() gives (test_nats_fleet.py).
#include <boost/test/unit_test.hpp>

#include "transport/nats_config.hpp"

using conveyor::transport::nats_config;
using conveyor::transport::nats_event_msg_id;
using conveyor::transport::nats_events_subject;

BOOST_AUTO_TEST_SUITE(nats_config_rules)

BOOST_AUTO_TEST_CASE(events_subjects_keep_slash_groups_and_escape_dots) {
  BOOST_TEST(nats_events_subject("conveyor.events", "job-1") == "conveyor.events.job-1");
  BOOST_TEST(nats_events_subject("conveyor.events", "batch-7/0") == "conveyor.events.batch-7.0");
  BOOST_TEST(nats_events_subject("conveyor.events", "bad.one/x") == "conveyor.events.bad%2Eone.x");
  BOOST_TEST(nats_events_subject("p", "/a//b/") == "p.%.a.%.b.%");
  BOOST_TEST(nats_events_subject("p", "a:b-c_d") == "p.a:b-c_d");
  // "a.b" and "a/b" are different jobs: different subjects.
  BOOST_TEST(nats_events_subject("p", "a.b") != nats_events_subject("p", "a/b"));
  BOOST_TEST(nats_event_msg_id("batch-7/0", 12) == "batch-7/0:12");
}

BOOST_AUTO_TEST_CASE(settings_are_checked_with_the_setting_named) {
  nats_config c;
  BOOST_TEST(c.validate().empty());  // off
  c.url = "nats://127.0.0.1:4222";
  BOOST_TEST(c.validate().empty());
  auto refused = [](nats_config x, const std::string& words) {
    const std::string e = x.validate();
    BOOST_TEST(e.find(words) != std::string::npos, "'" << e << "' lacks '" << words << "'");
  };
  nats_config b = c;
  b.url = "localhost:4222";
  refused(b, "not a NATS URL");
  b = c, b.url = "nats://a:4222,nats://b:4222";
  BOOST_TEST(b.validate().empty());  // a cluster
  b = c, b.url = "nats://a:4222, nats://b:4222";
  refused(b, "' nats://b:4222' is not a NATS URL");
  b = c, b.jobs_stream = "A.B";
  refused(b, "stream name 'A.B'");
  b = c, b.jobs_subject = "jobs.*";
  refused(b, "subject 'jobs.*'");
  b = c, b.events_prefix = "ev..x";
  refused(b, "subject 'ev..x'");
  b = c, b.dead_subject = c.events_prefix + ".dead";
  refused(b, "must not overlap");
  b = c, b.ack_wait_s = 0.5;
  refused(b, "--nats-ack-wait");
  b = c, b.max_deliver = 1;
  refused(b, "--nats-max-deliver");
  b = c, b.stream_replicas = 7;
  refused(b, "--nats-replicas");
  b = c, b.consumer = "a b";
  refused(b, "--nats-consumer");
}

BOOST_AUTO_TEST_SUITE_END()
