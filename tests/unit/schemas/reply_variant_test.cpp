// The typed reply (what intakes get) encodes each kind as its own map, and a dead letter carries
// the request bytes unchanged.
#include <boost/test/unit_test.hpp>

#include <msgpack.hpp>

#include "schemas/events.hpp"
#include "schemas/replies.hpp"
#include "schemas/stored.hpp"

using namespace conveyor::schemas;

BOOST_AUTO_TEST_SUITE(reply_variant)

// Each alternative is encoded by its own map: its "ok" and the key only it carries.
BOOST_AUTO_TEST_CASE(each_reply_kind_encodes_its_own_map) {
  struct row {
    reply r;
    bool ok;
    const char* key;
  };
  const std::vector<row> rows = {
      {submit_reply{"j1"}, true, "topic"},
      {error_reply{"j1", error_code::overloaded, "queue full", {}}, false, "error"},
      {cancel_reply{"j1", job_state::cancelled}, true, "state"},
      {status_reply{"j1", job_state::running, 4, 2, 3, std::nullopt}, true, "next_seq"},
      {fetch_reply{"j1", {encode(accepted_event{"j1", 0})}, false}, true, "events"},
      {health_reply{server_status::serving, "m"}, true, "protocol"},
      {stats_reply{}, true, "jobs_rejected"},
  };
  for (const auto& r : rows) {
    const wire_bytes bytes = encode(r.r);
    msgpack::object_handle h = msgpack::unpack(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    std::map<std::string, msgpack::object> m;
    h.get().convert(m);
    BOOST_TEST(m.at("ok").as<bool>() == r.ok, r.key);
    BOOST_TEST(m.count(r.key) == 1u, r.key);
  }
}

BOOST_AUTO_TEST_CASE(a_dead_letter_keeps_the_request) {
  const wire_bytes request{0x81, 0xa2, 'i', 'd', 0xa1, 'x'};
  const wire_bytes dead = encode_dead_letter("x", error_code::internal, "delivered 5 times", 5, request);
  msgpack::object_handle h = msgpack::unpack(reinterpret_cast<const char*>(dead.data()), dead.size());
  std::map<std::string, msgpack::object> m;
  h.get().convert(m);
  BOOST_TEST(m.at("id").as<std::string>() == "x");
  BOOST_TEST(m.at("deliveries").as<uint64_t>() == 5u);
  const auto& bin = m.at("request");
  BOOST_REQUIRE(bin.type == msgpack::type::BIN);
  BOOST_TEST(wire_bytes(bin.via.bin.ptr, bin.via.bin.ptr + bin.via.bin.size) == request);
  std::map<std::string, std::string> e;
  m.at("error").convert(e);
  BOOST_TEST(e.at("code") == "internal");
  BOOST_TEST(e.at("message") == "delivered 5 times");
}

BOOST_AUTO_TEST_SUITE_END()
